"""updateTopicList, updateSubGroupList and brokerConsumeStats send one list request a broker, as Apache's
mqadmin does (UPDATE_AND_CREATE_TOPIC_LIST 18, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST 225,
GET_BROKER_CONSUME_STATS 317). They sent a request per entry (17 a topic, 200 a group) and, for
brokerConsumeStats, GET_CONSUME_STATS a group: a file of N entries cost N round trips a broker, and an
account Apache's brokerConsumeStats serves (Cluster [Get], what 317 asks) was refused on the first
group it had no Group [Get] on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.remoting import RequestCode
from mqadmin.transport.remoting import RemotingBrokerClient
from tests.mqadmin.acl_cluster import SUPER, AclCluster, mqadmin

CREDS = ("--ak", SUPER[0], "--sk", SUPER[1])
RC = RequestCode


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(Path(tmp_path_factory.mktemp("list-requests")))
    try:
        for argv in (("createUser", "-u", "watcher", "-p", "watchpw"),
                     ("createAcl", "-s", "User:watcher", "-r", "Cluster:*", "-a", "Get", "-d", "Allow")):
            r = mqadmin(*argv, "-n", c.namesrv, "-b", c.addr_b, *CREDS)
            assert r.exit_code == 0, (argv, r.stdout, r.stderr)
        yield c
    finally:
        c.close()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, int]]:
    """(broker address, request code) of every request mqadmin sends in this process."""
    calls: list[tuple[str | None, int]] = []
    real = RemotingBrokerClient._call

    def recording(self, addr, code, *args, **kwargs):  # noqa: ANN001, ANN202 - a pass-through
        calls.append((addr, int(code)))
        return real(self, addr, code, *args, **kwargs)

    monkeypatch.setattr(RemotingBrokerClient, "_call", recording)
    return calls


def _codes(sent: list[tuple[str | None, int]], addr: str) -> list[int]:
    return [code for a, code in sent if a == addr]


def test_update_topic_list_sends_one_list_request_a_broker(cluster: AclCluster, tmp_path: Path,
                                                          sent: list[tuple[str | None, int]]) -> None:
    f = tmp_path / "topics.json"
    f.write_text(json.dumps([{"topicName": f"LT{i}", "readQueueNums": 2, "writeQueueNums": 2} for i in range(3)]
                            + [{"topicName": "LTB", "attributes": {"queue.type": "BatchCQ"}}]))
    r = mqadmin("updateTopicList", "-n", cluster.namesrv, "-c", "DefaultCluster", "-f", str(f), *CREDS)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"submit batch of topic config to {a} success, please check the result later."
        for a in (cluster.addr_a, cluster.addr_b)]
    for addr in (cluster.addr_a, cluster.addr_b):
        codes = _codes(sent, addr)
        assert codes.count(RC.UPDATE_AND_CREATE_TOPIC_LIST) == 1 and RC.UPDATE_AND_CREATE_TOPIC not in codes, codes
    config = mqadmin("topicRoute", "-n", cluster.namesrv, "-t", "LTB", "--output", "json", *CREDS)
    assert config.exit_code == 0 and len(json.loads(config.stdout)["queueDatas"]) == 2


def test_update_sub_group_list_sends_one_list_request_a_broker(cluster: AclCluster, tmp_path: Path,
                                                               sent: list[tuple[str | None, int]]) -> None:
    f = tmp_path / "groups.json"
    f.write_text(json.dumps([{"groupName": "LG1", "retryMaxTimes": 3}, {"groupName": "LG2"}]))
    r = mqadmin("updateSubGroupList", "-n", cluster.namesrv, "-b", cluster.addr_a, "-f", str(f))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == f"submit batch of group config to {cluster.addr_a} success, please check the result later.\n"
    codes = _codes(sent, cluster.addr_a)
    assert codes.count(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST) == 1, codes
    assert RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP not in codes, codes
    got = mqadmin("getConsumerConfig", "-n", cluster.namesrv, "-g", "LG1", "--output", "json", *CREDS)
    assert got.exit_code == 0 and {d["config"]["retryMaxTimes"] for d in json.loads(got.stdout)} == {3}


def test_broker_consume_stats_is_one_request_cluster_get_allows(cluster: AclCluster,
                                                               sent: list[tuple[str | None, int]]) -> None:
    for argv in (("updateTopic", "-b", cluster.addr_b, "-t", "WT", "-r", "1", "-w", "1"),
                 ("updateSubGroup", "-b", cluster.addr_b, "-g", "WG")):
        assert mqadmin(*argv, "-n", cluster.namesrv, *CREDS).exit_code == 0
    sent.clear()
    r = mqadmin("brokerConsumeStats", "-n", cluster.namesrv, "-b", cluster.addr_b, "--ak", "watcher",
                "--sk", "watchpw")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].split()[:2] == ["#Topic", "#Group"] and r.stdout.endswith("Diff Total: 0\n")
    assert _codes(sent, cluster.addr_b) == [RC.GET_BROKER_CONSUME_STATS]
