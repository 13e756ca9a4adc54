"""Topic, group, offset, send and cluster commands on a store directory (state-changing ones included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from golden_helpers import load_manifest

from tests.cli.conftest import write_conf


def test_batchcq_topic_send_and_query(cli):
    r = cli("updateTopic", "-c", "DefaultCluster", "-t", "OrderEvents", "-r", "4", "-w", "4", "-a", "+queue.type=BatchCQ")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "create topic to 127.0.0.1:10911 success.",
        "TopicConfig [topicName=OrderEvents, readQueueNums=4, writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, "
        "topicSysFlag=0, order=false, attributes={+queue.type=BatchCQ}]"]
    sent = cli.json("sendMessage", "-t", "OrderEvents", "-p", '{"order": 42}', "-k", "order-42", "-c", "TagA")
    assert sent["sendStatus"] == "SEND_OK" and sent["brokerName"] == "broker-a"
    cli.json("sendMessage", "-t", "OrderEvents", "-p", "second", "-k", "order-43", "-b", "broker-a", "-i", "2")
    found = cli.json("queryMsgByKey", "-t", "OrderEvents", "-k", "order-42")
    assert len(found) == 1
    assert found[0]["uniqKey"] == sent["msgId"] and found[0]["body"] == '{"order": 42}'
    assert found[0]["tags"] == "TagA" and found[0]["msgId"] == sent["offsetMsgId"]
    status = {r["queueId"]: r for r in cli.json("topicStatus", "-t", "OrderEvents")}
    # the first send's queue is the round robin's (random start); the second was sent to queue 2
    assert sum(r["maxOffset"] for r in status.values()) == 2
    assert status[2]["maxOffset"] == 1 + (sent["queueId"] == 2)
    assert (cli.store / "batchconsumequeue" / "OrderEvents").is_dir()
    info = cli.json("topicRoute", "-t", "OrderEvents")
    assert info["queueDatas"][0]["readQueueNums"] == 4
    assert cli.json("verifyStore")["ok"] is True
    change = cli("updateTopic", "-c", "DefaultCluster", "-t", "OrderEvents", "-a", "+queue.type=SimpleCQ")
    assert change.exit_code == 1 and "queue.type" in change.stderr
    assert "OrderEvents" in cli.json("topicList")


def test_send_message_option_rules(cli):
    cli("updateTopic", "-c", "DefaultCluster", "-t", "T1", "-r", "2", "-w", "2")
    r = cli("sendMessage", "-t", "T1", "-p", "x", "-i", "1")
    assert r.exit_code == 2 and "Broker name must be set" in r.stderr
    r = cli("sendMessage", "-t", "T1", "-p", "x", "-b", "broker-b", "-i", "1")
    assert r.exit_code == 3 and "broker-b" in r.stderr  # not found, like every missing thing
    r = cli("sendMessage", "-t", "T1", "-p", "x", "-b", "broker-a", "-i", "7")
    assert r.exit_code == 1


def test_delete_topic_dry_run_then_real(golden_cli):
    cli = golden_cli("store-basic")
    plan = cli.json("deleteTopic", "-t", "GoldenTopicB", "-c", "DefaultCluster", "--dry-run")
    assert plan == {"topic": "GoldenTopicB", "clusterName": "DefaultCluster", "queues": 4, "messages": 100,
                    "groupsWithOffsets": [], "applied": False}
    assert (cli.store / "consumequeue" / "GoldenTopicB").is_dir()
    assert not (cli.store / "config").exists()  # a dry run writes nothing at all
    r = cli("deleteTopic", "-t", "GoldenTopicB", "-c", "DefaultCluster")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["delete topic [GoldenTopicB] from cluster [DefaultCluster] success.",
                                     "delete topic [GoldenTopicB] from NameServer success."]
    assert not (cli.store / "consumequeue" / "GoldenTopicB").exists()
    assert cli("topicStatus", "-t", "GoldenTopicB").exit_code == 3
    assert cli("deleteTopic", "-t", "GoldenTopicB", "-c", "DefaultCluster").exit_code == 3
    assert cli("deleteTopic", "-t", "GoldenTopicA").exit_code == 2  # -c is required


def test_groups_and_offsets(golden_cli):
    cli = golden_cli("store-basic")
    manifest = load_manifest("store-basic")
    r = cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1", "-r", "3")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("create subscription group to 127.0.0.1:10911 success.\nSubscriptionGroupConfig{groupName=G1")
    assert "retryMaxTimes=3" in r.stdout
    no_offsets = cli("consumerProgress", "-g", "G1")
    assert no_offsets.exit_code == 3
    # dry run: the plan, nothing stored
    plan = cli.json("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "0", "--dry-run")
    assert plan["applied"] is False and [q["resetOffset"] for q in plan["queues"]] == [0, 0, 0, 0]
    assert cli("consumerProgress", "-g", "G1").exit_code == 3
    # by time: the first message stored at/after the 11th message of queue 1
    q1 = sorted((m for m in manifest["messages"] if (m["topic"], m["queueId"]) == ("GoldenTopicA", 1)),
                key=lambda m: m["queueOffset"])
    ts = q1[10]["storeTimestamp"]
    applied = cli.json("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", str(ts))
    assert applied["applied"] is True
    by_q = {q["queueId"]: q["resetOffset"] for q in applied["queues"]}
    expect_q1 = min(m["queueOffset"] for m in q1 if m["storeTimestamp"] >= ts)
    assert by_q[1] == expect_q1
    rows = {r["queueId"]: r for r in cli.json("consumerProgress", "-g", "G1", "-t", "GoldenTopicA")}
    assert rows[1]["consumerOffset"] == expect_q1 and rows[1]["diff"] == 25 - expect_q1
    # one queue to an exact offset
    one = cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "now", "-b", "127.0.0.1:10911", "-q", "2",
              "-o", "7")
    assert one.exit_code == 0, one.stderr
    assert one.stdout.splitlines()[-1] == "reset consumer offset to 7"
    assert {r["queueId"]: r["consumerOffset"] for r in cli.json("consumerProgress", "-g", "G1")}[2] == 7
    skipped = cli.json("skipAccumulatedMessage", "-g", "G1", "-t", "GoldenTopicA")
    assert [q["resetOffset"] for q in skipped["queues"]] == [25, 25, 25, 25]
    table = cli("consumerProgress", "-g", "G1")
    assert table.stdout.splitlines()[0].split()[:3] == ["#Topic", "#Broker", "Name"]
    assert "Consume Diff Total: 0" in table.stdout
    # the destination must exist, as Apache's UPDATE_CONSUMER_OFFSET requires: a clone makes no group
    assert cli("cloneGroupOffset", "-s", "G1", "-d", "G2", "-t", "GoldenTopicA").exit_code == 3
    assert cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G2").exit_code == 0
    clone = cli("cloneGroupOffset", "-s", "G1", "-d", "G2", "-t", "GoldenTopicA")
    assert clone.exit_code == 0 and clone.stdout.startswith("clone group offset success. srcGroup[G1], destGroup=[G2]")
    assert [r["consumerOffset"] for r in cli.json("consumerProgress", "-g", "G2")] == [25, 25, 25, 25]
    assert cli.json("consumerProgress") == []  # as Apache: only groups with a %RETRY% topic are listed
    assert cli.json("topicList", "-c")[0]["clusterName"] == "DefaultCluster"
    r = cli("deleteSubGroup", "-c", "DefaultCluster", "-g", "G2", "-r", "true")
    assert r.exit_code == 0 and "delete subscription group [G2] from broker [127.0.0.1:10911] in cluster" in r.stdout
    assert cli("consumerProgress", "-g", "G2").exit_code == 3


def test_reset_offset_errors(golden_cli):
    cli = golden_cli("store-basic")
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1")
    bad = cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "yesterday")
    assert bad.exit_code == 2  # a usage error
    assert "invalid -s/--timestamp 'yesterday'" in bad.stderr and "yyyy-MM-dd#HH:mm:ss:SSS" in bad.stderr
    assert bad.stderr.count("\n") == 1
    unknown = cli("resetOffsetByTime", "-g", "G1", "-t", "NoTopic", "-s", "now")
    assert unknown.exit_code == 3
    no_group = cli("resetOffsetByTime", "-g", "NoGroup", "-t", "GoldenTopicA", "-s", "now")
    assert no_group.exit_code == 3 and "NoGroup" in no_group.stderr
    bad_range = cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "now", "-b", "127.0.0.1:10911",
                    "-q", "0", "-o", "99")
    assert bad_range.exit_code == 1 and "99" in bad_range.stderr
    assert cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "now", "-q", "0").exit_code == 2
    date_ok = cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "2020-01-01#00:00:00:000", "--dry-run")
    assert date_ok.exit_code == 0, date_ok.stderr


def test_cluster_commands(golden_cli):
    cli = golden_cli("store-basic")
    rows = cli.json("clusterList")
    assert [(r["clusterName"], r["brokerName"], r["brokerAddr"]) for r in rows] == [
        ("DefaultCluster", "broker-a", "127.0.0.1:10911")]
    assert rows[0]["activated"] is False
    table = cli("clusterList")
    assert table.stdout.splitlines()[0].split()[:4] == ["#Cluster", "Name", "#Broker", "Name"]
    status = cli.json("brokerStatus", "-b", "127.0.0.1:10911")
    assert status["commitLogMaxOffset"] == str(load_manifest("store-basic")["commitLogMaxOffset"])
    text = cli("brokerStatus", "-c", "DefaultCluster")
    assert any(line.startswith("127.0.0.1:10911") and "commitLogMaxOffset" in line for line in text.stdout.splitlines())
    conf = cli.json("getBrokerConfig", "-c", "DefaultCluster")["127.0.0.1:10911"]  # -c: by broker address
    assert conf["brokerName"] == "broker-a" and conf["mappedFileSizeConsumeQueue"] == "400"
    assert cli("getBrokerConfig", "-b", "127.0.0.1:10911").stdout.startswith("============127.0.0.1:10911============")
    route = cli("topicRoute", "-t", "GoldenTopicA", "-l")
    assert route.stdout.splitlines()[1].split()[:2] == ["DefaultCluster", "broker-a"]


def test_get_broker_config_on_a_store_masks_credentials(cli, tmp_path):
    """As the broker answers GET_BROKER_CONFIG over the network: a store directory's config file is no
    reason to print the inner client's secret key."""
    cli.config = write_conf(tmp_path / "broker.conf", {
        "innerClientAuthenticationCredentials": '{"accessKey":"rocketmq","secretKey":"12345678"}'})
    conf = cli.json("getBrokerConfig", "-b", "127.0.0.1:10911")
    assert conf["innerClientAuthenticationCredentials"] == "***"
    # the length the broker runs its filter bitmaps with (its bloom filter's bits), as -n shows it
    assert conf["bitMapLengthConsumeQueueExt"] == "112"
    assert "12345678" not in cli("getBrokerConfig", "-c", "DefaultCluster").stdout


