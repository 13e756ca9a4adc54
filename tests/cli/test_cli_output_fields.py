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


def test_a_compressed_body_is_shown_as_the_producer_sent_it(cli):
    """A Java producer zlib-compresses bodies over 4 KiB (SYSFLAG COMPRESSED_FLAG); Apache's tools decode
    with deCompressBody. A body that will not inflate keeps its stored bytes and says why."""
    import json
    import zlib

    from broker_core.store.codec.message import MessageInner
    from broker_core.store.message_store import MessageStore

    sent = b"compressed order body " * 300
    # the topic's config first: a queue without one in topics.json is an unused topic, no topic at all
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "Z", "-r", "1", "-w", "1").exit_code == 0
    store = MessageStore(cli.store).open()
    try:
        for body, key in ((zlib.compress(sent), "zk"), (b"not zlib at all", "bad")):
            store.put_message(MessageInner(topic="Z", body=body, properties={"KEYS": key}, queue_id=0, sys_flag=1))
    finally:
        store.shutdown()
    good = json.loads(cli("queryMsgByKey", "-t", "Z", "-k", "zk", "--output", "json").stdout)
    assert good[0]["body"] == sent.decode() and "bodyError" not in good[0]
    bad = json.loads(cli("queryMsgByKey", "-t", "Z", "-k", "bad", "--output", "json").stdout)
    assert bad[0]["bodyBase64"] == "bm90IHpsaWIgYXQgYWxs"  # the stored bytes
    assert bad[0]["bodyError"].startswith("stored compressed, not decompressed: ZLIB body does not inflate")
    lines = [line for line in cli("printMsg", "-t", "Z", "-d", "true").stdout.splitlines() if line.startswith("MSGID")]
    assert lines[0].endswith("BODY: " + sent.decode())
    assert lines[1].endswith("BODY: (stored compressed, not decompressed: ZLIB body does not inflate: "
                             "Error -3 while decompressing data: incorrect header check)")


def test_print_msg_status_lines_are_the_ones_javas_loop_prints(cli):
    """Java's printMsg prints a status line only for a pull that matched nothing (NO_MATCHED_MSG) or that
    ends its loop (NO_NEW_MSG / OFFSET_ILLEGAL): none for an empty queue, none after FOUND pulls. Every
    queue got "print msg finished. status=FOUND" or "no matched msg." here, an extra line for scripts."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "P", "-r", "2", "-w", "2").exit_code == 0
    assert cli("sendMessage", "-t", "P", "-p", "x", "-c", "TagA", "-b", "broker-a", "-i", "0").exit_code == 0
    mq = "MessageQueue [topic=P, brokerName=broker-a, queueId={}]"
    lines = cli("printMsg", "-t", "P", "-d", "false").stdout.splitlines()
    assert [line.split(" BODY")[0].split("MSGID: ")[0] for line in lines] == [
        f"minOffset=0, maxOffset=1, {mq.format(0)}", "", "-" * 56,
        f"minOffset=0, maxOffset=0, {mq.format(1)}", "-" * 56]
    filtered = cli("printMsg", "-t", "P", "-s", "TagB").stdout.splitlines()
    assert filtered == [f"minOffset=0, maxOffset=1, {mq.format(0)}",
                        f"{mq.format(0)} no matched msg. status=NO_MATCHED_MSG, offset=1", "-" * 56,
                        f"minOffset=0, maxOffset=0, {mq.format(1)}", "-" * 56]
