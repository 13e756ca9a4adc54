"""mqbroker as processes on loopback: one name server and two brokers form a cluster (both
registered, routes right, a silent broker expires, a stopping one unregisters), and one
mqbroker process stops cleanly on SIGTERM. Every process is stopped by PID, even on failure."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from net_util import REPO, Mqbroker, RawClient

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import ClusterInfo, TopicRouteData
from broker_core.remoting.headers import SendMessageRequestHeaderV2
from tests.waiting import wait_for

RC = RequestCode
OK = ResponseCode.SUCCESS


def cluster_info(ns: RawClient) -> ClusterInfo:
    return ClusterInfo.from_json(ns.call(RC.GET_BROKER_CLUSTER_INFO).body)


def conf(path: Path, **props: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path



def test_two_brokers_one_name_server(tmp_path, procs):
    ns_proc = Mqbroker(tmp_path / "ns-store", "--namesrv-only", "--scanNotActiveBrokerInterval", "100",
                       "--brokerChannelExpiredTime", "1500", expect_broker=False)
    procs.append(ns_proc)
    ns_addr = ns_proc.namesrv_addr
    brokers = {}
    for name in ("broker-a", "broker-b"):
        # each broker registers its own expiry time (REGISTER_BROKER heartbeatTimeoutMillis), as RocketMQ's
        p = Mqbroker(tmp_path / name, "--broker-only", "-n", ns_addr, "--registerNameServerPeriod", "200",
                     "--brokerChannelExpiredTime", "1500",
                     config=conf(tmp_path / f"{name}.conf", brokerName=name, brokerClusterName="C1"),
                     expect_namesrv=False)
        procs.append(p)
        brokers[name] = p
    ns = RawClient(ns_addr)
    try:
        info = wait_for(lambda: (i := cluster_info(ns)) and len(i.broker_addr_table) == 2 and i, "2 brokers", 20)
        assert info.cluster_addr_table == {"C1": ["broker-a", "broker-b"]}
        assert {n: bd.broker_addrs[0] for n, bd in info.broker_addr_table.items()} == \
            {n: p.broker_addr for n, p in brokers.items()}
        # updateTopic -c C1: create on every master of the cluster, then the route lists both
        for bd in info.broker_addr_table.values():
            c = RawClient(bd.broker_addrs[0])
            try:
                r = c.call(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "CT", "defaultTopic": "TBW102", "readQueueNums": "3",
                                                        "writeQueueNums": "3", "perm": "6",
                                                        "topicFilterType": "SINGLE_TAG"})
                assert r.code == OK
                h = SendMessageRequestHeaderV2(a="P", b="CT", c="TBW102", d=4, e=0, f=0, g=1, h=0)
                sent = c.call(RC.SEND_MESSAGE_V2, h.to_ext_fields(), bd.broker_name.encode())
                assert sent.code == OK
            finally:
                c.close()
        route = TopicRouteData.from_json(ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "CT"}).body)
        assert sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas) == \
            [("broker-a", 3, 3, 6), ("broker-b", 3, 3, 6)]
        assert sorted(b.broker_name for b in route.broker_datas) == ["broker-a", "broker-b"]
        assert all(b.cluster == "C1" for b in route.broker_datas)
        # broker-b stops registering (process frozen, its connection stays open): it expires
        brokers["broker-b"].signal(signal.SIGSTOP)
        wait_for(lambda: list(cluster_info(ns).broker_addr_table) == ["broker-a"], "broker-b to expire", 15)
        route = TopicRouteData.from_json(ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "CT"}).body)
        assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
        # ... and comes back with its next registration
        brokers["broker-b"].signal(signal.SIGCONT)
        wait_for(lambda: len(cluster_info(ns).broker_addr_table) == 2, "broker-b to re-register", 15)
        wait_for(lambda: len(TopicRouteData.from_json(
            ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "CT"}).body).queue_datas) == 2, "CT on both again", 15)
        # a broker stopped with SIGTERM unregisters at once
        assert brokers["broker-a"].stop() == 0, brokers["broker-a"].output()
        assert list(cluster_info(ns).broker_addr_table) == ["broker-b"]
        assert "The broker shut down cleanly." in brokers["broker-a"].output()
    finally:
        ns.close()


def test_mqbroker_sigterm_clean_restart_and_lock(tmp_path, procs):
    store = tmp_path / "store"
    first = Mqbroker(store)
    procs.append(first)
    b = RawClient(first.broker_addr)
    try:
        r = b.call(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "Keep", "defaultTopic": "TBW102", "readQueueNums": "1",
                                                "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"})
        assert r.code == OK
        h = SendMessageRequestHeaderV2(a="P", b="Keep", c="TBW102", d=4, e=0, f=0, g=1, h=0)
        assert b.call(RC.SEND_MESSAGE_V2, h.to_ext_fields(), b"persisted").code == OK
        # the group's pull creates it (autoCreateSubscriptionGroup); a commit alone never would
        pulled = b.call(RC.PULL_MESSAGE, {"consumerGroup": "G", "topic": "Keep", "queueId": "0", "queueOffset": "0",
                                          "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                                          "suspendTimeoutMillis": "0", "subVersion": "0",
                                          "subscription": "*", "expressionType": "TAG"})
        assert pulled.code == OK, pulled.remark
        r = b.call(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Keep", "queueId": "0",
                                               "commitOffset": "1"})
        assert r.code == OK, r.remark
        # a second process on the same store is refused: the store is locked
        second = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store),
                                 "--listenPort", "0", "--namesrvPort", "0"], capture_output=True, text=True,
                                cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
        assert second.returncode == 1 and "mqbroker:" in second.stderr
        assert (store / "abort").exists()
    finally:
        b.close()
    assert first.stop() == 0
    assert "The broker shut down cleanly." in first.output()
    assert not (store / "abort").exists()
    again = Mqbroker(store)
    procs.append(again)
    c = RawClient(again.broker_addr)
    try:
        assert c.call(RC.GET_MAX_OFFSET, {"topic": "Keep", "queueId": "0"}).ext_fields["offset"] == "1"
        r = c.call(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Keep", "queueId": "0"})
        assert r.ext_fields["offset"] == "1"
    finally:
        c.close()


def test_broker_only_needs_a_name_server(tmp_path):
    r = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(tmp_path / "s"), "--broker-only"],
                       capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                       timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == "mqbroker: --broker-only needs name server addresses (-n host:port or namesrvAddr)"


def test_mqbroker_refuses_a_damaged_users_file_in_one_line(tmp_path):
    """A users.json (or acls.json) that cannot be read stops the start with one line naming it; it used to end
    in a Python traceback (the ACL store's error was not among those mqbroker reports)."""
    from broker_core.broker.broker import Broker

    store = tmp_path / "store"
    Broker(store).shutdown()
    (store / "config" / "users.json").write_text('{"users": {"x": {"username": "x", "password": "p", '
                                                  '"userType": "Root"}}}')
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "--listenPort", "0",
                           "--namesrvPort", "0"], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"mqbroker: cannot open store {store}: cannot read users file ") and "x" in line


def test_a_grpc_port_in_use_fails_the_start_in_one_line(tmp_path):
    """A second broker on one host keeps grpcServerPort 8081 unless told otherwise. Its start used to print
    "boot success" for the name server and the broker, then die with grpc's traceback."""
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    try:
        port = held.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(tmp_path / "store"),
                               "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", str(port)],
                              capture_output=True, text=True, cwd=REPO,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    finally:
        held.close()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "boot success" not in done.stdout, done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith(f"mqbroker: cannot listen for gRPC on 127.0.0.1:{port}")
