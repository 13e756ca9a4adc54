"""``mqadmin -n`` against a running mqbroker process (name server + broker on free ports): the
commands a newcomer runs after ``make run`` work over the remoting protocol."""

from __future__ import annotations

import json
import shutil

import pytest
from net_util import Mqbroker, mqadmin

from tests.waiting import wait_remote_dispatched


@pytest.fixture
def running(tmp_path):
    m = Mqbroker(tmp_path / "store")
    try:
        yield m
    finally:
        m.stop()


def test_newcomer_commands_over_the_network(running, tmp_path):
    ns, addr = running.namesrv_addr, running.broker_addr
    listed = mqadmin(ns, "clusterList")
    assert "DefaultCluster" in listed and "broker-a" in listed and addr in listed
    # the SPACE column is the broker's commitLogDiskRatio (it answered no disk keys over the network: 0.0)
    usage = shutil.disk_usage(tmp_path)
    [row] = json.loads(mqadmin(ns, "clusterList", "--output", "json"))
    assert abs(row["space"] - usage.used / usage.total) < 0.05, row
    status = json.loads(mqadmin(ns, "brokerStatus", "-b", addr, "--output", "json"))
    assert status["commitLogDirCapacity"].startswith("Total : ") and float(status["consumeQueueDiskRatio"]) > 0
    assert f"create topic to {addr} success." in mqadmin(ns, "updateTopic", "-c", "DefaultCluster", "-t", "NetT",
                                                         "-r", "2", "-w", "2")
    route = mqadmin(ns, "topicRoute", "-t", "NetT")
    assert addr in route and '"readQueueNums": 2' in route
    sent = mqadmin(ns, "sendMessage", "-t", "NetT", "-p", "hello", "-k", "key-1")
    assert "SEND_OK" in sent
    msg_id = sent.strip().splitlines()[-1].split()[-1]
    wait_remote_dispatched(ns, addr)  # the send is answered before reput writes the queue and the index
    found = mqadmin(ns, "queryMsgByKey", "-t", "NetT", "-k", "key-1")
    assert msg_id in found
    status = mqadmin(ns, "topicStatus", "-t", "NetT")
    assert sum(int(line.split()[3]) for line in status.splitlines() if line.startswith("broker-a")) == 1
    assert f"create user to {addr} success." in mqadmin(ns, "createUser", "-c", "DefaultCluster", "-u", "bob",
                                                        "-p", "pw")
    assert "bob" in mqadmin(ns, "listUser", "-c", "DefaultCluster")
