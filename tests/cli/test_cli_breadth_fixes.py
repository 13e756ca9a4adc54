"""Fixes found in a breadth review of mqadmin: queryCq's index and queue checks, subscription group
round trips (retry policy as an object, every field applied, unsupported attributes refused), copyUser
checking every name first, queryMsgByUniqueKey -g/-d, statsAll on a store directory, updateTopicList
checking every entry first, and explainAcl's usage errors. Each runs on a store directory and, where
the answer comes from a broker, over -n against a real mqbroker: both must answer the same.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from golden_helpers import copy_golden_store, golden_store_config

from tests.cli.conftest import Cli, write_conf
from tests.cli.test_cli_ops_commands import LiveConsumer
from tests.cli.test_cli_remote import mqadmin, mqadmin_ok
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_remote_dispatched

EXPONENTIAL = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 3}}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-breadth")),
                        extra_args=("--registerNameServerPeriod", "500")) as b:
        yield b


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# ------------------------------------------------------------------------------ bug 1: queryCq
def _store_with_expired_head(tmp_path: Path) -> tuple[Path, Path]:
    """Golden store-basic whose first two commitlog files were deleted as expired (deleteExpiredCommitLog):
    queue 0 of GoldenTopicA then starts at offset 17, its first 17 units still in the CQ file."""
    store = copy_golden_store("store-basic", tmp_path / "store")
    conf = write_conf(tmp_path / "broker.conf", golden_store_config("store-basic"))
    old = time.time() - 100 * 3600  # older than fileReservedTime (72 h)
    for f in (store / "commitlog").iterdir():
        os.utime(f, (old, old))
    r = Cli(store, conf)("deleteExpiredCommitLog")
    assert r.exit_code == 0, r.stderr
    return store, conf


def test_query_cq_below_the_min_offset_or_on_a_missing_queue_is_not_found(tmp_path: Path) -> None:
    store, conf = _store_with_expired_head(tmp_path)
    cli = Cli(store, conf)
    first = cli.json("queryMsgByOffset", "-t", "GoldenTopicA", "-b", "broker-a", "-i", "0", "-o", "17")
    shown = cli("queryCq", "-t", "GoldenTopicA", "-q", "0", "-i", "17", "-c", "1")
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1] == "max: 25, min: 17" and lines[3] == "idx: 17"
    assert lines[4].startswith(f"ConsumeQueueData{{physicOffset={first['commitLogOffset']}, "
                               f"physicSize={first['storeSize']}, ")
    expired = cli("queryCq", "-t", "GoldenTopicA", "-q", "0", "-i", "3", "-c", "2")
    assert expired.exit_code == 3 and expired.stdout == ""  # not the unit of offset 17 labelled "idx: 3"
    assert _one_line(expired.stderr) == "mqadmin queryCq: Index 3 of 0@GoldenTopicA is not exist!"
    past = cli("queryCq", "-t", "GoldenTopicA", "-q", "0", "-i", "25")
    assert past.exit_code == 3 and "Index 25 of 0@GoldenTopicA is not exist!" in past.stderr
    no_queue = cli("queryCq", "-t", "GoldenTopicA", "-q", "99", "-i", "0")
    assert no_queue.exit_code == 3 and _one_line(no_queue.stderr) == "mqadmin queryCq: 99@GoldenTopicA is not exist!"

    # the same answers from a broker running on that store
    conf_map = dict(golden_store_config("store-basic"), diskMaxUsedSpaceRatio="98")
    with running_broker(tmp_path, conf_map) as b:
        n = b.namesrv_addr
        assert mqadmin_ok("queryCq", "-n", n, "-t", "GoldenTopicA", "-q", "0", "-i", "17", "-c", "1") == shown.stdout
        for index, queue, remark in (("3", "0", "Index 3 of 0@GoldenTopicA is not exist!"),
                                     ("25", "0", "Index 25 of 0@GoldenTopicA is not exist!"),
                                     ("0", "99", "99@GoldenTopicA is not exist!")):
            r = mqadmin("queryCq", "-n", n, "-t", "GoldenTopicA", "-q", queue, "-i", index)
            assert (r.returncode, _one_line(r.stderr), r.stdout) == (3, f"mqadmin queryCq: {remark}", "")


# ------------------------------------------------------------------------------ bugs 2 and 3: groups
def _group_doc(out: str) -> dict[str, object]:
    docs = json.loads(out)
    assert len(docs) == 1
    return docs[0]["config"]


def test_retry_policy_is_exported_as_an_object_and_imported_back(cli: Cli, tmp_path: Path) -> None:
    assert cli("updateSubGroup", "-c", "DefaultCluster", "-g", "GX", "-p", json.dumps(EXPONENTIAL)).exit_code == 0
    assert cli("exportMetadata", "-c", "DefaultCluster", "-g", "-f", str(tmp_path / "exp")).exit_code == 0
    exported = json.loads((tmp_path / "exp" / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert exported["GX"]["groupRetryPolicy"] == EXPONENTIAL  # an object, as config/subscriptionGroup.json has it
    assert cli.json("getConsumerConfig", "-g", "GX")[0]["config"]["groupRetryPolicy"] == EXPONENTIAL
    listed = tmp_path / "groups.json"
    listed.write_text(json.dumps(list(exported.values())))
    other = tmp_path / "other"
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "--create", store=other).exit_code == 0
    r = cli("updateSubGroupList", "-c", "DefaultCluster", "-f", str(listed), store=other)
    assert r.exit_code == 0, r.stderr
    assert cli.json("getConsumerConfig", "-g", "GX", store=other)[0]["config"]["groupRetryPolicy"] == EXPONENTIAL


@pytest.mark.parametrize("policy, words", [
    ('"{\\"type\\":\\"EXPONENTIAL\\"}"', "groupRetryPolicy must be an object"),
    ('{"type": "LINEAR"}', "groupRetryPolicy.type must be EXPONENTIAL or CUSTOMIZED"),
    ('{"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": "soon"}}',
     "groupRetryPolicy.exponentialRetryPolicy.initial must be an integer"),
    ('{"customizedRetryPolicy": {"next": [1000, "x"]}}', "groupRetryPolicy.customizedRetryPolicy.next"),
])
def test_a_malformed_retry_policy_is_refused_naming_the_entry(cli: Cli, tmp_path: Path, policy: str,
                                                              words: str) -> None:
    f = tmp_path / "groups.json"
    f.write_text(f'[{{"groupName": "Good"}}, {{"groupName": "Bad", "groupRetryPolicy": {policy}}}]')
    r = cli("updateSubGroupList", "-c", "DefaultCluster", "-f", str(f))
    assert r.exit_code == 1 and f"{f}[1]: {words}" in _one_line(r.stderr)
    assert cli("getConsumerConfig", "-g", "Good").exit_code == 3  # nothing was written


_EVERY_FIELD = {"groupName": "GT", "consumeEnable": False, "consumeFromMinEnable": False,
                "consumeBroadcastEnable": False, "consumeMessageOrderly": True, "retryQueueNums": 2,
                "retryMaxTimes": 5, "groupRetryPolicy": EXPONENTIAL, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 3,
                "notifyConsumerIdsChangedEnable": False, "groupSysFlag": 1, "consumeTimeoutMinute": 42,
                "subscriptionDataSet": [{"topic": "T", "expressionType": "TAG", "expression": "a", "version": 0}],
                "attributes": {}}


def _check_every_field(config: dict[str, object]) -> None:
    assert {k: config[k] for k in _EVERY_FIELD} == _EVERY_FIELD


def test_update_sub_group_list_applies_every_field(cli: Cli, broker: BrokerProcess, tmp_path: Path) -> None:
    f = tmp_path / "groups.json"
    f.write_text(json.dumps([_EVERY_FIELD]))
    assert cli("updateSubGroupList", "-b", "127.0.0.1:10911", "-f", str(f)).exit_code == 0
    _check_every_field(cli.json("getConsumerConfig", "-g", "GT")[0]["config"])
    n = broker.namesrv_addr
    mqadmin_ok("updateSubGroupList", "-n", n, "-c", "DefaultCluster", "-f", str(f))
    _check_every_field(_group_doc(mqadmin_ok("getConsumerConfig", "-n", n, "-g", "GT", "--output", "json")))
    # and updateSubGroup sends a whole config on both (as Apache's does): an update resets what it does not set
    for where in ((), ("-n", n)):
        args = ("updateSubGroup", *where, "-c", "DefaultCluster", "-g", "GT", "-r", "7")
        if where:
            mqadmin_ok(*args)
            config = _group_doc(mqadmin_ok("getConsumerConfig", "-n", n, "-g", "GT", "--output", "json"))
        else:
            assert cli(*args).exit_code == 0
            config = cli.json("getConsumerConfig", "-g", "GT")[0]["config"]
        assert (config["retryMaxTimes"], config["consumeTimeoutMinute"], config["groupSysFlag"],
                config["groupRetryPolicy"]) == (7, 15, 0, {"type": "CUSTOMIZED"})


def test_sub_group_attributes_are_refused_as_unsupported(cli: Cli, broker: BrokerProcess, tmp_path: Path) -> None:
    r = cli("updateSubGroup", "-c", "DefaultCluster", "-g", "GA", "--attributes", "+foo=bar")
    assert r.exit_code == 1 and "unsupported key: foo" in _one_line(r.stderr)
    assert cli("getConsumerConfig", "-g", "GA").exit_code == 3
    f = tmp_path / "groups.json"
    f.write_text(json.dumps([{"groupName": "GA"}, {"groupName": "GB", "attributes": {"foo": "bar"}}]))
    r = cli("updateSubGroupList", "-c", "DefaultCluster", "-f", str(f))
    assert r.exit_code == 1 and f"{f}[1]: attributes: unsupported key: foo" in _one_line(r.stderr)
    assert cli("getConsumerConfig", "-g", "GA").exit_code == 3
    remote = mqadmin("updateSubGroup", "-n", broker.namesrv_addr, "-c", "DefaultCluster", "-g", "GA",
                     "--attributes", "+foo=bar")
    assert remote.returncode == 1 and "unsupported key: foo" in remote.stderr
    assert mqadmin("getConsumerConfig", "-n", broker.namesrv_addr, "-g", "GA").returncode == 3


# ------------------------------------------------------------------------------ bug 4: copyUser
def test_copy_user_checks_every_name_before_copying_any(cli: Cli, broker: BrokerProcess, tmp_path: Path) -> None:
    assert cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw").exit_code == 0
    target = tmp_path / "target"
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "--create", store=target).exit_code == 0
    r = cli("copyUser", "-f", str(cli.store), "-t", str(target), "-u", "alice,carol")
    assert r.exit_code == 3 and "The user carol is not exist" in _one_line(r.stderr) and r.stdout == ""
    assert cli("getUser", "-c", "DefaultCluster", "-u", "alice", store=target).exit_code == 3  # nothing copied
    n = broker.namesrv_addr
    r = mqadmin("copyUser", "-n", n, "-f", str(cli.store), "-t", broker.broker_addr, "-u", "alice,carol,dave")
    assert r.returncode == 3 and "The users carol, dave are not exist" in _one_line(r.stderr)
    assert mqadmin("getUser", "-n", n, "-b", broker.broker_addr, "-u", "alice").returncode == 3
    assert cli("copyUser", "-f", str(cli.store), "-t", str(target), "-u", "alice").exit_code == 0
    assert cli.json("getUser", "-c", "DefaultCluster", "-u", "alice", store=target)["username"] == "alice"


# ------------------------------------------------------------------------------ bug 5: queryMsgByUniqueKey -g -d
def test_query_msg_by_unique_key_pushes_to_one_consumer(cli: Cli, broker: BrokerProcess) -> None:
    n = broker.namesrv_addr
    live = LiveConsumer.online(n, "UkG", "UkT", 1)
    try:
        deadline = time.monotonic() + 30
        sent = json.loads(mqadmin_ok("sendMessage", "-n", n, "-t", "UkT", "-p", "uk-1", "--output", "json"))
        while live.got.count(b"uk-1") < 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        out = mqadmin_ok("queryMsgByUniqueKey", "-n", n, "-t", "UkT", "-i", sent["msgId"], "-g", "UkG",
                  "-d", live.client_id)
        assert out.startswith("ConsumeMessageDirectlyResult [order=false, autoCommit=true, "
                              "consumeResult=CR_SUCCESS, ")
        assert live.got.count(b"uk-1") == 2  # pushed once more, by the broker
        offline = mqadmin("queryMsgByUniqueKey", "-n", n, "-t", "UkT", "-i", sent["msgId"], "-g", "UkG",
                          "-d", "a@b")
        assert offline.returncode == 3 and "not online" in offline.stderr
    finally:
        live.close()
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T").exit_code == 0
    local = cli.json("sendMessage", "-t", "T", "-p", "x")
    r = cli("queryMsgByUniqueKey", "-t", "T", "-i", local["msgId"], "-g", "G", "-d", "c@1")
    assert r.exit_code == 3 and "not online" in _one_line(r.stderr)  # a store directory has no clients


# ------------------------------------------------------------------------------ bug 6: statsAll
def test_stats_all_on_a_store_says_it_needs_a_running_broker(cli: Cli) -> None:
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1").exit_code == 0
    assert cli("sendMessage", "-t", "T", "-p", "m").exit_code == 0
    for args in (("-t", "T"), ("-a",), ("-t", "NoSuchTopic")):
        r = cli("statsAll", *args)
        assert r.exit_code == 1 and r.stdout == "", r.stdout  # not a table of zeros
        line = _one_line(r.stderr)
        assert "a running broker" in line and "use -n <namesrv>" in line
    assert "-n only" in " ".join(cli("statsAll", "--help").stdout.split())


# ------------------------------------------------------------------------------ updateTopicList
@pytest.mark.parametrize("bad, words", [
    ({"topicName": "B c"}, "contains illegal characters"),
    ({"topicName": "B", "attributes": {"foo": "1"}}, "attributes: unsupported key: foo"),
    ({"topicName": "B", "attributes": {"queue.type": "Weird"}}, "attributes: value is not in set"),
    ({"topicName": "TBW102"}, "The topic[TBW102] is conflict with system topic."),
    ({"topicName": "DefaultCluster"}, "The topic[DefaultCluster] is conflict with system topic."),
    ({"topicName": "B", "topicFilterType": "XX"}, "topicFilterType must be SINGLE_TAG or MULTI_TAG"),
    ({"topicName": "B", "readQueueNums": 0, "writeQueueNums": 0}, "not both 0"),
    ({"topicName": "B", "attributes": {"message.type": "MIXED"}}, "MIXED message type is not supported."),
])
def test_update_topic_list_writes_nothing_when_an_entry_is_bad(cli: Cli, tmp_path: Path, bad: dict[str, object],
                                                               words: str) -> None:
    f = tmp_path / "topics.json"
    f.write_text(json.dumps([{"topicName": "Good"}, bad]))
    r = cli("updateTopicList", "-c", "DefaultCluster", "-f", str(f))
    line = _one_line(r.stderr)
    assert r.exit_code == 1 and f"{f}[1] (topic {bad['topicName']}): " in line and words in line, line
    assert "Good" not in cli.json("topicList")


def test_update_topic_list_checks_against_the_brokers_topics(cli: Cli, broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    """A queue type change is refused for a topic that has messages, on a store and over -n, before any
    entry is written."""
    f = tmp_path / "topics.json"
    f.write_text(json.dumps([{"topicName": "Fresh"}, {"topicName": "Full", "attributes": {"queue.type": "BatchCQ"}}]))
    n = broker.namesrv_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "Full", "-r", "1", "-w", "1")
    mqadmin_ok("sendMessage", "-n", n, "-t", "Full", "-p", "x")
    # "has messages" is the consume queue's max offset: undispatched, the refusal comes later, worded otherwise
    wait_remote_dispatched(n, broker.broker_addr)
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "Full", "-r", "1", "-w", "1").exit_code == 0
    assert cli("sendMessage", "-t", "Full", "-p", "x").exit_code == 0
    local = cli("updateTopicList", "-c", "DefaultCluster", "-f", str(f))
    remote = mqadmin("updateTopicList", "-n", n, "-c", "DefaultCluster", "-f", str(f))
    assert local.exit_code == remote.returncode == 1
    assert _one_line(local.stderr) == _one_line(remote.stderr)
    assert "(topic Full): attributes: attempt to update an unchangeable attribute. key: queue.type" in remote.stderr
    assert "Fresh" not in cli.json("topicList")
    assert "Fresh" not in json.loads(mqadmin_ok("topicList", "-n", n, "--output", "json"))


# ------------------------------------------------------------------------------ explainAcl
@pytest.mark.parametrize("args, words", [
    (("-s", "alice", "-r", "Topic:T", "-a", "Pub"), "invalid subject"),
    (("-s", "User:alice", "-r", "Bogus:T", "-a", "Pub"), "invalid resource"),
    (("-s", "User:alice", "-r", "Topic:T", "-a", "Fly"), "unknown Action 'Fly'"),
    (("-s", "User:alice", "-r", "Topic:T", "-a", ","), "no action given"),
    (("-s", "User:alice", "-r", "Topic:T", "-a", "Pub", "-i", "999.1.1.1"), "invalid source IP '999.1.1.1'"),
    (("-s", "User:alice", "-r", "Topic:T", "-a", "Pub", "-i", "10.0.0.0/8"), "invalid source IP '10.0.0.0/8'"),
])
def test_explain_acl_refuses_malformed_input_as_usage(cli: Cli, args: tuple[str, ...], words: str) -> None:
    assert cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw").exit_code == 0
    r = cli("explainAcl", *args)
    assert r.exit_code == 2 and words in _one_line(r.stderr)


def test_explain_acl_takes_one_address_with_or_without_a_port(cli: Cli) -> None:
    assert cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw").exit_code == 0
    for ip in ("10.0.0.1", "::1", "10.0.0.1:5000", "[::1]:5000"):
        assert cli.json("explainAcl", "-s", "User:alice", "-r", "Topic:T", "-a", "Pub", "-i", ip)["decision"] == "Deny"
