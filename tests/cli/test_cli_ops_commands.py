"""Issue 16, the last missing commands: on a store directory (embedded) and over -n against mqbroker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cli.conftest import Cli, write_conf
from tests.cli.test_cli_remote import mqadmin, mqadmin_ok
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_remote_dispatched

if TYPE_CHECKING:
    from broker_core.client.producer import Producer


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-ops")),
                        extra_args=("--registerNameServerPeriod", "500")) as b:
        yield b


def _route_perm(n: str, topic: str) -> int:
    return json.loads(mqadmin_ok("topicRoute", "-n", n, "-t", topic, "--output", "json"))["queueDatas"][0]["perm"]


# ------------------------------------------------------------------------------ wipe/addWritePerm
def test_a_topics_own_perm_is_routed_with_its_inherit_bit(broker: BrokerProcess) -> None:
    """A readable and writable broker registers each topic's own perm (registerBrokerAll masks it only
    when the broker is not both): topicRoute showed 6 for a perm-7 topic, TBW102 included."""
    # first in this module: addWritePerm (below) routes every topic of the broker as 6, as Apache's
    # operateWritePermOfBroker, until the broker registers its whole table anew
    n = broker.namesrv_addr
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "InheritT", "-p", "7")
    assert _route_perm(n, "InheritT") == 7 and _route_perm(n, "TBW102") == 7


def test_wipe_and_add_write_perm_over_n(broker: BrokerProcess) -> None:
    n, name = broker.namesrv_addr, broker.broker_name
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "WpT", "-r", "2", "-w", "2")
    out = mqadmin_ok("wipeWritePerm", "-n", n, "-b", name)
    count = int(out.rsplit(", ", 1)[1])
    assert out == f"wipe write perm of broker[{name}] in name server[{n}] OK, {count}\n" and count >= 2
    assert _route_perm(n, "WpT") == 4
    # a drained topic is not written: the producer fell back to TBW102's route and the send succeeded
    # (on a second broker it created the topic there); Java's producer keeps the route and fails
    sent = mqadmin("sendMessage", "-n", n, "-t", "WpT", "-p", "drained")
    assert sent.returncode == 1 and "No route info of this topic: WpT" in sent.stderr, sent.stdout + sent.stderr
    time.sleep(1.5)  # periodic registrations (every 0.5 s) with an unchanged topic table keep the wipe
    assert _route_perm(n, "WpT") == 4
    out = mqadmin_ok("addWritePerm", "-n", n, "-b", name)
    assert out == f"add write perm of broker[{name}] in name server[{n}] OK, {count}\n"
    assert _route_perm(n, "WpT") == 6
    doc = json.loads(mqadmin_ok("wipeWritePerm", "-n", n, "-b", "no-such-broker", "--output", "json"))
    assert doc == [{"brokerName": "no-such-broker", "namesrvAddr": n, "wipeTopicCount": 0, "error": None}]


def test_write_perm_with_one_name_server_down_prints_failed_and_exits_1(broker: BrokerProcess) -> None:
    n, name = broker.namesrv_addr, broker.broker_name
    r = mqadmin("addWritePerm", "-n", f"{n};127.0.0.1:1", "-b", name)
    assert r.returncode == 1
    assert r.stdout.splitlines()[1] == f"add write perm of broker[{name}] in name server[127.0.0.1:1] Failed"
    assert r.stdout.splitlines()[0].startswith(f"add write perm of broker[{name}] in name server[{n}] OK, ")
    assert r.stderr.strip() == ("mqadmin addWritePerm: 127.0.0.1:1: cannot connect to name server 127.0.0.1:1: "
                                "connection refused")


def test_write_perm_on_a_store_directory_names_the_name_server(cli) -> None:
    for command in ("wipeWritePerm", "addWritePerm"):
        r = cli(command, "-b", "broker-a")
        assert r.exit_code == 1 and "a store directory has no name server; use -n" in r.stderr


# ------------------------------------------------------------------------------ live clients
class LiveConsumer:
    """Our Python push consumer (and a producer) on their own loop thread, stopped by the fixture."""

    def __init__(self, namesrv: str, group: str, topic: str) -> None:
        from broker_core.client.instance import MQClientInstance
        from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
        from broker_core.client.sync_bridge import LoopThread

        self.loop = LoopThread(f"test-{group}")
        self.instance = MQClientInstance(namesrv)
        self.consumer = PushConsumer(group, self.instance)
        self.consumer.subscribe(topic, "*")
        self.got: list[bytes] = []

        def listener(msgs):  # noqa: ANN001, ANN202
            self.got.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        self.consumer.register_concurrently(listener)
        self.loop.run(self.consumer.start(), timeout=30)
        self._producer: Producer | None = None

    def send(self, topic: str, bodies: list[str], keys: list[str] | None = None) -> None:
        """Send ``bodies`` from a producer of this client (group StPG), started on first use: one process
        for a batch of sends instead of an ``mqadmin sendMessage`` start per message."""
        from broker_core.client.message import Message
        from broker_core.client.producer import Producer

        async def go() -> None:
            if self._producer is None:
                self._producer = Producer("StPG", self.instance)
                await self._producer.start()
            for i, body in enumerate(bodies):
                await self._producer.send(Message(topic, body.encode(), keys=keys[i] if keys else None))

        self.loop.run(go(), timeout=60)

    @classmethod
    def online(cls, namesrv: str, group: str, topic: str, queues: int) -> LiveConsumer:
        """The topic and group made over -n, and a consumer of them that the broker lists as connected."""
        mqadmin_ok("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", topic, "-r", str(queues),
                   "-w", str(queues))
        mqadmin_ok("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", group)
        c = cls(namesrv, group, topic)
        try:
            deadline = time.monotonic() + 30
            while mqadmin("consumerConnection", "-n", namesrv, "-g", group).returncode != 0:
                assert time.monotonic() < deadline, "the consumer never came online"
                time.sleep(0.3)
        except BaseException:
            c.close()
            raise
        return c

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def close(self) -> None:
        async def stop() -> None:
            await self.consumer.shutdown()
            if self._producer is not None:
                await self._producer.shutdown()
            await self.instance.shutdown()
        try:
            self.loop.run(stop(), timeout=30)
        finally:
            self.loop.close()


@pytest.fixture(scope="module")
def live(broker: BrokerProcess) -> Iterator[LiveConsumer]:
    n = broker.namesrv_addr
    c = LiveConsumer.online(n, "StG", "StT", 2)
    try:
        deadline = time.monotonic() + 30
        c.send("StT", [f"m{i}" for i in range(4)], [f"k{i}" for i in range(4)])
        while len(c.got) < 4:
            assert time.monotonic() < deadline, f"consumed only {c.got}"
            time.sleep(0.2)
        yield c
    finally:
        c.close()


def test_consumer_status_with_client_id_prints_the_running_info(broker: BrokerProcess, live: LiveConsumer) -> None:
    out = mqadmin_ok("consumerStatus", "-n", broker.namesrv_addr, "-g", "StG", "-i", live.client_id)
    assert out.startswith("#Consumer Properties#\n")
    assert f"{'PROP_CONSUME_TYPE':<40}: CONSUME_PASSIVELY" in out and f"{'PROP_CONSUMEORDERLY':<40}: false" in out
    assert f"001 Topic: {'%RETRY%StG':<40} ClassFilter: {'false':<8} SubExpression: *" in out  # TreeSet order
    assert f"002 Topic: {'StT':<40} ClassFilter: {'false':<8} SubExpression: *" in out
    offsets = out.split("#Consumer Offset#\n")[1].split("\n\n")[0].splitlines()
    assert offsets[0] == f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}"
    rows = [r for r in offsets[1:] if r.startswith("StT ")]
    assert sum(int(r.split()[3]) for r in rows) == 4  # both queues consumed to the end
    assert "ProcessQueueInfo [commitOffset=" in out and "#Consumer RT&TPS#" in out
    rt = next(line for line in out.splitlines() if line.startswith("StT ") and line.count(".") >= 5)
    assert float(rt.split()[2]) > 0  # pull TPS over the last minute: it pulled 4 messages
    doc = json.loads(mqadmin_ok("consumerStatus", "-n", broker.namesrv_addr, "-g", "StG", "-i", live.client_id,
                         "-s", "--output", "json"))
    assert doc["properties"]["consumerGroup"] == "StG" and "MainThread" in doc["jstack"]
    gone = mqadmin("consumerStatus", "-n", broker.namesrv_addr, "-g", "StG", "-i", "10.0.0.9@nobody")
    assert gone.returncode == 3 and "not online" in gone.stderr


def test_consumer_status_of_the_group_writes_one_file_per_client(broker: BrokerProcess, live: LiveConsumer,
                                                                 tmp_path: Path) -> None:
    r = mqadmin("consumerStatus", "-n", broker.namesrv_addr, "-g", "StG", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile"
    index, cid, version, path = lines[1].split()
    assert (index, cid) == ("1", live.client_id) and version.startswith("V5_")
    assert (tmp_path / path).read_text().startswith("#Consumer Properties#")
    assert r.stdout.endswith("\n\nSame subscription in the same group of consumer\n\nRebalance OK\n")
    none = mqadmin("consumerStatus", "-n", broker.namesrv_addr, "-g", "NobodyG", cwd=tmp_path)
    assert none.returncode == 3 and "not online" in none.stderr


def test_get_consumer_status_reads_the_client_offsets(broker: BrokerProcess, live: LiveConsumer) -> None:
    n = broker.namesrv_addr
    out = mqadmin_ok("getConsumerStatus", "-n", n, "-g", "StG", "-t", "StT").splitlines()
    assert out[0] == "get consumer status from client. group=StG, topic=StT, originClientId="
    assert out[1] == f"{'#clientId':<50}  {'#brokerName':<15}  {'#queueId':<15}  {'#offset':<20}"
    rows = [line.split() for line in out[2:]]
    assert {r[0] for r in rows} == {live.client_id} and sum(int(r[3]) for r in rows) == 4
    assert out[2][52:67].strip() == broker.broker_name
    one = json.loads(mqadmin_ok("getConsumerStatus", "-n", n, "-g", "StG", "-t", "StT", "-i", live.client_id,
                         "--output", "json"))
    assert list(one["consumerTable"]) == [live.client_id]
    other = json.loads(mqadmin_ok("getConsumerStatus", "-n", n, "-g", "StG", "-t", "StT", "-i", "x@y", "--output", "json"))
    assert other["consumerTable"] == {}
    offline = mqadmin("getConsumerStatus", "-n", n, "-g", "NobodyG", "-t", "StT")
    assert offline.returncode == 3 and "No Any Consumer online in the consumer group: [NobodyG]" in offline.stderr


def test_query_msg_by_id_pushes_to_a_client_and_resends(broker: BrokerProcess, live: LiveConsumer) -> None:
    n = broker.namesrv_addr
    sent = json.loads(mqadmin_ok("sendMessage", "-n", n, "-t", "StT", "-p", "direct-1", "-k", "dk", "--output", "json"))
    deadline = time.monotonic() + 20
    while live.got.count(b"direct-1") < 1:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    out = mqadmin_ok("queryMsgById", "-n", n, "-t", "StT", "-i", sent["offsetMsgId"], "-g", "StG", "-d", live.client_id)
    assert out.startswith("ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, "
                          "remark=null, spentTimeMills=") and not out.endswith("\n")
    assert live.got.count(b"direct-1") == 2  # the listener had it once more, from the broker's push
    offline = mqadmin("queryMsgById", "-n", n, "-t", "StT", "-i", sent["offsetMsgId"], "-g", "StG", "-d", "a@b")
    assert offline.returncode == 3 and "not online" in offline.stderr
    # resend: the same body, keys and UNIQ_KEY go to the topic again (a new offset id), and are consumed
    out = mqadmin_ok("queryMsgById", "-n", n, "-t", "StT", "-i", sent["offsetMsgId"], "-s", "true", "-u", "unitA")
    assert out.startswith(f"prepare resend msg. originalMsgId={sent['offsetMsgId']}SendResult [sendStatus=SEND_OK, "
                          f"msgId={sent['msgId']}, offsetMsgId=")
    new_offset_id = out.split("offsetMsgId=")[1].split(",")[0]
    assert new_offset_id != sent["offsetMsgId"]
    while live.got.count(b"direct-1") < 3:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    wait_remote_dispatched(n, broker.broker_addr)  # consumed once in its queue; its index entries come after
    by_key = json.loads(mqadmin_ok("queryMsgByKey", "-n", n, "-t", "StT", "-k", "dk", "--output", "json"))
    assert len(by_key) == 2 and {m["uniqKey"] for m in by_key} == {sent["msgId"]}
    assert mqadmin_ok("queryMsgById", "-n", n, "-t", "StT", "-i", sent["offsetMsgId"], "-s", "false") == ""
    missing = mqadmin("queryMsgById", "-n", n, "-t", "StT", "-i", "0" * 32, "-s", "true")
    assert missing.returncode == 3 and missing.stdout == f"no message. msgId={'0' * 32}"


def test_client_commands_on_a_store_directory(cli) -> None:
    r = cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1")
    assert r.exit_code == 0
    assert cli("consumerStatus", "-g", "G").exit_code == 3
    assert cli("getConsumerStatus", "-g", "G", "-t", "T").exit_code == 3
    sent = cli.json("sendMessage", "-t", "T", "-p", "body-1", "-k", "k1")
    assert cli("queryMsgById", "-t", "T", "-i", sent["offsetMsgId"], "-g", "G", "-d", "c@1").exit_code == 3
    r = cli("queryMsgById", "-t", "T", "-i", sent["offsetMsgId"], "-s", "true")
    assert r.exit_code == 0 and "SendResult [sendStatus=SEND_OK" in r.stdout
    again = cli.json("queryMsgByKey", "-t", "T", "-k", "k1")
    assert [m["body"] for m in again] == ["body-1", "body-1"] and len({m["uniqKey"] for m in again}) == 1


# ------------------------------------------------------------------------------ store maintenance
_SMALL = {"mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "320", "maxHashSlotNum": "64",
          "maxIndexNum": "64", "deleteWhen": "99", "diskMaxUsedSpaceRatio": "95", "flushDiskType": "ASYNC_FLUSH"}


def _small_store(tmp_path: Path) -> tuple[Path, Path]:
    """A store with 4 KiB commitlog files: topic Old fills the first ones, then New follows; every
    file but the last is made 100 hours old (fileReservedTime is 72)."""
    import os

    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig

    store, conf = tmp_path / "store", tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in _SMALL.items()))
    broker = Broker(store, BrokerConfig.load(conf, store), audit_log_path=None)
    try:
        for topic in ("Old", "New"):
            broker.create_or_update_topic(topic, 1, 1)
        for i in range(30):
            broker.send_message("Old", b"o" * 300, {"KEYS": f"old{i}"})
        for i in range(14):
            broker.send_message("New", b"n" * 300, {"KEYS": f"new{i}"})
        broker.store.wait_for_dispatch()
    finally:
        broker.shutdown()
    old = time.time() - 100 * 3600
    files = sorted((store / "commitlog").iterdir())
    for f in files[:-1]:
        os.utime(f, (old, old))
    return store, conf


def _cli_on(cli, store: Path, conf: Path):  # noqa: ANN001, ANN202
    from tests.cli.conftest import Cli

    return Cli(store, conf)


def test_delete_expired_commit_log_then_clean_expired_cq_on_a_store(cli, tmp_path: Path) -> None:
    store, conf = _small_store(tmp_path)
    c = _cli_on(cli, store, conf)
    before = sorted(p.name for p in (store / "commitlog").iterdir())
    assert len(before) >= 4
    r = c("deleteExpiredCommitLog")
    assert r.exit_code == 0 and r.stdout == "success", r.stderr
    after = sorted(p.name for p in (store / "commitlog").iterdir())
    assert after == before[-1:] or (len(after) < len(before) and after[-1] == before[-1])
    assert c("queryMsgByKey", "-t", "Old", "-k", "old0").exit_code == 3  # its file is gone
    assert (store / "consumequeue" / "Old" / "0").is_dir()
    done = c.json("cleanExpiredCQ")
    assert done == [{"brokerName": "broker-a", "brokerAddr": done[0]["brokerAddr"],
                     "result": "removed 1 expired consume queue(s): Old-0"}]
    assert not (store / "consumequeue" / "Old").exists() and (store / "consumequeue" / "New" / "0").is_dir()
    again = c.json("deleteExpiredCommitLog")
    assert again[0]["result"].startswith("no expired commitlog file (commitlog starts at ")
    new = c.json("queryMsgByKey", "-t", "New", "-k", "new13")
    assert [m["body"] for m in new] == ["n" * 300]
    assert c("cleanExpiredCQ", "-c", "NoSuchCluster").exit_code == 3


def test_clean_unused_topic_keeps_configured_topics(cli, tmp_path: Path) -> None:
    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig

    store, conf = _small_store(tmp_path)
    c = _cli_on(cli, store, conf)
    assert c.json("cleanUnusedTopic")[0]["result"] == "no unused topic"
    assert (store / "consumequeue" / "Old" / "0").is_dir()
    # a topic whose config is gone (while its queues stay) is what the command removes
    broker = Broker(store, BrokerConfig.load(conf, store), audit_log_path=None)
    try:
        broker.topic_manager.table.topics.pop("Old")
        assert broker.clean_unused_topics() == ["Old"]
        assert not (store / "consumequeue" / "Old").exists() and (store / "consumequeue" / "New").is_dir()
        assert broker.store.get_max_offset_in_queue("New", 0) == 14
    finally:
        broker.shutdown()


def test_maintenance_over_n(tmp_path: Path) -> None:
    with running_broker(tmp_path, conf=_SMALL, extra_args=("--registerNameServerPeriod", "500")) as b:
        from broker_core.client.instance import MQClientInstance
        from broker_core.client.message import Message
        from broker_core.client.producer import Producer
        from broker_core.client.sync_bridge import LoopThread

        n = b.namesrv_addr
        for topic in ("Old", "New"):
            mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")
        loop = LoopThread("test-maintenance")
        inst = MQClientInstance(n)
        producer = Producer("MaintPG", inst)

        async def send() -> None:
            await producer.start()
            for i in range(30):
                await producer.send(Message("Old", b"o" * 300, keys=f"old{i}"))
            for i in range(14):
                await producer.send(Message("New", b"n" * 300, keys=f"new{i}"))
            await producer.shutdown()
            await inst.shutdown()

        try:
            loop.run(send(), timeout=60)
        finally:
            loop.close()
        # the files are aged and deleted below: reput must have put every send in its queue and the index
        wait_remote_dispatched(n, b.broker_addr)
        import os

        old = time.time() - 100 * 3600
        for f in sorted((b.store / "commitlog").iterdir())[:-1]:
            os.utime(f, (old, old))
        assert mqadmin_ok("deleteExpiredCommitLog", "-n", n, "-b", b.broker_addr) == "success"
        doc = json.loads(mqadmin_ok("cleanExpiredCQ", "-n", n, "-c", "DefaultCluster", "--output", "json"))
        assert doc == [{"brokerName": "broker-a", "brokerAddr": b.broker_addr,
                        "result": "removed 1 expired consume queue(s): Old-0"}]
        assert mqadmin_ok("cleanUnusedTopic", "-n", n) == "success"
        assert json.loads(mqadmin_ok("queryMsgByKey", "-n", n, "-t", "New", "-k", "new13", "--output", "json"))
        assert mqadmin("queryMsgByKey", "-n", n, "-t", "Old", "-k", "old0").returncode == 3


# ------------------------------------------------------------------------------ setConsumeMode
def _request_modes(store: Path) -> dict:
    return json.loads((store / "config" / "messageRequestMode.json").read_text())["messageRequestModeMap"]


def test_set_consume_mode_on_a_store(cli) -> None:
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1").exit_code == 0
    r = cli("setConsumeMode", "-c", "DefaultCluster", "-t", "T", "-g", "G", "-m", "POP", "-q", "2")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.endswith("success.\ntopic[T] group[G] consume mode[POP] popShareQueueNum[2]")
    assert _request_modes(cli.store) == {"T": {"G": {"consumerGroup": "G", "mode": "POP", "popShareQueueNum": 2,
                                                     "topic": "T"}}}
    assert cli("setConsumeMode", "-c", "DefaultCluster", "-t", "T", "-g", "G", "-m", "PUSH").exit_code == 2
    assert cli("setConsumeMode", "-t", "T", "-g", "G", "-m", "POP").exit_code == 2
    retry = cli("setConsumeMode", "-c", "DefaultCluster", "-t", "%RETRY%G", "-g", "G", "-m", "POP")
    assert retry.exit_code == 1 and "retry topic is not allowed to set mode" in retry.stderr
    assert cli("setConsumeMode", "-c", "DefaultCluster", "-t", "T", "-g", "G", "-m", "PULL").exit_code == 0
    assert _request_modes(cli.store)["T"]["G"]["mode"] == "PULL"


def test_set_consume_mode_refuses_a_topic_or_group_the_broker_has_not(cli) -> None:
    """As Apache's QueryAssignmentProcessor: a topic the broker lacks is TOPIC_NOT_EXIST, and the group is
    findSubscriptionGroupConfig's (made when autoCreateSubscriptionGroup is on and the name is valid,
    else SUBSCRIPTION_GROUP_NOT_EXIST). They were saved to messageRequestMode.json as given."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1").exit_code == 0
    nope = cli("setConsumeMode", "-c", "DefaultCluster", "-t", "NOPE", "-g", "G", "-m", "PULL")
    assert nope.exit_code == 3 and "topic[NOPE] not exist" in nope.stderr, nope.stdout + nope.stderr
    bad = cli("setConsumeMode", "-c", "DefaultCluster", "-t", "T", "-g", "bad group!", "-m", "POP")
    assert bad.exit_code == 3 and "subscription group [bad group!] does not exist" in bad.stderr, bad.stdout + bad.stderr
    assert not (cli.store / "config" / "messageRequestMode.json").exists() or _request_modes(cli.store) == {}
    # autoCreateSubscriptionGroup on (the default): the group is made, as a consumer's first pull makes it
    assert cli("setConsumeMode", "-c", "DefaultCluster", "-t", "T", "-g", "NewG", "-m", "POP").exit_code == 0
    groups = json.loads((cli.store / "config" / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert "NewG" in groups
    off_cli = Cli(cli.store, write_conf(cli.store.parent / "broker.conf", {"autoCreateSubscriptionGroup": "false"}))
    off = off_cli("setConsumeMode", "-c", "DefaultCluster", "-t", "T", "-g", "NoGroup", "-m", "POP")
    assert off.exit_code == 3 and "subscription group [NoGroup] does not exist" in off.stderr, off.stdout + off.stderr
    assert set(_request_modes(cli.store)["T"]) == {"NewG"}


def test_set_consume_mode_over_n_survives_a_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path) as b:
        n = b.namesrv_addr
        nope = mqadmin("setConsumeMode", "-n", n, "-b", b.broker_addr, "-t", "MT", "-g", "MG", "-m", "POP")
        assert nope.returncode == 3 and "topic[MT] not exist" in nope.stderr, nope.stdout + nope.stderr
        mqadmin_ok("updateTopic", "-n", n, "-b", b.broker_addr, "-t", "MT")
        bad = mqadmin("setConsumeMode", "-n", n, "-b", b.broker_addr, "-t", "MT", "-g", "bad group!", "-m", "POP")
        assert bad.returncode == 3 and "subscription group [bad group!] does not exist" in bad.stderr, bad.stderr
        out = mqadmin_ok("setConsumeMode", "-n", n, "-b", b.broker_addr, "-t", "MT", "-g", "MG", "-m", "POP")
        assert out == f"set consume mode to {b.broker_addr} success.\ntopic[MT] group[MG] consume mode[POP] " \
                      "popShareQueueNum[0]"
        mqadmin_ok("updateBrokerConfig", "-n", n, "-b", b.broker_addr, "-k", "autoCreateSubscriptionGroup", "-v", "false")
        off = mqadmin("setConsumeMode", "-n", n, "-b", b.broker_addr, "-t", "MT", "-g", "NoGroup", "-m", "PULL")
        assert off.returncode == 3 and "subscription group [NoGroup] does not exist" in off.stderr, off.stderr
    assert _request_modes(tmp_path / "store") == {"MT": {"MG": {"consumerGroup": "MG", "mode": "POP",
                                                                "popShareQueueNum": 0, "topic": "MT"}}}
    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig

    broker = Broker(tmp_path / "store", BrokerConfig(), read_only=True, audit_log_path=None)
    try:
        assert broker.message_request_mode("MT", "MG").mode == "POP"
    finally:
        broker.shutdown()


# ------------------------------------------------------------------------------ statsAll
_STATS_HEADER = (f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
                 f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}")


def test_stats_all_over_n_counts_live_traffic(broker: BrokerProcess, live: LiveConsumer) -> None:
    n = broker.namesrv_addr
    seen = len(live.got)
    mqadmin_ok("sendMessage", "-n", n, "-t", "StT", "-p", "stats")  # traffic within the TPS minute
    deadline = time.monotonic() + 20
    while len(live.got) <= seen:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    lines = mqadmin_ok("statsAll", "-n", n, "-t", "StT").splitlines()
    assert lines[0] == _STATS_HEADER
    row = lines[1]
    assert row[:64].rstrip() == "StT" and row[66:130].rstrip() == "StG"
    accumulation, in_tps, out_tps, in_day, out_day = row[130:].split()
    assert 0 <= int(accumulation) <= 4 and int(in_day) >= 4 and int(out_day) >= 4  # offsets commit every 5 s
    assert float(in_tps) > 0 and float(out_tps) > 0  # within the minute of the fixture's traffic
    mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "QuietT", "-r", "1", "-w", "1")
    quiet = mqadmin_ok("statsAll", "-n", n, "-t", "QuietT").splitlines()
    assert quiet[1] == f"{'QuietT':<64}  {'':<64} {0:>12} {'0.00':>11} {'':>11} {0:>14} {'NO_CONSUMER':>14}"
    active = mqadmin_ok("statsAll", "-n", n, "-a").splitlines()
    assert any(line.startswith("StT ") for line in active) and not any(line.startswith("QuietT") for line in active)
    doc = json.loads(mqadmin_ok("statsAll", "-n", n, "-t", "StT", "--output", "json"))
    assert doc[0]["consumerGroup"] == "StG" and doc[0]["outMsg24Hour"] >= 4


