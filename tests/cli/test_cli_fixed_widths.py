"""Issue 16, bug 10: ``--output table`` is Apache's fixed printf layout, so columns can be cut by position."""

from __future__ import annotations


def _cols(line: str, spans: list[tuple[int, int | None]]) -> list[str]:
    return [line[a:b].strip() for a, b in spans]


def test_topic_status_columns_by_position(golden_cli):
    cli = golden_cli("store-basic")
    out = cli("topicStatus", "-t", "GoldenTopicA").stdout.splitlines()
    spans = [(0, 32), (34, 38), (40, 60), (62, 82), (86, None)]
    assert _cols(out[0], spans) == ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"]
    row = _cols(out[1], spans)
    assert row[:4] == ["broker-a", "0", "0", "25"] and row[4][:2] == "20"
    assert out[-2:] == ["", "Topic Put TPS: 0.0"]


def test_query_msg_by_key_columns_by_position(golden_cli):
    cli = golden_cli("store-basic")
    key = next(r["keys"].split()[0] for r in cli.json("printMsg", "-t", "GoldenTopicA") if r["keys"])
    out = cli("queryMsgByKey", "-t", "GoldenTopicA", "-k", key).stdout.splitlines()
    assert out[0] == f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}"
    assert len(out[1]) == 50 + 1 + 4 + 1 + 40 and out[1][51:55].strip().isdigit()


def test_user_and_acl_tables_by_position(cli):
    cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw")
    cli("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:T", "-a", "Pub,Sub", "-d", "Allow")
    out = cli("getUser", "-c", "DefaultCluster", "-u", "alice").stdout.splitlines()
    assert out == [f"{'#UserName':<16}  {'#Password':<22}  {'#UserType':<22}  {'#UserStatus':<22}",
                   f"{'alice':<16}  {'pw':<22}  {'Normal':<22}  {'enable':<22}"]
    acl = cli("getAcl", "-c", "DefaultCluster", "-s", "User:alice").stdout.splitlines()
    spans = [(0, 16), (18, 28), (30, 52), (54, 74), (76, 100), (102, None)]
    assert _cols(acl[1], spans) == ["User:alice", "Custom", "Topic:T", "[Pub, Sub]", "null", "Allow"]


def test_consumer_progress_and_reset_by_position(golden_cli):
    cli = golden_cli("store-basic")
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1")
    reset = cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "-1").stdout.splitlines()
    assert reset[1] == f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}"
    assert _cols(reset[2], [(0, 40), (42, 82), (84, None)]) == ["broker-a", "0", "25"]
    out = cli("consumerProgress", "-g", "G1").stdout.splitlines()
    spans = [(0, 64), (66, 98), (100, 104), (106, 126), (128, 148), (150, 170), (171, 191), (191, None)]
    assert _cols(out[0], spans) == ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
                                    "#Diff", "#Inflight", "#LastTime"]
    assert _cols(out[1], spans)[:7] == ["GoldenTopicA", "broker-a", "0", "25", "25", "0", "0"]


def test_send_message_and_topic_list_by_position(cli):
    cli("updateTopic", "-c", "DefaultCluster", "-t", "T")
    out = cli("sendMessage", "-t", "T", "-p", "x").stdout.splitlines()
    spans = [(0, 32), (34, 38), (40, 60), (64, None)]
    assert _cols(out[0], spans) == ["#Broker Name", "#QID", "#Send Result", "#MsgId"]
    assert _cols(out[1], spans)[0::2] == ["broker-a", "SEND_OK"]
    listing = cli("topicList", "-c").stdout.splitlines()
    assert listing[0] == f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}"
    row = next(line for line in listing[1:] if line[22:86].strip() == "T")
    assert row[:20].strip() == "DefaultCluster" and len(row) == 20 + 2 + 64 + 2 + 64
