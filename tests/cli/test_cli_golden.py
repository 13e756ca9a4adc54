"""mqadmin's inspection commands answer on Apache RocketMQ's golden stores exactly as their manifests say."""

from __future__ import annotations

import base64
import struct

import pytest
from golden_helpers import load_manifest

STORES = ("store-basic", "store-batchcq", "store-timer")


def _queue_messages(manifest: dict) -> dict[tuple[str, int], list[dict]]:
    out: dict[tuple[str, int], list[dict]] = {}
    for m in manifest["messages"]:
        out.setdefault((m["topic"], m["queueId"]), []).append(m)
    for msgs in out.values():
        msgs.sort(key=lambda m: m["queueOffset"])
    return out


@pytest.mark.parametrize("name", STORES)
def test_topic_status_matches_manifest_queues(golden_cli, name):
    cli = golden_cli(name)
    manifest = load_manifest(name)
    by_queue = _queue_messages(manifest)
    for topic, queues in manifest["queues"].items():
        rows = cli.json("topicStatus", "-t", topic)
        got = {r["queueId"]: r for r in rows}
        assert set(got) == {int(q) for q in queues}
        for q, expect in queues.items():
            row = got[int(q)]
            assert (row["minOffset"], row["maxOffset"]) == (expect["minOffset"], expect["maxOffset"])
            assert row["brokerName"] == "broker-a"
            msgs = by_queue.get((topic, int(q)), [])
            if msgs:  # the newest record of the queue (timer copies are not in "messages")
                assert row["lastUpdateTimestamp"] == msgs[-1]["storeTimestamp"]


def test_topic_status_table_has_mqadmin_columns(golden_cli):
    result = golden_cli("store-basic")("topicStatus", "-t", "GoldenTopicA")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated"]
    assert lines[1].split()[:4] == ["broker-a", "0", "0", "25"]
    assert lines[-1] == "Topic Put TPS: 0.0"


def test_query_msg_by_key_matches_every_key_query(golden_cli):
    cli = golden_cli("store-basic")
    manifest = load_manifest("store-basic")
    keys_tokens = {(m["topic"], tok) for m in manifest["messages"] for tok in (m["keys"] or "").split(" ") if tok}
    checked = 0
    for q in manifest["keyQueries"][::3]:
        if (q["topic"], q["key"]) not in keys_tokens:
            continue  # unique keys and absent keys: covered below
        rows = cli.json("queryMsgByKey", "-t", q["topic"], "-k", q["key"])
        assert sorted(r["commitLogOffset"] for r in rows) == q["expectedPhysicalOffsets"], q["key"]
        assert all(r["topic"] == q["topic"] and q["key"] in r["keys"].split(" ") for r in rows)
        checked += 1
    assert checked > 20
    hot = next(q for q in manifest["keyQueries"] if q["key"] == "hot" and q["topic"] == "GoldenTopicB")
    rows = cli.json("queryMsgByKey", "-t", "GoldenTopicB", "-k", "hot")
    assert sorted(r["commitLogOffset"] for r in rows) == hot["expectedPhysicalOffsets"]


def test_query_msg_by_key_not_found_exits_3(golden_cli):
    result = golden_cli("store-basic")("queryMsgByKey", "-t", "GoldenTopicA", "-k", "no-such-key")
    assert result.exit_code == 3
    assert "no message" in result.stderr


def test_message_queries_trim_their_values_as_apache_does(golden_cli):
    # Apache's sub-commands read every value with .trim(): a topic or key pasted with a space found
    # nothing here ("topic [GoldenTopicA ] not found", "no message").
    cli = golden_cli("store-basic")
    m = load_manifest("store-basic")["messages"][0]
    rows = cli.json("queryMsgByKey", "-t", " GoldenTopicA\t", "-k", "key-0 ")
    assert [r["commitLogOffset"] for r in rows] == [m["physicalOffset"]]
    got = cli.json("queryMsgByOffset", "-t", "GoldenTopicA ", "-b", " broker-a", "-i", "0", "-o", "0")
    assert got["commitLogOffset"] == m["physicalOffset"]
    got = cli.json("queryMsgByUniqueKey", "-t", " GoldenTopicA", "-i", m["uniqKey"] + " ")
    assert got["commitLogOffset"] == m["physicalOffset"]
    got = cli.json("queryMsgById", "-t", "GoldenTopicA ", "-i", " " + m["offsetMsgId"])
    assert [r["commitLogOffset"] for r in got] == [m["physicalOffset"]]
    assert cli.json("topicStatus", "-t", "GoldenTopicA ")


