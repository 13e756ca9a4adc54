"""Issue 16, bug 9: output fields as Apache prints them."""

from __future__ import annotations


def _topic_with_messages(cli):
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1").exit_code == 0
    for tags in ("TagA", "TagA", "TagB", None, None, None):
        extra = ("-c", tags) if tags else ()
        assert cli("sendMessage", "-t", "T", "-p", "x", *extra).exit_code == 0


def test_print_msg_by_queue_calculate_skips_untagged(cli):
    _topic_with_messages(cli)
    r = cli("printMsgByQueue", "-t", "T", "-a", "broker-a", "-i", "0", "-f", "true")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [f"Tag: {'TagA':<30} Count: 2", f"Tag: {'TagB':<30} Count: 1"]


def test_print_msg_names_the_broker(cli):
    _topic_with_messages(cli)
    r = cli("printMsg", "-t", "T")
    lines = [line for line in r.stdout.splitlines() if line.startswith("MSGID:")]
    assert len(lines) == 6 and all("MessageExt [brokerName=broker-a, queueId=0" in line for line in lines)


def test_update_sub_group_prints_every_field(cli):
    r = cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1", "-p",
            '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}}')
    assert r.exit_code == 0, r.stderr
    text = r.stdout.splitlines()[1]
    assert text.startswith("SubscriptionGroupConfig{groupName=G1, consumeEnable=true, ")
    assert ("groupRetryPolicy=GroupRetryPolicy{type=EXPONENTIAL, exponentialRetryPolicy=ExponentialRetryPolicy"
            "{initial=5000, max=7200000, multiplier=2}, customizedRetryPolicy=null}") in text
    assert text.endswith(", notifyConsumerIdsChangedEnable=true, groupSysFlag=0, consumeTimeoutMinute=15, "
                         "subscriptionDataSet=null, attributes={}}")


def test_consumer_progress_without_group_lists_retry_topic_groups_only(cli):
    _topic_with_messages(cli)
    for g in ("G1", "G2"):
        cli("updateSubGroup", "-c", "DefaultCluster", "-g", g)
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "%RETRY%G1", "-r", "1", "-w", "1").exit_code == 0
    rows = cli.json("consumerProgress")
    assert [r["group"] for r in rows] == ["G1"]  # not G2 (no %RETRY% topic), not the system groups