def test_config_names_the_embedded_broker(golden_cli, tmp_path):
    cli = golden_cli("store-basic")
    conf = Path(cli.config)
    conf.write_text(conf.read_text() + "brokerName=broker-x\nbrokerClusterName=ProdCluster\nlistenPort=10999\n")
    assert cli.json("topicStatus", "-t", "GoldenTopicA", "-c", "ProdCluster")[0]["brokerName"] == "broker-x"
    wrong = cli("topicStatus", "-t", "GoldenTopicA", "-c", "DefaultCluster")
    assert wrong.exit_code == 3 and "ProdCluster" in wrong.stderr  # not found: exit 3
    assert cli.json("queryMsgByOffset", "-t", "GoldenTopicA", "-b", "broker-x", "-i", "0", "-o", "0")["queueOffset"] == 0
    assert cli("createUser", "-b", "127.0.0.1:10999", "-u", "u", "-p", "p").exit_code == 0


def test_decode_message_id(cli):
    r = cli.json("decodeMessageId", "-i", "7F0000010001000010000000000A0000")
    assert r["ip"] == "127.0.0.1" and r["pid"] == 1
    text = cli("DecodeMessageId", "-i", "7F0000010001000010000000000A0000")
    assert text.stdout.startswith("ip=127.0.0.1date=") and text.exit_code == 0
    assert cli("decodeMessageId").exit_code == 2
    assert cli("decodeMessageId", "-i", "xyz").exit_code == 1


