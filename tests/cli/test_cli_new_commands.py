"""Issue 16, missing commands on a store directory (embedded mode): Apache's names, flags and output."""

from __future__ import annotations

import json

from small_fs import fill
from typer.testing import CliRunner

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from mqadmin.app import app


def _topic(cli, name="T", queues="4"):
    r = cli("updateTopic", "-c", "DefaultCluster", "-t", name, "-r", queues, "-w", queues)
    assert r.exit_code == 0, r.stderr


def test_connections_on_a_store_directory_are_not_online(cli):
    _topic(cli)
    # ... and they say why, and where clients are seen (the README promises it for who-is-online commands)
    why = " not online at store {} (a store directory has no connected clients; use -n <namesrv>)\n"
    for args, who in ((("consumerConnection", "-g", "G1"), "consumer group[G1]"),
                      (("consumerStatus", "-g", "G1"), "consumer group[G1]"),
                      (("producerConnection", "-g", "P1", "-t", "T"), "producer group[P1]")):
        r = cli(*args)
        assert r.exit_code == 3 and r.stderr.endswith(who + why.format(cli.store)), r.stderr
    assert cli("producerConnection", "-g", "P1", "-t", "NoTopic").exit_code == 3


def test_update_broker_config_needs_a_running_broker(cli):
    r = cli("updateBrokerConfig", "-c", "DefaultCluster", "-k", "maxMessageSize", "-v", "1024")
    assert r.exit_code == 1 and "use -n" in r.stderr
    assert cli("updateBrokerConfig", "-k", "a", "-v", "b").exit_code == 2
    assert cli("updateBrokerConfig", "-c", "Nope", "-k", "a", "-v", "b").exit_code == 3


