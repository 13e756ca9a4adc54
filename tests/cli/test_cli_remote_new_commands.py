"""Issue 16's new commands over -n against a real mqbroker (live producer/consumer where they need one)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_remote import mqadmin, mqadmin_ok
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_remote_dispatched


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-remote-new")),
                        extra_args=("--registerNameServerPeriod", "1000")) as b:
        yield b


def test_update_broker_config_over_n(broker: BrokerProcess) -> None:
    n, addr = broker.namesrv_addr, broker.broker_addr
    assert mqadmin_ok("updateBrokerConfig", "-n", n, "-b", addr, "-k", "maxReconsumeTimes", "-v", "5") == \
        f"update broker config success, {addr}\n"
    # store keys too (fileReservedTime, deleteWhen...): the broker's answer used to list broker keys only,
    # so mqadmin refused them as unknown
    assert mqadmin_ok("updateBrokerConfig", "-n", n, "-b", addr, "-k", "fileReservedTime", "-v", "48") == \
        f"update broker config success, {addr}\n"
    config = json.loads(mqadmin_ok("getBrokerConfig", "-n", n, "-b", addr, "--output", "json"))
    assert config["maxReconsumeTimes"] == "5" and config["fileReservedTime"] == "48"
    assert "properties" not in config
    refused = mqadmin("updateBrokerConfig", "-n", n, "-b", addr, "-k", "brokerConfigPath", "-v", "/x")
    assert refused.returncode == 1 and "black list" in refused.stderr


def test_topic_commands_over_n(broker: BrokerProcess, tmp_path: Path) -> None:
    n, addr = broker.namesrv_addr, broker.broker_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "RT", "-r", "3", "-w", "3")
    out = mqadmin_ok("updateTopicPerm", "-n", n, "-b", addr, "-t", "RT", "-p", "4")
    assert out.startswith(f"update topic perm from 6 to 4 in {addr} success.\n")
    assert json.loads(mqadmin_ok("topicRoute", "-n", n, "-t", "RT", "--output", "json"))["queueDatas"][0]["perm"] == 4
    assert mqadmin_ok("topicClusterList", "-n", n, "-t", "RT") == "DefaultCluster\n"
    alloc = json.loads(mqadmin_ok("allocateMQ", "-n", n, "-t", "RT", "-i", "c1,c2"))["result"]
    assert [len(alloc["c1"]), len(alloc["c2"])] == [2, 1]
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps([{"topicName": "RT2", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}]))
    assert "submit batch of topic config to" in mqadmin_ok("updateTopicList", "-n", n, "-c", "DefaultCluster",
                                                    "-f", str(topics))
    rt = mqadmin_ok("checkMsgSendRT", "-n", n, "-t", "RT2", "-a", "3", "-s", "8").splitlines()
    assert [line[40:60].strip() for line in rt[1:4]] == ["true", "true", "true"]


def test_group_commands_over_n(broker: BrokerProcess, tmp_path: Path) -> None:
    n = broker.namesrv_addr
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([{"groupName": "RG", "retryMaxTimes": 4}]))
    mqadmin_ok("updateSubGroupList", "-n", n, "-c", "DefaultCluster", "-f", str(groups))
    out = mqadmin_ok("getConsumerConfig", "-n", n, "-g", "RG").splitlines()
    assert out[0] == f"=============================DefaultCluster:{broker.broker_name}============================="
    assert f"{'retryMaxTimes':<40}=  4" in out


def test_connections_of_live_clients_over_n(broker: BrokerProcess) -> None:
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.producer import Producer
    from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
    from broker_core.client.sync_bridge import LoopThread

    n = broker.namesrv_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "LiveT", "-r", "2", "-w", "2")
    assert mqadmin("consumerConnection", "-n", n, "-g", "LiveCG").returncode == 3
    assert mqadmin("producerConnection", "-n", n, "-g", "LivePG", "-t", "LiveT").returncode == 3
    loop = LoopThread("test-live-clients")
    inst = MQClientInstance(n)
    producer = Producer("LivePG", inst)
    consumer = PushConsumer("LiveCG", inst)
    consumer.subscribe("LiveT", "TagA || TagB")
    consumer.register_concurrently(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)

    async def start() -> None:
        await producer.start()
        await consumer.start()

    async def stop() -> None:
        await consumer.shutdown()
        await producer.shutdown()
        await inst.shutdown()

    try:
        loop.run(start(), timeout=30)
        deadline = time.monotonic() + 20
        while True:
            cc = mqadmin("consumerConnection", "-n", n, "-g", "LiveCG")
            pc = mqadmin("producerConnection", "-n", n, "-g", "LivePG", "-t", "LiveT")
            if (cc.returncode, pc.returncode) == (0, 0) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert cc.returncode == 0, cc.stderr
        lines = cc.stdout.splitlines()
        assert lines[0] == f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version"
        assert len(lines[1].split()) == 4  # clientId, addr, language, version
        assert lines[1].split()[-1].startswith("V")
        assert "LiveT" in cc.stdout and "TagA || TagB" in cc.stdout
        assert "ConsumeType: CONSUME_PASSIVELY" in cc.stdout and "MessageModel: CLUSTERING" in cc.stdout
        assert pc.returncode == 0, pc.stderr
        assert pc.stdout.startswith("0001  ") and pc.stdout.strip().split()[-1].startswith("V")
    finally:
        try:
            loop.run(stop(), timeout=30)
        finally:
            loop.close()


def test_kv_config_and_order_conf_over_n(broker: BrokerProcess) -> None:
    n = broker.namesrv_addr
    assert mqadmin_ok("updateKvConfig", "-n", n, "-s", "NS1", "-k", "k1", "-v", "v1") == \
        "create or update kv config to namespace success.\n"
    assert mqadmin_ok("updateOrderConf", "-n", n, "-t", "OT", "-m", "put", "-v", "broker-a:4") == \
        "update orderConf success. topic=[OT], orderConf=[broker-a:4]"
    assert mqadmin_ok("updateOrderConf", "-n", n, "-t", "OT", "-m", "get") == \
        "get orderConf success. topic=[OT], orderConf=[broker-a:4] "
    assert mqadmin_ok("updateOrderConf", "-n", n, "-t", "OT", "-m", "delete") == "delete orderConf success. topic=[OT]"
    gone = mqadmin("updateOrderConf", "-n", n, "-t", "OT", "-m", "get")
    assert gone.returncode == 3 and "No config item" in gone.stderr
    assert mqadmin_ok("deleteKvConfig", "-n", n, "-s", "NS1", "-k", "k1") == "delete kv config from namespace success.\n"


def test_export_and_broker_consume_stats_over_n(broker: BrokerProcess, tmp_path: Path) -> None:
    n, addr = broker.namesrv_addr, broker.broker_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "ExpT", "-r", "1", "-w", "1")
    mqadmin_ok("updateSubGroup", "-n", n, "-c", "DefaultCluster", "-g", "ExpG")
    mqadmin_ok("sendMessage", "-n", n, "-t", "ExpT", "-p", "x")
    mqadmin_ok("resetOffsetByTime", "-n", n, "-g", "ExpG", "-t", "ExpT", "-s", "-1")
    out = mqadmin_ok("brokerConsumeStats", "-n", n, "-b", addr).splitlines()
    row = next(line for line in out if line.startswith("ExpT"))
    assert row[66:130].strip() == "ExpG" and out[-1].startswith("Diff Total: ")
    mqadmin_ok("exportMetadata", "-n", n, "-c", "DefaultCluster", "-f", str(tmp_path))
    data = json.loads((tmp_path / "metadata.json").read_text())
    assert "ExpT" in data["topicConfigTable"] and "ExpG" in data["subscriptionGroupTable"]
    assert "TBW102" not in data["topicConfigTable"]


def test_broker_consume_stats_order_only_and_timeout_over_n(broker: BrokerProcess, tmp_path: Path) -> None:
    """-o true lists only ordered topics (Apache's fetchAllConsumeStatsInBroker with isOrder) and
    -t bounds the wait on a broker that does not answer; both were accepted and ignored."""
    n, addr = broker.namesrv_addr, broker.broker_addr
    for topic, order in (("StatPlainT", "false"), ("StatOrdT", "true")):
        mqadmin_ok("updateTopic", "-n", n, "-b", addr, "-t", topic, "-r", "1", "-w", "1", "-o", order)
        mqadmin_ok("sendMessage", "-n", n, "-t", topic, "-p", "x")
    mqadmin_ok("updateSubGroup", "-n", n, "-b", addr, "-g", "StatG")
    wait_remote_dispatched(n, addr)
    for topic in ("StatPlainT", "StatOrdT"):
        mqadmin_ok("resetOffsetByTime", "-n", n, "-g", "StatG", "-t", topic, "-s", "-1")

    def topics(*args: str) -> set[str]:
        rows = json.loads(mqadmin_ok("brokerConsumeStats", "-n", n, "-b", addr, "--output", "json", *args))["rows"]
        return {r["topic"] for r in rows if r["group"] == "StatG"}

    assert topics() == {"StatPlainT", "StatOrdT"}
    assert topics("-o", "false") == {"StatPlainT", "StatOrdT"}
    assert topics("-o", "true") == {"StatOrdT"}
    assert topics("-t", "20000") == {"StatPlainT", "StatOrdT"}

    with running_broker(tmp_path / "b", broker_name="broker-b", namesrv=n) as b:
        os.kill(b.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            r = mqadmin("brokerConsumeStats", "-n", n, "-b", b.broker_addr, "-t", "1500")
            took = time.monotonic() - started
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
    assert f"broker {b.broker_addr} did not answer within 1500 ms (-t/--timeoutMillis)" in r.stderr, r.stderr
    assert took < 4.5  # not the 5 s default request timeout (mqadmin itself takes ~1-2 s to start)


def test_send_msg_status_and_cluster_rt_over_n(broker: BrokerProcess) -> None:
    n, name = broker.namesrv_addr, broker.broker_name
    lines = mqadmin_ok("sendMsgStatus", "-n", n, "-b", name, "-c", "2").splitlines()
    assert len(lines) == 2 and all("SendResult [sendStatus=SEND_OK" in line for line in lines)
    row = mqadmin_ok("clusterRT", "-n", n, "-a", "3").splitlines()[1]
    assert row[26:50].strip() == name and row[62:78].strip() == "3"


def test_query_cq_over_n(broker: BrokerProcess) -> None:
    n = broker.namesrv_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "CqT", "-r", "1", "-w", "1")
    sent = [json.loads(mqadmin_ok("sendMessage", "-n", n, "-t", "CqT", "-p", f"m{i}", "--output", "json")) for i in range(2)]
    wait_remote_dispatched(n, broker.broker_addr)  # maxQueueIndex counts what reput has put in the queue
    view = json.loads(mqadmin_ok("queryCq", "-n", n, "-t", "CqT", "-q", "0", "-i", "0", "-c", "5", "--output", "json"))
    assert (view["minQueueIndex"], view["maxQueueIndex"]) == (0, 2) and len(view["queueData"]) == 2
    by_id = json.loads(mqadmin_ok("queryMsgById", "-n", n, "-t", "CqT", "-i", sent[1]["offsetMsgId"], "--output", "json"))
    assert view["queueData"][1]["physicOffset"] == by_id[0]["commitLogOffset"]
    assert mqadmin("queryCq", "-n", n, "-t", "NoSuchT", "-q", "0", "-i", "0").returncode == 3


def test_query_msg_by_id_tracks_a_group_that_is_not_online(broker: BrokerProcess) -> None:
    """Apache's message track: a group holding offsets with no consumer connected is NOT_ONLINE, with the
    broker's refusal as exceptionDesc; a Java null prints as null (not Python's None)."""
    n = broker.namesrv_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "TrackT", "-r", "1", "-w", "1")
    sent = json.loads(mqadmin_ok("sendMessage", "-n", n, "-t", "TrackT", "-p", "m", "--output", "json"))
    mqadmin_ok("updateSubGroup", "-n", n, "-c", "DefaultCluster", "-g", "TrackG")
    mqadmin_ok("resetOffsetByTime", "-n", n, "-g", "TrackG", "-t", "TrackT", "-s", "now")  # the group holds offsets
    text = mqadmin_ok("queryMsgById", "-n", n, "-t", "TrackT", "-i", sent["offsetMsgId"])
    assert text.splitlines()[-1] == ("MessageTrack [consumerGroup=TrackG, trackType=NOT_ONLINE, "
                                     "exceptionDesc=CODE:206 DESC:the consumer group[TrackG] not online]")