def test_decode_message_id_late_in_a_month() -> None:
    """An id made on Nov 27 (its month span past 2**31 ms) decodes to Nov 27, not ~49.7 days earlier."""
    from datetime import datetime

    from broker_core.store.codec.message_id import UniqKeyGenerator
    from mqadmin.msgid import decode_message_id

    sent = int(datetime(2026, 11, 27, 17, 0, 0).timestamp() * 1000)
    key = UniqKeyGenerator("127.0.0.1", clock=lambda: sent).next_id()
    assert decode_message_id(key, clock=lambda: sent + 60_000).date_ms == sent


def test_store_lock_held_by_another_process(golden_cli):
    cli = golden_cli("store-basic")
    holder = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from broker_core.store.store_lock import StoreLock
        lock = StoreLock(Path({str(cli.store)!r}))
        lock.acquire()
        print("locked", flush=True)
        sys.stdin.readline()
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd())
    try:
        assert proc.stdout.readline().strip() == "locked"
        write = cli("updateTopic", "-c", "DefaultCluster", "-t", "T2")
        assert write.exit_code == 1
        assert "held by a running broker" in write.stderr and "-n 127.0.0.1:9876" in write.stderr
        assert write.stderr.count("\n") == 1
        user = cli("createUser", "-c", "DefaultCluster", "-u", "a", "-p", "b")
        assert user.exit_code == 1 and "-n 127.0.0.1:9876" in user.stderr
        # inspection still works beside the running broker
        assert len(cli.json("topicStatus", "-t", "GoldenTopicA")) == 4
        assert cli.json("verifyStore")["ok"] is True
        rebuild = cli("rebuildStore", "--parts", "cq")
        # a rebuild rewrites files: -n cannot do it (it refuses), so the hint is to stop the broker
        assert rebuild.exit_code == 1 and rebuild.stderr.endswith(
            "; stop the broker first to rebuild its files (rebuildStore --verify checks them beside it)\n")
        assert "with -n" not in rebuild.stderr
        dry = cli("resetOffsetByTime", "-g", "G", "-t", "GoldenTopicA", "-s", "now", "--dry-run")
        assert dry.exit_code == 3 and "Group G does not exist" in dry.stderr  # read-only: not the lock error
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=10)
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T2").exit_code == 0