def test_update_broker_config_on_a_store_with_its_config_file(tmp_path):
    """With --config (the file the store's broker starts with) the change is written there; the store
    used to be opened read-only for this command, so it always failed with "nothing can change"."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\n")
    Broker(tmp_path / "store", BrokerConfig.load(conf, tmp_path / "store"), audit_log_path=None).shutdown()
    target = ["--store", str(tmp_path / "store"), "--config", str(conf)]
    env = {"NAMESRV_ADDR": "", "RMQ_STORE": ""}
    r = CliRunner().invoke(app, ["updateBrokerConfig", "-c", "DefaultCluster", "-k", "fileReservedTime", "-v", "48",
                                 *target], env=env)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "update broker config success, 127.0.0.1:10911\n"
    assert conf.read_text().splitlines() == ["brokerName=broker-a", "fileReservedTime=48"]
    shown = CliRunner().invoke(app, ["getBrokerConfig", "-c", "DefaultCluster", "--output", "json", *target], env=env)
    assert json.loads(shown.stdout)["127.0.0.1:10911"]["fileReservedTime"] == "48"


def test_update_topic_perm(cli):
    _topic(cli)
    r = cli("updateTopicPerm", "-b", "127.0.0.1:10911", "-t", "T", "-p", "4")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "update topic perm from 6 to 4 in 127.0.0.1:10911 success.",
        "TopicConfig [topicName=T, readQueueNums=4, writeQueueNums=4, perm=R--, topicFilterType=SINGLE_TAG, "
        "topicSysFlag=0, order=false, attributes={}]."]
    assert cli.json("topicRoute", "-t", "T")["queueDatas"][0]["perm"] == 4
    again = cli("updateTopicPerm", "-c", "DefaultCluster", "-t", "T", "-p", "4")
    assert again.stdout.strip() == "new perm equals to the old one!"
    assert cli("updateTopicPerm", "-c", "DefaultCluster", "-t", "T", "-p", "5").exit_code == 2
    assert cli("updateTopicPerm", "-c", "DefaultCluster", "-t", "Missing", "-p", "6").exit_code == 3


def test_a_perm_of_8_or_more_is_a_usage_error(cli):
    """PermName.isValid is 0..7 (Java's mqadmin refuses 9): updateTopic -p 9 was stored, and its route
    then showed perm 0, so every send was refused "sending message is forbidden"."""
    _topic(cli)
    before = cli.json("topicRoute", "-t", "T")
    for perm in ("8", "9", "15"):
        r = cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-p", perm)
        assert r.exit_code == 2 and "-p" in r.stderr and "less than or equal to 7" in r.stderr, r.stderr
    assert cli.json("topicRoute", "-t", "T") == before


def test_topic_cluster_list_and_allocate_mq(cli):
    _topic(cli, queues="3")
    r = cli("topicClusterList", "-t", "T")
    assert r.exit_code == 0 and r.stdout == "DefaultCluster\n"
    assert cli("topicClusterList", "-t", "Missing").exit_code == 3
    r = cli("allocateMQ", "-t", "T", "-i", "10.0.0.1,10.0.0.2")
    got = json.loads(r.stdout)["result"]
    assert [q["queueId"] for q in got["10.0.0.1"]] == [0, 1] and [q["queueId"] for q in got["10.0.0.2"]] == [2]


def test_get_consumer_config(cli):
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1", "-r", "5")
    r = cli("getConsumerConfig", "-g", "G1")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "=============================DefaultCluster:broker-a============================="
    assert lines[1] == f"{'groupName':<40}=  G1" and f"{'retryMaxTimes':<40}=  5" in lines
    assert f"{'subscriptionDataSet':<40}=  " in lines
    assert cli("getConsumerConfig", "-g", "NoGroup").exit_code == 3


def test_update_topic_list_and_sub_group_list(cli, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps([{"topicName": "A", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                                  {"topicName": "B", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                                   "attributes": {"queue.type": "BatchCQ"}}]))
    r = cli("updateTopicList", "-c", "DefaultCluster", "-f", str(topics))
    assert r.stdout == "submit batch of topic config to 127.0.0.1:10911 success, please check the result later.\n"
    assert cli.json("topicRoute", "-t", "B")["queueDatas"][0]["readQueueNums"] == 1
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([{"groupName": "GA", "retryMaxTimes": 3}, {"groupName": "GB"}]))
    r = cli("updateSubGroupList", "-b", "127.0.0.1:10911", "-f", str(groups))
    assert r.exit_code == 0, r.stderr
    assert "retryMaxTimes=3" in cli("updateSubGroup", "-c", "DefaultCluster", "-g", "GA", "-r", "3").stdout
    bad = tmp_path / "bad.json"
    bad.write_text('[{"topicName": "C", "readQueueNums": "x"}]')
    r = cli("updateTopicList", "-c", "DefaultCluster", "-f", str(bad))
    assert r.exit_code == 1 and "readQueueNums must be an integer" in r.stderr
    assert cli("updateTopicList", "-c", "DefaultCluster", "-f", str(tmp_path / "none.json")).exit_code == 3


def test_check_msg_send_rt(cli):
    _topic(cli, queues="2")
    r = cli("checkMsgSendRT", "-t", "T", "-a", "4", "-s", "16")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"]
    assert [line[34:38].strip() for line in lines[1:5]] == ["0", "1", "0", "1"]
    assert all(line[40:60].strip() == "true" for line in lines[1:5]) and lines[5].startswith("Avg RT: ")
    assert sum(q["maxOffset"] for q in cli.json("topicStatus", "-t", "T")) == 4


def test_broker_consume_stats(golden_cli):
    cli = golden_cli("store-basic")
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G1")
    cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "-1")
    cli("resetOffsetByTime", "-g", "G1", "-t", "GoldenTopicA", "-s", "0", "-b", "127.0.0.1:10911", "-q", "1",
        "-o", "20")
    out = cli("brokerConsumeStats", "-b", "127.0.0.1:10911").stdout.splitlines()
    assert out[0].split()[:2] == ["#Topic", "#Group"]
    rows = [line for line in out[1:] if line.startswith("GoldenTopicA")]
    assert [(r[66:130].strip(), r[164:168].strip(), r[212:232].strip()) for r in rows] == [
        ("G1", "0", "0"), ("G1", "1", "5"), ("G1", "2", "0"), ("G1", "3", "0")]
    assert out[-1] == "Diff Total: 5"
    assert len(cli.json("brokerConsumeStats", "-b", "127.0.0.1:10911", "-l", "1")["rows"]) == 1


def test_export_metadata_and_configs(cli, tmp_path):
    _topic(cli, "UserTopic")
    cli("updateSubGroup", "-c", "DefaultCluster", "-g", "UserGroup")
    r = cli("exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path / "exp"))
    assert r.stdout == f"export {tmp_path / 'exp' / 'metadata.json'} success\n"
    data = json.loads((tmp_path / "exp" / "metadata.json").read_text())
    assert list(data["topicConfigTable"]) == ["UserTopic"]  # no TBW102, cluster/broker-name or system topics
    assert list(data["subscriptionGroupTable"]) == ["UserGroup"] and data["exportTime"] > 0
    cli("exportMetadata", "-b", "127.0.0.1:10911", "-t", "-f", str(tmp_path / "exp"))
    assert list(json.loads((tmp_path / "exp" / "topic.json").read_text())) == ["topicConfigTable"]
    r = cli("exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path / "exp"))
    configs = json.loads((tmp_path / "exp" / "configs.json").read_text())
    assert configs["brokerConfigs"]["broker-a"]["brokerClusterName"] == "DefaultCluster"
    assert configs["clusterScale"]["masterBrokerSize"] == 1


def test_export_to_a_full_disk_names_the_file_and_leaves_no_half_written_one(cli, small_fs):
    fill(small_fs / "filler")
    r = cli("exportMetadata", "-c", "DefaultCluster", "-f", str(small_fs / "exp"))
    assert (r.exit_code, r.stderr) == (1, f"mqadmin exportMetadata: cannot write {small_fs / 'exp' / 'metadata.json'}: "
                                          "No space left on device\n")
    assert list(small_fs.rglob("*.tmp")) == []  # the half-written metadata.json.tmp went too


def test_kv_config_needs_a_name_server(cli):
    for argv in (("updateKvConfig", "-s", "NS", "-k", "k", "-v", "v"), ("deleteKvConfig", "-s", "NS", "-k", "k"),
                 ("updateOrderConf", "-t", "T", "-m", "get")):
        r = cli(*argv)
        assert r.exit_code == 1 and "use -n" in r.stderr, (argv, r.stderr)
    assert cli("updateOrderConf", "-t", "T", "-m", "fly").exit_code == 2


def test_send_msg_status_and_cluster_rt(cli):
    r = cli("sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "10")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("rt=") and "SendResult [sendStatus=SEND_OK" in line
                                   and "messageQueue=MessageQueue [topic=broker-a, brokerName=broker-a" in line
                                   for line in lines)
    assert cli("sendMsgStatus", "-b", "broker-x").exit_code == 3
    r = cli("clusterRT", "-a", "3", "-s", "8")
    assert r.exit_code == 0, r.stderr
    head, row = r.stdout.splitlines()
    assert head == f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  {'#successCount':<8}  {'#failCount':<8}"
    assert row[:24].strip() == "DefaultCluster" and row[26:50].strip() == "broker-a"
    assert row[62:78].strip() == "3" and row[80:].strip() == "0"


def test_query_cq_reads_the_consume_queue(golden_cli):
    cli = golden_cli("store-basic")
    msgs = cli.json("printMsgByQueue", "-t", "GoldenTopicA", "-a", "broker-a", "-i", "0")
    r = cli("queryCq", "-t", "GoldenTopicA", "-q", "0", "-i", "3", "-c", "2")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["Queue data: ", "max: 25, min: 0", "======================================"]
    assert lines[3] == "idx: 3"
    assert lines[4].startswith(f"ConsumeQueueData{{physicOffset={msgs[3]['commitLogOffset']}, "
                               f"physicSize={msgs[3]['storeSize']}, tagsCode=")
    assert lines[6] == "idx: 4" and len(lines) == 9
    assert cli("queryCq", "-t", "NoTopic", "-q", "0", "-i", "0").exit_code == 3