def test_stats_all_on_a_store_refuses_and_consumer_progress_shows_the_lag(cli) -> None:
    """A store directory holds no traffic counters: statsAll says so (it used to print zeros for a
    store that had just taken messages); the lag it would show is consumerProgress's on a store."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1").exit_code == 0
    assert cli("updateSubGroup", "-c", "DefaultCluster", "-g", "G").exit_code == 0
    for i in range(3):
        assert cli("sendMessage", "-t", "T", "-p", f"m{i}").exit_code == 0
    assert cli("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "0").exit_code == 0  # G committed at 0: lag 3
    r = cli("statsAll", "-t", "T")
    assert r.exit_code == 1 and r.stdout == "" and "use -n <namesrv>" in r.stderr
    assert sum(row["diff"] for row in cli.json("consumerProgress", "-g", "G", "-t", "T")) == 3


# ------------------------------------------------------------------------------ queryMsgTraceById
def test_query_msg_trace_by_id_on_real_trace_data(tmp_path: Path) -> None:
    """Our producer and push consumer with message trace on write RMQ_SYS_TRACE_TOPIC; the command
    reads it over -n and, after the broker stops, on its store directory."""
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.message import Message
    from broker_core.client.producer import Producer
    from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
    from broker_core.client.rebalance import ConsumeFromWhere
    from broker_core.client.sync_bridge import LoopThread
    from tests.cli.conftest import Cli

    with running_broker(tmp_path, conf={"traceTopicEnable": "true"}) as b:
        n = b.namesrv_addr
        mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "TrT", "-r", "1", "-w", "1")
        loop = LoopThread("test-trace")
        inst = MQClientInstance(n)
        producer = Producer("TracePG", inst, enable_msg_trace=True)
        consumer = PushConsumer("TraceCG", inst, enable_msg_trace=True,
                                consume_from=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("TrT", "*")
        got: list[str] = []
        consumer.register_concurrently(lambda msgs: (got.extend(m.body.decode() for m in msgs),
                                                     ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1])

        async def start() -> str:
            await producer.start()
            await consumer.start()
            r = await producer.send(Message("TrT", b"traced", tags="TagT", keys="tk1"))
            return r.msg_id

        async def stop() -> None:
            await consumer.shutdown()
            await producer.shutdown()
            await inst.shutdown()

        try:
            msg_id = loop.run(start(), timeout=30)
            deadline = time.monotonic() + 30
            while True:
                r = mqadmin("queryMsgTraceById", "-n", n, "-i", msg_id)
                if r.returncode == 0 and "Sub " in r.stdout or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        finally:
            try:
                loop.run(stop(), timeout=30)
            finally:
                loop.close()
        assert got == ["traced"]
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        fmt = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"
        assert lines[0] == fmt.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
        assert lines[1].startswith(fmt.format("Pub", "TracePG", "127.0.0.1", "", "", "")[:52])
        assert lines[1].split()[-1] == "success" and lines[2] == ""
        assert lines[3] == fmt.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes",
                                      "#Status")
        assert lines[4].split()[:3] == ["Sub", "TraceCG", "127.0.0.1"] and lines[4].split()[-1] == "success"
        doc = json.loads(mqadmin_ok("queryMsgTraceById", "-n", n, "-i", msg_id, "--output", "json"))
        pub = next(d for d in doc if d["msgType"] == "Pub")
        assert (pub["topic"], pub["tags"], pub["keys"], pub["storeHost"]) == ("TrT", "TagT", "tk1", b.broker_addr)
        assert {d["msgType"] for d in doc} == {"Pub", "SubBefore", "SubAfter"}
        missing = mqadmin("queryMsgTraceById", "-n", n, "-i", "0" * 32)
        assert missing.returncode == 3
    local = Cli(tmp_path / "store", tmp_path / "broker.conf")("queryMsgTraceById", "-i", msg_id)
    assert local.exit_code == 0 and local.stdout == r.stdout


def test_send_message_with_trace_then_query_it(cli, tmp_path: Path) -> None:
    """sendMessage -m true writes the Pub trace (on a store through its Broker; over -n by a traced
    producer) and queryMsgTraceById reads it back."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1").exit_code == 0
    sent = cli.json("sendMessage", "-t", "T", "-p", "x", "-k", "k1", "-c", "TagA", "-m", "true")
    views = cli.json("queryMsgTraceById", "-i", sent["msgId"])
    assert [(v["msgType"], v["groupName"], v["topic"], v["tags"], v["keys"], v["offsetMsgId"], v["status"])
            for v in views] == [("Pub", "mqadmin_send_group", "T", "TagA", "k1", sent["offsetMsgId"], "success")]
    plain = cli.json("sendMessage", "-t", "T", "-p", "y")
    assert cli("queryMsgTraceById", "-i", plain["msgId"]).exit_code == 3  # no -m, no trace
    with running_broker(tmp_path / "remote", conf={"traceTopicEnable": "true"}) as b:
        n = b.namesrv_addr
        mqadmin_ok("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "T", "-r", "1", "-w", "1")
        remote = json.loads(mqadmin_ok("sendMessage", "-n", n, "-t", "T", "-p", "z", "-m", "true", "--output", "json"))
        out = mqadmin_ok("queryMsgTraceById", "-n", n, "-i", remote["msgId"]).splitlines()
        assert out[1].split()[:3] == ["Pub", "mqadmin_send_group", "127.0.0.1"] and out[1].split()[-1] == "success"


def test_consumer_progress_s_names_the_client_ip_holding_each_queue(broker: BrokerProcess, live: LiveConsumer) -> None:
    # -s printed N/A on every row: the queue owners were never asked (Apache reads each online client's
    # running info, its mqTable, and prints the IP of its client id).
    ip = live.client_id.split("@", 1)[0]
    deadline = time.monotonic() + 20
    while True:
        r = mqadmin("consumerProgress", "-n", broker.namesrv_addr, "-g", "StG", "-t", "StT", "-s", "true")
        rows = [line.split() for line in r.stdout.splitlines() if line.startswith("StT ")]
        if r.returncode == 0 and len(rows) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0, r.stderr
    assert "#Client IP" in r.stdout.splitlines()[0]
    assert [row[5] for row in rows] == [ip, ip], r.stdout


def test_consumer_progress_summary_names_the_client_version(broker: BrokerProcess, live: LiveConsumer) -> None:
    # the summary printed the version number ("479"); Apache prints its name, as consumerConnection does
    rows = json.loads(mqadmin_ok("consumerProgress", "-n", broker.namesrv_addr, "--output", "json"))
    row = next(r for r in rows if r["group"] == "StG")
    assert row["count"] == 1 and row["version"] == "V5_3_3"


def test_consume_tps_is_the_broker_s_figure(broker: BrokerProcess, live: LiveConsumer) -> None:
    # "Consume TPS: 0.00" was printed whatever the group consumed, and the summary's tps was a literal 0
    n = broker.namesrv_addr
    before = len(live.got)
    live.send("StT", [f"tps{i}" for i in range(6)])
    deadline = time.monotonic() + 30
    while len(live.got) < before + 6:
        assert time.monotonic() < deadline, "the live consumer did not consume"
        time.sleep(0.2)
    out = mqadmin_ok("consumerProgress", "-n", n, "-g", "StG", "-t", "StT")
    tps = float(next(line for line in out.splitlines() if line.startswith("Consume TPS: ")).split(": ")[1])
    assert tps > 0, out
    row = next(r for r in json.loads(mqadmin_ok("consumerProgress", "-n", n, "--output", "json")) if r["group"] == "StG")
    assert row["tps"] > 0, row
