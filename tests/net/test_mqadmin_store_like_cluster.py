"""mqadmin on a store directory answers as it does against a running broker (-n), and as Apache's does.

Why: the two modes are one Admin over two transports, yet a store directory took its own path in a
few places: cloneGroupOffset made the destination group when it did not exist (Apache's
UPDATE_CONSUMER_OFFSET refuses a group that does not exist), sendMessage made a missing topic with the
broker's 8 default queues instead of the 4 a producer asks for, and consumeMessage said "Consume ok"
for a read that found nothing. Each test runs the same commands in both modes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from net_util import run_mqadmin

from tests.remoting_broker import BrokerProcess, running_broker

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("store-like-cluster"))) as b:
        yield b


@pytest.fixture(params=["store", "cluster"])
def mq(request: pytest.FixtureRequest, tmp_path: Path) -> Run:
    """``mq(*args)``: mqadmin against a fresh store directory, or against the module's mqbroker."""
    if request.param == "cluster":
        target = ("-n", request.getfixturevalue("cluster").namesrv_addr)
    else:
        from broker_core.broker.broker import Broker
        from broker_core.broker.broker_config import BrokerConfig

        Broker(tmp_path / "store", BrokerConfig(), audit_log_path=None).shutdown()
        target = ("--store", str(tmp_path / "store"))
    return lambda *args: run_mqadmin(*args, *target)


def _ok(mq: Run, *args: str) -> str:
    r = mq(*args)
    assert r.returncode == 0, f"mqadmin {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def test_clone_group_offset_to_a_group_that_does_not_exist_is_refused(mq: Run, request: pytest.FixtureRequest) -> None:
    topic, src, dst = f"Clone{request.node.callspec.id}", "CloneSrc", "CloneNoSuchGroup"
    _ok(mq, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")
    _ok(mq, "updateSubGroup", "-c", "DefaultCluster", "-g", src)
    _ok(mq, "sendMessage", "-t", topic, "-p", "a")
    _ok(mq, "resetOffsetByTime", "-g", src, "-t", topic, "-s", "-1")
    r = mq("cloneGroupOffset", "-s", src, "-d", dst, "-t", topic)
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stderr == f"mqadmin cloneGroupOffset: Group {dst} not exist!\n", r.stderr
    assert "success" not in r.stdout, r.stdout
    # nothing changed: the mistyped destination did not become a group
    assert mq("getConsumerConfig", "-g", dst).returncode == 3
    # an existing destination still takes the offsets
    _ok(mq, "updateSubGroup", "-c", "DefaultCluster", "-g", dst)
    assert "clone group offset success." in _ok(mq, "cloneGroupOffset", "-s", src, "-d", dst, "-t", topic)


def test_send_message_to_a_topic_that_does_not_exist_makes_it_with_four_queues(
        mq: Run, request: pytest.FixtureRequest) -> None:
    topic = f"AutoMade{request.node.callspec.id}"
    _ok(mq, "sendMessage", "-t", topic, "-p", "x")
    status = _ok(mq, "topicStatus", "-t", topic)
    assert [line.split()[1] for line in status.splitlines() if line.startswith("broker-a ")] \
        == ["0", "1", "2", "3"], status


def test_consume_message_that_finds_nothing_says_so_as_apache(mq: Run, request: pytest.FixtureRequest) -> None:
    topic, empty = f"Read{request.node.callspec.id}", f"Empty{request.node.callspec.id}"
    _ok(mq, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")
    _ok(mq, "updateTopic", "-c", "DefaultCluster", "-t", empty, "-r", "1", "-w", "1")
    _ok(mq, "sendMessage", "-t", topic, "-p", "a")
    q = f"MessageQueue [topic={topic}, brokerName=broker-a, queueId=0]"
    # past the queue's end (1): ConsumeMessageCommand#executeByCondition's line, and nothing else
    assert _ok(mq, "consumeMessage", "-t", topic, "-b", "broker-a", "-i", "0", "-o", "5") \
        == f"{q} no matched msg, offset=5\n"
    at_end = _ok(mq, "consumeMessage", "-t", topic, "-b", "broker-a", "-i", "0", "-o", "1")
    assert "Consume ok" not in at_end and f"{q} print msg finished. status=NO_NEW_MSG, offset=1" in at_end, at_end
    e = f"MessageQueue [topic={empty}, brokerName=broker-a, queueId=0]"
    for args in ((), ("-b", "broker-a", "-i", "0")):
        nothing = _ok(mq, "consumeMessage", "-t", empty, *args)
        assert "Consume ok" not in nothing, nothing
        assert f"{e} print msg finished. status=NO_NEW_MSG, offset=0" in nothing, nothing
    # a read that finds the message still says so
    found = _ok(mq, "consumeMessage", "-t", topic)
    assert found.startswith("Consume ok\n") and "BODY: a" in found, found


def test_clone_onto_a_group_with_a_pending_reset_says_what_the_group_holds(cluster: BrokerProcess) -> None:
    """The probe's case over -n: the destination has a server-side reset pending (no consumer online).
    cloneGroupOffset said "applied" with the SOURCE's offsets and printed "success", while the group
    stayed at the reset offset. Now the broker serves CLONE_GROUP_OFFSET and the report reads back the
    destination: status notApplied per queue, a warning line on stderr, no "success"."""
    import json

    def mq(*args: str) -> subprocess.CompletedProcess[str]:
        return run_mqadmin(*args, "-n", cluster.namesrv_addr)

    topic, src, dst = "ClonePending", "ClonePendSrc", "ClonePendDst"
    _ok(mq, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")
    for g in (src, dst):
        _ok(mq, "updateSubGroup", "-c", "DefaultCluster", "-g", g)
    for i in range(3):
        _ok(mq, "sendMessage", "-t", topic, "-p", f"m{i}")
    _ok(mq, "resetOffsetByTime", "-g", src, "-t", topic, "-s", "now")
    _ok(mq, "resetOffsetByTime", "-g", dst, "-t", topic, "-s", "0")

    r = mq("cloneGroupOffset", "-s", src, "-d", dst, "-t", topic, "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["applied"] is False
    assert [(q["queueId"], q["timestampOffset"], q["offset"], q["status"]) for q in report["queues"]] == [
        (0, 3, 0, "notApplied")]
    assert r.stderr == (f"mqadmin cloneGroupOffset: warning: broker-a queue 0: group {dst} holds offset 0, not "
                        f"{src}'s 3 (the broker answers a pending reset of {dst} first, e.g. resetOffsetByTime "
                        "with no consumer online); its consumers start at 0\n"), r.stderr
    text = mq("cloneGroupOffset", "-s", src, "-d", dst, "-t", topic)
    assert text.returncode == 0 and "success" not in text.stdout, text.stdout
    assert text.stdout.startswith(f"clone group offset not applied to every queue. srcGroup[{src}]"), text.stdout
    progress = _ok(mq, "consumerProgress", "-g", dst)
    assert progress.count(topic) == 1 and " 3 " in progress and " 0 " in progress
