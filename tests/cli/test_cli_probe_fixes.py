"""On a store directory (--store): the probe's findings of updateTopic -o true and queryMsgByOffset."""

from __future__ import annotations


def test_update_topic_order_on_a_store_is_refused_before_anything_is_written(cli) -> None:
    """-o true writes the orderConf, name server data a store directory has none of (updateOrderConf on
    a store is refused the same way): the command fails and the topic is not created."""
    r = cli("updateTopic", "-c", "DefaultCluster", "-t", "TOrd", "-o", "true")
    assert r.exit_code == 1 and r.stdout == "", r.stdout + r.stderr
    assert "a store directory has no name server; use -n <namesrv>" in r.stderr and "orderConf" in r.stderr
    assert "TOrd" not in cli.json("topicList")
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "TOrd", "-o", "false").exit_code == 0


def test_query_msg_by_offset_of_a_queue_the_topic_has_not_is_not_found(cli) -> None:
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "TC", "-r", "4", "-w", "4").exit_code == 0
    r = cli("queryMsgByOffset", "-t", "TC", "-b", "broker-a", "-i", "9", "-o", "0")
    assert r.exit_code == 3 and "queue 9 of topic [TC] does not exist" in r.stderr, r.stdout + r.stderr