def test_query_msg_by_unique_key_and_by_id_return_manifest_records(golden_cli):
    cli = golden_cli("store-basic")
    manifest = load_manifest("store-basic")
    msgs = manifest["messages"]
    ids = ",".join(m["offsetMsgId"] for m in msgs)
    by_id = cli.json("queryMsgById", "-t", "GoldenTopicA", "-i", ids)
    assert len(by_id) == len(msgs)
    for got, m in zip(by_id, msgs, strict=True):
        assert got["msgId"] == m["storedMsgId"]
        assert got["commitLogOffset"] == m["physicalOffset"]
        assert got["storeSize"] == m["size"]
        assert (got["topic"], got["queueId"], got["queueOffset"]) == (m["topic"], m["queueId"], m["queueOffset"])
        assert (got["bornTimestamp"], got["storeTimestamp"]) == (m["bornTimestamp"], m["storeTimestamp"])
        assert (got["bornHost"], got["storeHost"]) == (m["bornHost"], m["storeHost"])
        assert (got["sysFlag"], got["reconsumeTimes"]) == (m["sysFlag"], m["reconsumeTimes"])
        assert got["properties"] == m["properties"]
        assert (got["tags"], got["keys"], got["uniqKey"]) == (m["tags"], m["keys"], m["uniqKey"])
        assert base64.b64decode(got["bodyBase64"]) == base64.b64decode(m["body"])
    for m in msgs[::17]:
        if m["uniqKey"] is None:
            continue
        got = cli.json("queryMsgByUniqueKey", "-t", m["topic"], "-i", m["uniqKey"])
        assert got["commitLogOffset"] == m["physicalOffset"]
        assert got["uniqKey"] == m["uniqKey"]


def test_query_msg_by_id_falls_back_to_unique_key(golden_cli):
    cli = golden_cli("store-basic")
    m = next(m for m in load_manifest("store-basic")["messages"] if m["uniqKey"] and m["topic"] == "GoldenTopicB")
    got = cli.json("queryMsgById", "-t", "GoldenTopicB", "-i", m["uniqKey"])
    assert [r["commitLogOffset"] for r in got] == [m["physicalOffset"]]
    missing = cli("queryMsgById", "-t", "GoldenTopicB", "-i", "7F00000100002A9F00000000FFFFFFFF")
    assert missing.exit_code == 3


def test_query_msg_by_id_prints_mqadmin_lines(golden_cli):
    result = golden_cli("store-basic")("queryMsgById", "-t", "GoldenTopicA", "-i", "7F00000100002A9F0000000000000000",
                                       "-f", "UTF-8")
    assert result.exit_code == 0
    text = result.stdout
    assert "OffsetID:            7F00000100002A9F0000000000000000" in text
    assert "Tags:                [TagA]" in text
    assert "Keys:                [key-0]" in text
    assert "Born Host:           10.0.0.1:40000" in text
    assert "Message Body Path:" in text and "WARN: No Consumer" in text


@pytest.mark.parametrize("name", ["store-basic", "store-timer"])
def test_query_msg_by_offset_matches_manifest(golden_cli, name):
    cli = golden_cli(name)
    for m in load_manifest(name)["messages"][::9]:
        got = cli.json("queryMsgByOffset", "-t", m["topic"], "-b", "broker-a", "-i", str(m["queueId"]),
                       "-o", str(m["queueOffset"]))
        assert got["commitLogOffset"] == m["physicalOffset"]
        assert got["properties"] == m["properties"]


def test_query_msg_by_offset_beyond_queue_is_not_found(golden_cli):
    result = golden_cli("store-basic")("queryMsgByOffset", "-t", "GoldenTopicA", "-b", "broker-a", "-i", "0", "-o", "25")
    assert result.exit_code == 3
    assert "OFFSET_OVERFLOW_ONE" in result.stderr


def test_print_msg_by_queue_lists_every_message_in_order(golden_cli):
    cli = golden_cli("store-basic")
    manifest = load_manifest("store-basic")
    for (topic, qid), expect in _queue_messages(manifest).items():
        got = cli.json("printMsgByQueue", "-t", topic, "-a", "broker-a", "-i", str(qid))
        assert [r["queueOffset"] for r in got] == [m["queueOffset"] for m in expect]
        assert [r["commitLogOffset"] for r in got] == [m["physicalOffset"] for m in expect]


def test_print_msg_by_queue_unwraps_batchcq(golden_cli):
    cli = golden_cli("store-batchcq")
    manifest = load_manifest("store-batchcq")
    for (topic, qid), records in _queue_messages(manifest).items():
        got = cli.json("printMsgByQueue", "-t", topic, "-a", "broker-a", "-i", str(qid))
        expected = []
        for m in records:
            n = m.get("innerNum") or 1
            expected += [(m["queueOffset"] + i, m["physicalOffset"]) for i in range(n)]
        assert [(r["queueOffset"], r["commitLogOffset"]) for r in got] == expected
        assert len(got) == manifest["queues"][topic][str(qid)]["maxOffset"]


