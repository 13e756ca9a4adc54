"""``mqadmin wipeWritePerm -b`` (drain a broker for maintenance) lasts while topics are created on that
broker, as on Apache RocketMQ, over real mqbroker processes: two name servers and one broker registered
with both.

A topic change re-registered the broker's whole topic table with a new DataVersion, and a name server
rewrites every topic of a registration with a new DataVersion: creating any topic (updateTopic, a send
that auto-creates one, the %RETRY% topic of a consumer starting) gave write permission back to every
topic of the broker on every name server, and producers wrote to the broker being drained. Apache's
broker registers only the changed topic (registerIncrementBrokerData), which takes its own perm.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from net_util import Mqbroker, RawClient, run_mqadmin

from broker_core.client.instance import MQClientInstance
from broker_core.net.broker_server import register_broker_request
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import ClusterInfo, ConsumerData, HeartbeatData, SubscriptionData
from broker_core.store.codec.properties import encode_properties
from tests.waiting import wait_for

PERIOD_MS = 300  # the broker's registerNameServerPeriod: a periodic registration every 0.3 s
CLUSTER = "DefaultCluster"
READ_ONLY, READ_WRITE = 4, 6


@dataclass
class Drained:
    ns: list[str]
    broker: Mqbroker

    @property
    def n(self) -> str:
        return ";".join(self.ns)

    def ok(self, *args: str) -> str:
        r = run_mqadmin(args[0], "-n", self.n, *args[1:])
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r.stdout

    def perms(self, topic: str) -> list[int | None]:
        """broker-a's perm of ``topic`` at each name server (None: no route there), as ``mqadmin
        topicRoute`` shows it (GET_ROUTEINFO_BY_TOPIC; asked directly, a child process each is slow)."""
        out: list[int | None] = []
        for ns in self.ns:
            c = RawClient(ns)
            try:
                r = c.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            finally:
                c.close()
            if r.code != ResponseCode.SUCCESS:
                out.append(None)
                continue
            qds = [q for q in json.loads(r.body)["queueDatas"] if q["brokerName"] == "broker-a"]
            out.append(qds[0]["perm"] if qds else None)
        return out

    def send(self, topic: str) -> int:
        return run_mqadmin("sendMessage", "-n", self.n, "-t", topic, "-p", "x").returncode


@pytest.fixture
def drained(tmp_path, procs) -> Iterator[Drained]:
    """DrainMe and Other on broker-a, then ``wipeWritePerm -b broker-a`` on both name servers."""
    ns = []
    for i in (1, 2):
        p = Mqbroker(tmp_path / f"ns{i}", "--namesrv-only", expect_broker=False)
        procs.append(p)
        ns.append(p.namesrv_addr or "")
    broker = Mqbroker(tmp_path / "b", "--broker-only", "-n", ";".join(ns),
                      "--registerNameServerPeriod", str(PERIOD_MS), expect_namesrv=False)
    procs.append(broker)
    env = Drained(ns, broker)
    wait_for(lambda: all(registered(a) for a in ns), "broker-a registered with both name servers", 30)
    for topic in ("DrainMe", "Other"):
        env.ok("updateTopic", "-c", CLUSTER, "-t", topic)
    wait_for(lambda: env.perms("DrainMe") == [READ_WRITE] * 2 and env.perms("Other") == [READ_WRITE] * 2,
             "DrainMe and Other routed by both name servers", 30)
    out = env.ok("wipeWritePerm", "-b", "broker-a")
    assert out.count("wipe write perm of broker[broker-a]") == 2, out
    assert env.perms("DrainMe") == [READ_ONLY] * 2
    assert json.loads(env.ok("topicRoute", "-t", "DrainMe"))["queueDatas"][0]["perm"] == READ_ONLY
    yield env


def registered(ns: str) -> bool:
    c = RawClient(ns)
    try:
        r = c.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    finally:
        c.close()
    return r.code == ResponseCode.SUCCESS and "broker-a" in ClusterInfo.from_json(r.body).broker_addr_table


def past_periodic_registrations() -> None:
    time.sleep(5 * PERIOD_MS / 1000)


def assert_still_drained(env: Drained) -> None:
    for topic in ("DrainMe", "Other"):
        assert env.perms(topic) == [READ_ONLY] * 2, f"{topic} is writable again: {env.perms(topic)}"
    assert env.send("DrainMe") != 0, "a producer could write to the drained broker"


def test_topics_created_on_a_drained_broker_leave_the_others_read_only(drained: Drained) -> None:
    env = drained
    past_periodic_registrations()
    assert_still_drained(env)

    # updateTopic of a new topic: routed at once, with its own perm (Apache's registerIncrementBrokerData)
    env.ok("updateTopic", "-c", CLUSTER, "-t", "Unrelated")
    assert env.perms("Unrelated") == [READ_WRITE] * 2
    assert env.send("Unrelated") == 0
    # a send that auto-creates its topic (a producer with a route cached before the wipe)
    bc = RawClient(env.broker.broker_addr or "")
    try:
        r = bc.call(RequestCode.SEND_MESSAGE, {
            "producerGroup": "PG", "topic": "AutoMade", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "properties": encode_properties({})}, b"auto")
        assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        bc.close()
    wait_for(lambda: env.perms("AutoMade") == [READ_WRITE] * 2, "AutoMade routed", 10)
    # a consumer starting: its first heartbeat creates %RETRY%<group>
    retry_routed(env, "DrainGroup")
    # deleting a topic of the broker: its route goes (DELETE_TOPIC_IN_NAMESRV), the wipe stays
    env.ok("deleteTopic", "-c", CLUSTER, "-t", "Unrelated")
    assert env.perms("Unrelated") == [None, None]

    past_periodic_registrations()
    assert_still_drained(env)

    # addWritePerm gives the broker its writes back, and the periodic registrations keep them
    out = env.ok("addWritePerm", "-b", "broker-a")
    assert out.count("add write perm of broker[broker-a]") == 2, out
    past_periodic_registrations()
    assert env.perms("DrainMe") == [READ_WRITE] * 2
    assert env.send("DrainMe") == 0


def test_update_of_an_existing_topic_on_a_drained_broker_makes_only_that_one_writable(drained: Drained) -> None:
    env = drained
    env.ok("updateTopic", "-c", CLUSTER, "-t", "Other", "-w", "4", "-r", "4")
    assert env.perms("Other") == [READ_WRITE] * 2  # as Apache: the updated topic takes its own perm
    past_periodic_registrations()
    assert env.perms("DrainMe") == [READ_ONLY] * 2
    assert env.send("DrainMe") != 0


def retry_routed(env: Drained, group: str) -> None:
    async def go() -> None:
        inst = MQClientInstance(env.n)
        try:
            hb = HeartbeatData(client_id=f"{group}@1", consumer_data_set=[ConsumerData(
                group_name=group, subscription_data_set=[SubscriptionData(topic="DrainMe", sub_string="*")])])
            inst.check(await inst.invoke(env.broker.broker_addr or "", RequestCode.HEART_BEAT, body=hb.to_json()))
        finally:
            await inst.shutdown()

    asyncio.run(asyncio.wait_for(go(), 60))
    wait_for(lambda: all(p is not None for p in env.perms(f"%RETRY%{group}")), f"%RETRY%{group} routed", 10)


# -- in process: what the registrations carry -------------------------------------------------------

def test_registration_carries_the_topic_tables_data_version_as_it_is(servers) -> None:
    """Apache's name server compares the whole DataVersion (counter, stateVersion, timestamp): a
    registration stamped with the time it was sent was a changed topic table at every period, and
    there every topic was rewritten, a wipeWritePerm undone within one period."""
    broker, _server, _addr = servers.add_broker()
    first = json.loads(register_broker_request(broker, None).body or b"")
    time.sleep(0.02)
    again = json.loads(register_broker_request(broker, None).body or b"")
    version = broker.topic_config_data_version()
    sent = first["topicConfigSerializeWrapper"]["dataVersion"]
    assert sent == again["topicConfigSerializeWrapper"]["dataVersion"]
    assert sent == {"counter": version.counter, "stateVersion": version.state_version,
                    "timestamp": version.timestamp}


def test_periodic_registration_during_a_topic_change_keeps_the_wipe(servers) -> None:
    """A change bumps the DataVersion before its listener notes the topic (a deletion removes its queue
    files in between): a periodic registration then carries the version the name servers have, and
    the change's own registration the new one. A version no change announces goes at the next round."""
    broker, server, _addr = servers.add_broker()
    broker.create_or_update_topic("DrainMe")
    servers.loop.run(server.register_all())
    routes = servers.namesrv.routes

    def perm() -> int:
        route = routes.pick_topic_route("DrainMe")
        assert route is not None
        return route.queue_datas[0].perm

    assert perm() == READ_WRITE
    routes.operate_write_perm_of_broker("broker-a", wipe=True)
    broker.topic_manager.table.data_version.next_version(broker.clock())  # a change whose listener has not run
    servers.loop.run(server.register_all())
    assert perm() == READ_ONLY
    servers.loop.run(server.register_all())  # still unannounced: the table's version is sent, as Apache's
    assert perm() == READ_WRITE
