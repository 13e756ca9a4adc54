"""Issue 16, bugs 1-2: numeric options are bounded as Java/Apache bound them, and nothing unreadable is stored."""

from __future__ import annotations

import json

import pytest


def _topics_json(cli) -> dict:
    return json.loads((cli.store / "config" / "topics.json").read_text())["topicConfigTable"]


@pytest.mark.parametrize("args", [
    ("-r", "99999999999999999999"), ("-w", "99999999999999999999"), ("-r", "100000", "-w", "100000"),
    ("-r", "-1"), ("-p", "99999999999"), ("-p", "16"),
])
def test_update_topic_refuses_out_of_range_numbers(cli, args):
    cli("updateTopic", "-c", "DefaultCluster", "-t", "Known")
    r = cli("updateTopic", "-c", "DefaultCluster", "-t", "Bounded", *args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "Invalid value for" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "--help" in r.stderr
    assert "Bounded" not in _topics_json(cli)


def test_update_topic_accepts_the_largest_queue_count(cli):
    r = cli("updateTopic", "-c", "DefaultCluster", "-t", "Wide", "-r", "1024", "-w", "1024")
    assert r.exit_code == 0, r.stderr
    assert _topics_json(cli)["Wide"]["readQueueNums"] == 1024


def test_broker_refuses_queue_counts_over_its_limit(tmp_path):
    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig
    from broker_core.broker.errors import BrokerError

    broker = Broker(tmp_path / "s", BrokerConfig(), audit_log_path=None)
    try:
        with pytest.raises(BrokerError, match="<= 1024"):
            broker.create_or_update_topic("T", 1025, 8)
        with pytest.raises(BrokerError, match="retryQueueNums"):
            broker.create_or_update_subscription_group("G", retry_queue_nums=10**6)
        assert broker.get_topic("T") is None
    finally:
        broker.shutdown()


@pytest.mark.parametrize("cmd", [
    ("updateSubGroup", "-c", "DefaultCluster", "-g", "G", "-q", "99999999999999999999"),
    ("updateSubGroup", "-c", "DefaultCluster", "-g", "G", "-r", "-2"),
    ("updateSubGroup", "-c", "DefaultCluster", "-g", "G", "-i", "-1"),
    ("queryMsgByKey", "-t", "T", "-k", "k", "-m", "4294967296"),
    ("queryMsgByOffset", "-t", "T", "-b", "broker-a", "-i", "2147483648", "-o", "0"),
    ("queryMsgByOffset", "-t", "T", "-b", "broker-a", "-i", "0", "-o", "9223372036854775808"),
    ("sendMessage", "-t", "T", "-p", "x", "-b", "broker-a", "-i", "-1"),
    ("consumeMessage", "-t", "T", "-c", "0"),
    ("printMsgByQueue", "-t", "T", "-a", "broker-a", "-i", "99999999999"),
    ("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "now", "-b", "127.0.0.1:10911", "-q", "-3"),
])
def test_numeric_options_are_bounded_everywhere(cli, cmd):
    r = cli(*cmd)
    assert r.exit_code == 2, (cmd, r.stdout, r.stderr)
    assert "Invalid value for" in r.stderr


@pytest.mark.parametrize("value", ["-5", "-2", "99999999999999999999999", "NOW", "12ab", "9223372036854775808"])
def test_reset_offset_by_time_refuses_other_timestamps(golden_cli, value):
    cli = golden_cli("store-basic")
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1")
    before = cli.json("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "0", "--dry-run")
    r = cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", value)
    assert r.exit_code == 2, (r.stdout, r.stderr)  # a usage error
    assert "-s/--timestamp" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert before["applied"] is False
    assert cli("consumerProgress", "-g", "G1").exit_code == 3  # nothing was committed


@pytest.mark.parametrize("value", ["--5", "+-5", "-+5", "++5"])
@pytest.mark.parametrize("cmd", [("printMsg", "-t", "GoldenTopicA", "--beginTimestamp"),
                                 ("printMsg", "-t", "GoldenTopicA", "--endTimestamp"),
                                 ("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "--timestamp")])
def test_a_doubled_sign_is_a_malformed_timestamp_not_one_out_of_range(golden_cli, cmd, value):
    """``--beginTimestamp=--5`` was refused as "outside Java's long range": it is no number at all."""
    r = golden_cli("store-basic")(*cmd[:-1], f"{cmd[-1]}={value}")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "outside Java's long range" not in r.stderr, r.stderr
    assert f"{value!r}: expected 'now', epoch milliseconds >= 0" in r.stderr, r.stderr


@pytest.mark.parametrize("value,expect_max", [("-1", True), ("0", False), ("now", True),
                                              ("+0", False), ("2000-01-01#00:00:00:000", False)])
def test_reset_offset_by_time_accepts_apache_forms(golden_cli, value, expect_max):
    cli = golden_cli("store-basic")
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1")
    plan = cli.json("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", value, "--dry-run")
    offsets = [q["resetOffset"] for q in plan["queues"]]
    assert offsets == ([q["brokerOffset"] for q in plan["queues"]] if expect_max else [0, 0, 0, 0])


@pytest.mark.parametrize("cmd", [("resetOffsetByTime", "-g", "G", "-t", "Known", "-s", "now", "-f", "maybe"),
                                 ("updateTopic", "-c", "DefaultCluster", "-t", "Known", "-o", "maybe")])
def test_a_boolean_option_that_is_neither_true_nor_false_is_a_usage_error(cli, cmd):
    """It exited 1, as a failed operation, though nothing was tried: a value the option cannot take is exit 2."""
    cli("updateTopic", "-c", "DefaultCluster", "-t", "Known")
    r = cli(*cmd)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "'maybe'" in r.stderr and "expected true or false" in r.stderr