def test_usage_and_failure_conventions(golden_cli, tmp_path):
    cli = golden_cli("store-basic")
    missing = cli("topicStatus")
    assert missing.exit_code == 2 and "--topic" in missing.stderr
    unknown = cli("noSuchCommand")
    assert unknown.exit_code == 2 and "The sub command noSuchCommand not exist." in unknown.stderr
    assert cli("TOPICSTATUS", "-t", "GoldenTopicA").exit_code == 0
    assert cli("topicstatus", "-t", "GoldenTopicA", "--output", "json").exit_code == 0
    unknown_topic = cli("topicStatus", "-t", "Nope")
    assert unknown_topic.exit_code == 3 and "Nope" in unknown_topic.stderr
    # -n / NAMESRV_ADDR mean remote mode: nothing listens on port 1, so one line names the address
    remote = cli("topicStatus", "-t", "GoldenTopicA", "-n", "127.0.0.1:1")
    assert remote.exit_code == 1 and "cannot connect to name server 127.0.0.1:1: connection refused" in remote.stderr
    assert len(remote.stderr.strip().splitlines()) == 1
    env_remote = cli("topicList", env={"NAMESRV_ADDR": "127.0.0.1:1"})
    assert env_remote.exit_code == 1 and "127.0.0.1:1" in env_remote.stderr
    no_store = cli("topicList", store=tmp_path / "absent")
    assert no_store.exit_code == 3 and "does not exist" in no_store.stderr
    assert not (tmp_path / "absent").exists()
    quiet = cli("queryMsgByKey", "-t", "GoldenTopicA", "-k", "none")
    assert "Traceback" not in quiet.stderr
    loud = cli("queryMsgByKey", "-t", "GoldenTopicA", "-k", "none", "--verbose")
    assert loud.exit_code == 3 and "Traceback" in loud.stderr
    bad_conf = tmp_path / "bad.conf"
    bad_conf.write_text("listenPort=abc\n")
    r = cli.runner.invoke(__import__("mqadmin.app", fromlist=["app"]).app,
                          ["topicList", "--store", str(cli.store), "--config", str(bad_conf)])
    assert r.exit_code == 1 and "listenPort" in r.stderr
    help_text = cli.runner.invoke(__import__("mqadmin.app", fromlist=["app"]).app, ["updateTopic", "-h"])
    assert help_text.exit_code == 0 and "--attributes" in help_text.stdout


