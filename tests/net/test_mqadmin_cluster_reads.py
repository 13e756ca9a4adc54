"""mqadmin -n reads on a cluster of two brokers: each command asks the brokers Apache's would ask.

Why: a topic command asks the brokers of the topic's route, and topicList asks the name server, so a
broker that hangs (registered, answering nothing) cannot fail or stall commands about topics it does
not serve; they used to ask every broker of the cluster and fail after its timeout. Cluster-wide
commands (``brokerStatus -c``, ``getBrokerConfig -c``) print every broker, not the first.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.net.test_mqadmin_partial_change import mqadmin
from tests.remoting_broker import running_broker
from tests.waiting import wait_remote_dispatched


def test_a_hung_broker_does_not_fail_commands_on_topics_it_does_not_serve(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        n = a.namesrv_addr
        assert mqadmin("updateTopic", "-n", n, "-b", a.broker_addr, "-t", "OnlyOnA").returncode == 0
        assert mqadmin("sendMessage", "-n", n, "-t", "OnlyOnA", "-p", "hi", "-k", "k1").returncode == 0
        wait_remote_dispatched(n, a.broker_addr)  # queryMsgByKey below reads broker-a's index
        status_c = mqadmin("brokerStatus", "-n", n, "-c", "DefaultCluster", "--output", "json")
        config_c = mqadmin("getBrokerConfig", "-n", n, "-c", "DefaultCluster")
        os.kill(b.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            status = mqadmin("topicStatus", "-n", n, "-t", "OnlyOnA")
            listed = mqadmin("topicList", "-n", n)
            by_key = mqadmin("queryMsgByKey", "-n", n, "-t", "OnlyOnA", "-k", "k1")
            took = time.monotonic() - started
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    for r in (status, listed, by_key):
        assert r.returncode == 0, r.stdout + r.stderr
    assert [line.split()[0] for line in status.stdout.splitlines()[1:5]] == ["broker-a"] * 4
    assert "OnlyOnA" in listed.stdout.split() and "broker-b" in listed.stdout.split()
    assert len(by_key.stdout.splitlines()) == 2
    assert took < 15  # no 5 s request timeout waited out on broker-b (three commands, ~2 s each to start)
    # -c: every broker of the cluster, by address; Apache's one "Master" block per broker
    assert status_c.returncode == 0 and set(json.loads(status_c.stdout)) == {a.broker_addr, b.broker_addr}
    masters = [line for line in config_c.stdout.splitlines() if line.startswith("============Master: ")]
    assert sorted(masters) == sorted(f"============Master: {x}============" for x in (a.broker_addr, b.broker_addr))


def test_topic_route_shows_the_order_topic_conf_clients_receive(tmp_path: Path) -> None:
    # the name server gives routes the orderConf only with orderMessageEnable (Apache's default off)
    with running_broker(tmp_path / "a", {"orderMessageEnable": "true"}) as a:
        n = a.namesrv_addr
        assert mqadmin("updateTopic", "-n", n, "-b", a.broker_addr, "-t", "Ordered").returncode == 0
        kv = mqadmin("updateKvConfig", "-n", n, "-s", "ORDER_TOPIC_CONFIG", "-k", "Ordered", "-v", "broker-a:4")
        assert kv.returncode == 0, kv.stderr
        route = mqadmin("topicRoute", "-n", n, "-t", "Ordered")
    assert route.returncode == 0, route.stderr
    assert json.loads(route.stdout)["orderTopicConf"] == "broker-a:4"