def test_print_msg_by_queue_counts_tags(golden_cli):
    cli = golden_cli("store-basic")
    manifest = load_manifest("store-basic")
    expect: dict[str, int] = {}
    for m in manifest["messages"]:
        if (m["topic"], m["queueId"]) == ("GoldenTopicA", 0) and m["tags"]:  # Apache skips untagged ones
            expect[m["tags"]] = expect.get(m["tags"], 0) + 1
    got = cli.json("printMsgByQueue", "-t", "GoldenTopicA", "-a", "broker-a", "-i", "0", "-f", "true")
    assert {r["tag"]: r["count"] for r in got} == expect
    assert [r["count"] for r in got] == sorted(expect.values(), reverse=True)
    only_a = cli.json("printMsgByQueue", "-t", "GoldenTopicA", "-a", "broker-a", "-i", "0", "-s", "TagA")
    assert len(only_a) == expect.get("TagA", 0) and all(r["tags"] == "TagA" for r in only_a)


def test_print_msg_and_consume_message(golden_cli):
    cli = golden_cli("store-basic")
    all_b = cli.json("printMsg", "-t", "GoldenTopicB")
    assert len(all_b) == 100
    text = cli("printMsg", "-t", "GoldenTopicB", "-d", "false")
    assert text.exit_code == 0
    assert "minOffset=0, maxOffset=25, MessageQueue [topic=GoldenTopicB, brokerName=broker-a, queueId=3]" in text.stdout
    assert "NOT PRINT BODY" in text.stdout
    consumed = cli.json("consumeMessage", "-t", "GoldenTopicA", "-b", "broker-a", "-i", "2", "-o", "20", "-c", "3")
    assert [r["queueOffset"] for r in consumed] == [20, 21, 22]


@pytest.mark.parametrize("name", STORES)
def test_verify_store_is_clean_on_golden(golden_cli, name):
    report = golden_cli(name).json("verifyStore")
    manifest = load_manifest(name)
    assert report["ok"] is True and report["mismatchCount"] == 0
    assert report["records"] == len(manifest["messages"]) + len(manifest.get("deliveredToRealTopic", []))
    assert report["commit_log_max_offset"] == manifest["commitLogMaxOffset"]


@pytest.mark.parametrize("damage", ["wheel", "checkpoint", "log-file-size", "log-cut"])
def test_verify_store_names_timer_files_the_broker_cannot_use(golden_cli, damage: str):
    """verifyStore said "store OK" for a timerwheel or timer log file mqbroker refuses to open, for a lost
    timer checkpoint (which has the broker deliver timer messages again) and for a timer log cut short."""
    cli = golden_cli("store-timer")
    first_log_file = cli.store / "timerlog" / ("0" * 20)
    if damage == "wheel":
        (cli.store / "timerwheel").write_bytes(bytes(1000))
    elif damage == "checkpoint":
        (cli.store / "config" / "timercheck").unlink()
    elif damage == "log-file-size":
        (cli.store / "timerlog" / f"{16384:020d}").write_bytes(bytes(100))
    else:
        first_log_file.write_bytes(first_log_file.read_bytes()[:260])  # 5 of its 10 units
    result = cli("verifyStore", "--output", "json")
    assert result.exit_code == 1
    import json

    (issue,) = json.loads(result.stdout)["issues"]
    if damage == "wheel":
        assert (issue["kind"], issue["where"]) == ("timer-wheel", "timerwheel")
        assert issue["detail"].startswith("length 1000 != expected ")
    elif damage == "checkpoint":
        assert (issue["kind"], issue["where"]) == ("timer-checkpoint", "config/timercheck")
        assert issue["detail"].startswith("missing while rmq_sys_wheel_timer holds 10 message(s)")
    elif damage == "log-file-size":
        assert (issue["kind"], issue["where"]) == ("timer-log", "timerlog")
        assert "length 100 differs from the 16384 bytes of 00000000000000000000" in issue["detail"]
    else:
        assert (issue["kind"], issue["where"]) == ("timer-log", "timerlog")
        assert issue["detail"].startswith("the timer log ends at byte 208, before the 520 bytes timer checkpoint")


def test_verify_store_reports_a_corrupt_cq_unit_and_index_entry(golden_cli):
    cli = golden_cli("store-basic")
    cq = cli.store / "consumequeue" / "GoldenTopicA" / "1" / ("0" * 20)
    data = bytearray(cq.read_bytes())
    struct.pack_into(">q", data, 20 * 3 + 12, 123456)  # unit 3: wrong tagsCode
    cq.write_bytes(bytes(data))
    index = sorted((cli.store / "index").iterdir())[0]
    raw = bytearray(index.read_bytes())
    entry = 40 + 64 * 4 + 20 * 1  # first entry
    struct.pack_into(">q", raw, entry + 4, 7)  # points into the middle of record 0
    index.write_bytes(bytes(raw))
    result = cli("verifyStore", "--output", "json")
    assert result.exit_code == 1
    import json

    report = json.loads(result.stdout)
    kinds = {i["kind"] for i in report["issues"]}
    assert "cq-mismatch" in kinds and "index-bad-offset" in kinds
    cq_issue = next(i for i in report["issues"] if i["kind"] == "cq-mismatch")
    assert cq_issue["where"] == "GoldenTopicA/1" and cq_issue["offset"] == 3 and "tagsCode" in cq_issue["detail"]
    assert "mismatch" in result.stderr