def test_shell_completion_lists_topics(golden_cli):
    cli = golden_cli("store-basic")
    from mqadmin.cli import complete_topic

    class Ctx:
        params = {"store": str(cli.store), "config": str(cli.config)}

    assert complete_topic(Ctx(), "Golden") == ["GoldenTopicA", "GoldenTopicB"]
    Ctx.params = {"store": "/nonexistent/dir"}
    assert complete_topic(Ctx(), "G") == []


def _readme_tour_commands() -> list[str]:
    """The mqadmin lines of the README's tour block, comments cut off."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## A 5-minute tour", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].rstrip() for line in block.splitlines() if line.startswith("mqadmin ")]


def test_tour_runs_twice(tmp_path):
    """``make tour`` runs what the README says it runs: the tour block's first seven commands, in order."""
    store = tmp_path / "store"
    env = dict(os.environ, NAMESRV_ADDR="")
    for run in range(2):
        out = subprocess.run([sys.executable, "-m", "broker_core.tour", "--store", str(store)], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        if run == 0:
            shown = [line[2:] for line in out.stdout.splitlines() if line.startswith("$ mqadmin ")]
            assert shown == _readme_tour_commands()[:7]
        assert "$ mqadmin queryMsgByKey -t OrderEvents -k order-42" in out.stdout
        assert ("updating its password" in out.stdout) == (run == 1)
        assert "store OK" in out.stdout
    status = json.loads(subprocess.run([sys.executable, "-m", "mqadmin.app", "topicStatus", "-t", "OrderEvents",
                                        "--store", str(store), "--output", "json"], capture_output=True, text=True,
                                       env=env).stdout)
    assert sum(r["maxOffset"] for r in status) == 4


def test_verify_store_after_delete_topic_counts_its_records_apart(golden_cli):
    """Issue 16, bug 7: a deleted topic's records are not 'not yet dispatched'."""
    cli = golden_cli("store-basic")
    before = cli.json("verifyStore")
    assert before["undispatched_records"] == 0 and before["deleted_topic_records"] == 0
    assert cli("deleteTopic", "-t", "GoldenTopicB", "-c", "DefaultCluster").exit_code == 0
    after = cli.json("verifyStore")
    assert after["undispatched_records"] == 0
    assert after["deleted_topic_records"] == 100 and after["ok"] is True
    assert "deleted-topic records" in cli("verifyStore").stdout


def test_message_report_without_tags_and_with_its_body_file_blocked(cli, tmp_path, monkeypatch):
    """A message without tags or keys reads ``[null]`` as in Java's report (it read ``[None]``), and a
    body file that cannot be written (here a file where its directory goes) fails the command naming
    the file, after the report (it failed with "unexpected failure: [Errno 17] File exists" and no
    report at all)."""
    import tempfile

    cli("updateTopic", "-c", "DefaultCluster", "-t", "Bare")
    sent = cli.json("sendMessage", "-t", "Bare", "-p", "plain")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report = cli("queryMsgById", "-t", "Bare", "-i", sent["offsetMsgId"])
    assert report.exit_code == 0, report.stderr
    assert "Tags:                [null]" in report.stdout and "Keys:                [null]" in report.stdout
    body = tmp_path / "rocketmq" / "msgbodys" / sent["offsetMsgId"]
    assert body.read_bytes() == b"plain"
    body.unlink()
    body.parent.rmdir()
    body.parent.write_bytes(b"")  # a file where the directory goes
    blocked = cli("queryMsgById", "-t", "Bare", "-i", sent["offsetMsgId"])
    assert blocked.exit_code == 1
    assert "Message Body Path:   (not written, see below)" in blocked.stdout
    assert blocked.stderr.strip() == (f"mqadmin queryMsgById: cannot write the message body to {body}: "
                                      "File exists")


def test_the_default_store_says_where_it_is_looked_for(tmp_path: Path) -> None:
    """A first run in a directory without ./store said only "store is not a store directory"."""
    env = {k: v for k, v in os.environ.items() if k not in ("RMQ_STORE", "NAMESRV_ADDR")}
    mqadmin = [sys.executable, "-m", "mqadmin.app"]
    done = subprocess.run([*mqadmin, "topicList"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stderr == (
        "mqadmin topicList: store is not a store directory (it does not exist) (the default store, ./store of the "
        "current directory: give --store DIR or set RMQ_STORE)\n")
    given = subprocess.run([*mqadmin, "topicList", "--store", "elsewhere"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert given.returncode == 3 and given.stderr == \
        "mqadmin topicList: elsewhere is not a store directory (it does not exist)\n"


def test_verify_store_names_a_record_whose_body_crc_does_not_match(golden_cli):
    """One flipped body byte in a cleanly closed store: verifyStore reported 16,796 'index entry points
    at no record start' lines (its walk ended quietly at the damaged record) and never the record."""
    import struct

    cli = golden_cli("store-basic")
    messages = sorted(load_manifest("store-basic")["messages"], key=lambda m: m["physicalOffset"])
    victim = messages[120]
    phy = victim["physicalOffset"]
    commitlog = max((f for f in (cli.store / "commitlog").iterdir() if int(f.name) <= phy), key=lambda f: int(f.name))
    pos = phy - int(commitlog.name)
    data = bytearray(commitlog.read_bytes())
    assert struct.unpack_from(">i", data, pos)[0] == victim["size"]
    tail = 1 + len(victim["topic"]) + 2 + len(victim["propertiesString"].encode())
    data[pos + victim["size"] - tail - victim["bodyLength"]] ^= 0xFF  # the body's first byte
    commitlog.write_bytes(bytes(data))

    verified = cli("verifyStore", "--output", "json")
    report = json.loads(verified.stdout)
    first = report["issues"][0]
    assert (first["kind"], first["where"], first["offset"]) == ("log-corrupt", commitlog.name, phy), first
    assert "body CRC mismatch" in first["detail"] and report["ok"] is False
    assert not any(i["kind"] == "index-bad-offset" for i in report["issues"]), report["issues"][:3]
    assert report["records"] == 120 and report["follow_on_issues"] > 0
    text = cli("verifyStore")
    assert text.exit_code == 1 and "log-corrupt" in text.stdout


def test_verify_store_names_a_missing_middle_commitlog_file(golden_cli):
    """A commitlog file deleted between the first and the last: the walk ended quietly at it, and the
    first issues were queue units and index entries pointing there, none naming the file."""
    cli = golden_cli("store-basic")
    files = sorted((cli.store / "commitlog").iterdir())
    assert len(files) >= 3
    middle = files[1]
    middle.unlink()
    verified = cli("verifyStore", "--output", "json")
    assert verified.exit_code == 1
    first = json.loads(verified.stdout)["issues"][0]
    assert (first["kind"], first["offset"]) == ("log-corrupt", int(middle.name)), first
    assert f"commitlog file {middle.name} is missing" in first["detail"]
