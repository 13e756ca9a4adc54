"""The client registry (HEART_BEAT tables) and the name server's route tables, without sockets."""

from __future__ import annotations

from broker_core.broker.client_registry import ClientRegistry, ConsumerData, SubscriptionData
from broker_core.broker.route_info import (
    BROKER_CHANNEL_EXPIRED_TIME_MS,
    BrokerRegistration,
    RouteInfoManager,
    TopicQueueConfig,
)

from .conftest import FakeClock


def test_heartbeats_fill_groups_and_notify_when_consumer_ids_change() -> None:
    clock = FakeClock()
    reg = ClientRegistry(clock)
    changes: list[tuple[str, list[str]]] = []
    reg.consumer_ids_changed_listeners.append(lambda g, clients: changes.append((g, [c.client_id for c in clients])))
    sub = ConsumerData("G", subscriptions=(SubscriptionData("T", "TagA"),))
    first = reg.heartbeat("conn-1", "10.0.0.1@1", language="JAVA", version=479, producer_groups=["PG"],
                          consumers=[sub])
    assert first.consumer_ids_changed == ("G",) and first.new_channel
    again = reg.heartbeat("conn-1", "10.0.0.1@1", consumers=[sub])
    assert again.consumer_ids_changed == () and not again.new_channel  # a refresh is not a change
    reg.heartbeat("conn-2", "10.0.0.2@7", consumers=[sub])
    assert reg.consumer_ids("G") == ["10.0.0.1@1", "10.0.0.2@7"]
    assert changes == [("G", ["10.0.0.1@1"]), ("G", ["10.0.0.1@1", "10.0.0.2@7"])]
    info = reg.consumer_group("G")
    assert info is not None and info.subscriptions["T"].sub_string == "TagA"
    assert reg.find_producer_channel("PG") == "conn-1"  # where CHECK_TRANSACTION_STATE goes
    assert reg.find_channel("10.0.0.2@7") == "conn-2"

    reg.unregister("conn-2", consumer_group="G")
    assert reg.consumer_ids("G") == ["10.0.0.1@1"] and changes[-1] == ("G", ["10.0.0.1@1"])
    reg.channel_closed("conn-1")
    assert reg.consumer_group("G") is None and reg.find_producer_channel("PG") is None


def test_silent_clients_expire_after_two_minutes() -> None:
    clock = FakeClock()
    reg = ClientRegistry(clock)
    reg.heartbeat("old", "c-old", producer_groups=["PG"], consumers=[ConsumerData("G")])
    clock.advance(60_000)
    reg.heartbeat("new", "c-new", consumers=[ConsumerData("G")])
    clock.advance(60_001)
    expired = reg.scan_expired()
    assert [c.channel for c in expired] == ["old"]
    assert reg.consumer_ids("G") == ["c-new"] and reg.producer_clients("PG") == []


def _reg(name: str, addr: str, topics: list[TopicQueueConfig], cluster: str = "C1") -> BrokerRegistration:
    return BrokerRegistration(cluster, name, addr, topics=topics)


def test_routes_of_a_two_broker_cluster_and_expiry() -> None:
    clock = FakeClock()
    routes = RouteInfoManager(clock)
    t_a = TopicQueueConfig("T", 4, 4, 6)
    routes.register_broker(_reg("broker-a", "127.0.0.1:10911", [t_a]), channel="ch-a")
    clock.advance(90_000)
    routes.register_broker(_reg("broker-b", "127.0.0.1:10921", [TopicQueueConfig("T", 2, 2, 6),
                                                                TopicQueueConfig("OnlyB", 1, 1, 6)]))
    route = routes.pick_topic_route("T")
    assert route is not None
    assert [(q.broker_name, q.read_queue_nums) for q in route.queue_datas] == [("broker-a", 4), ("broker-b", 2)]
    assert route.to_dict()["brokerDatas"][0] == {"brokerAddrs": {0: "127.0.0.1:10911"}, "brokerName": "broker-a",
                                                 "cluster": "C1", "enableActingMaster": False}
    assert routes.cluster_info().cluster_addr_table == {"C1": ["broker-a", "broker-b"]}
    assert routes.broker_addrs_of_cluster("C1") == ["127.0.0.1:10911", "127.0.0.1:10921"]
    assert routes.topics_of_cluster("C1") == ["OnlyB", "T"]

    # A re-registration without a topic keeps that broker's queues of it (deleteTopicWithBrokerRegistration
    # is false, as in RocketMQ): topics leave the route by deleteTopic or with their broker.
    routes.register_broker(_reg("broker-b", "127.0.0.1:10921", [TopicQueueConfig("T", 2, 2, 6)]))
    assert routes.pick_topic_route("OnlyB") is not None
    pruning = RouteInfoManager(clock, delete_topic_with_broker_registration=True)
    pruning.register_broker(_reg("broker-b", "127.0.0.1:10921", [TopicQueueConfig("OnlyB", 1, 1, 6)]))
    pruning.register_broker(_reg("broker-b", "127.0.0.1:10921", [TopicQueueConfig("T", 2, 2, 6)]))
    assert pruning.pick_topic_route("OnlyB") is None

    clock.advance(40_000)  # broker-a silent for 130 s, broker-b for 40 s
    assert routes.scan_not_active_brokers() == ["127.0.0.1:10911"]
    route = routes.pick_topic_route("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert routes.cluster_info().cluster_addr_table == {"C1": ["broker-b"]}

    routes.delete_topic("T", "C1")
    assert routes.pick_topic_route("T") is None and routes.topic_list() == ["OnlyB"]


def test_two_live_brokers_under_one_name_and_id_are_reported_once_a_minute(caplog) -> None:
    """A copied broker.conf: two running brokers register as broker-a id 0 and take the route in turns
    (the newest registration wins, as RocketMQ). The name server says so, once a minute while both
    keep registering; a broker that moved (its old address expired) is not a conflict."""
    clock = FakeClock()
    routes = RouteInfoManager(clock)
    topics = [TopicQueueConfig("T", 4, 4, 6)]
    routes.register_broker(_reg("broker-a", "127.0.0.1:10911", topics))
    for turn in range(1, 150):  # each registers every second, half a second apart: 75 s
        clock.advance(500)
        routes.register_broker(_reg("broker-a", "127.0.0.1:20911" if turn % 2 else "127.0.0.1:10911", topics))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2  # at 0.5 s and after a minute, not at each of the 149 turns
    assert warnings[0] == ("broker broker-a (cluster C1, brokerId 0) registered from 127.0.0.1:20911 while "
                           "127.0.0.1:10911, registered under the same name and id 0.5 s ago, has not expired: if "
                           "both are running, clients are sent to either in turn and their messages split between "
                           "two stores; give each broker its own brokerName")
    caplog.clear()
    clock.advance(BROKER_CHANNEL_EXPIRED_TIME_MS)  # 10911 went away; broker-a comes back from a new address
    routes.register_broker(_reg("broker-a", "127.0.0.1:30911", topics))
    assert [r for r in caplog.records if r.levelname == "WARNING"] == []
    assert routes.cluster_info().broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:30911"}


def test_a_broker_name_taken_for_a_while_by_another_broker_gets_its_topics_back() -> None:
    """A copied broker.conf started by mistake and stopped again: its registration must not cut the real
    broker's topics out of the route, and its unregistering (which takes the name's queues) is followed
    by the real broker's next periodic registration putting every topic back, as RocketMQ's
    registerFirst does, although its DataVersion did not change."""
    clock = FakeClock()
    routes = RouteInfoManager(clock)
    real = BrokerRegistration("C1", "broker-x", "127.0.0.1:10911", topics=[TopicQueueConfig("RealTopic", 4, 4, 6)],
                              data_version=7)
    routes.register_broker(real)
    clock.advance(1_000)
    routes.register_broker(BrokerRegistration("C1", "broker-x", "127.0.0.1:20911",
                                              topics=[TopicQueueConfig("TBW102", 8, 8, 7)], data_version=3))
    route = routes.pick_topic_route("RealTopic")
    assert route is not None and [q.read_queue_nums for q in route.queue_datas] == [4]
    routes.unregister_broker("C1", "127.0.0.1:20911", "broker-x", 0)  # the copy is stopped cleanly
    assert routes.pick_topic_route("RealTopic") is None  # its name's last address went: so did its queues
    clock.advance(30_000)
    routes.register_broker(real)  # the real broker's periodic registration, same DataVersion
    route = routes.pick_topic_route("RealTopic")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}


def test_a_renamed_broker_leaves_no_entry_under_its_old_name() -> None:
    """updateBrokerConfig brokerName, then a restart on the same address: the old name kept the address
    and its topics' queues for good (clusterList listed it, routes sent clients to it), since liveness,
    expiry and unregistering are by address and went to the new name. One address is one broker."""
    clock = FakeClock()
    routes = RouteInfoManager(clock)
    routes.register_broker(_reg("old-name", "127.0.0.1:10911", [TopicQueueConfig("T", 8, 8, 6)], cluster="GC"),
                           channel="ch-1")
    routes.register_broker(_reg("new-name", "127.0.0.1:10911", [TopicQueueConfig("T", 8, 8, 6)], cluster="GC"),
                           channel="ch-2")
    route = routes.pick_topic_route("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["new-name"]
    assert routes.cluster_info().cluster_addr_table == {"GC": ["new-name"]}
    clock.advance(BROKER_CHANNEL_EXPIRED_TIME_MS + 1)
    assert routes.scan_not_active_brokers() == ["127.0.0.1:10911"]
    assert routes.cluster_info().broker_addr_table == {} and routes.pick_topic_route("T") is None


def test_a_closed_broker_connection_unregisters_it() -> None:
    routes = RouteInfoManager(FakeClock())
    routes.register_broker(_reg("broker-a", "127.0.0.1:10911", [TopicQueueConfig("T", 1, 1, 6)]), channel="ch")
    assert routes.channel_closed("ch") == ["127.0.0.1:10911"]
    assert routes.cluster_info().broker_addr_table == {} and routes.pick_topic_route("T") is None


def test_the_broker_registers_its_topics(make_broker) -> None:
    b = make_broker()
    b.create_or_update_topic("RegT", 3, 2, perm=6)
    reg = b.registration()
    assert (reg.cluster_name, reg.broker_name, reg.broker_addr) == (b.config.broker_cluster_name,
                                                                    b.config.broker_name, b.config.broker_addr)
    mine = {t.topic_name: t for t in reg.topics}
    assert (mine["RegT"].read_queue_nums, mine["RegT"].write_queue_nums) == (3, 2)
    routes = RouteInfoManager(FakeClock())
    routes.register_broker(reg)
    route = routes.pick_topic_route("RegT")
    assert route is not None and route.broker_datas[0].master_addr() == b.config.broker_addr


def test_heartbeat_registers_consumers_even_when_groups_are_not_auto_created(make_broker, tmp_path) -> None:
    b = make_broker(autoCreateSubscriptionGroup="false")
    res = b.heartbeat("conn", "c-1", consumers=[ConsumerData("NotCreated")])
    assert res.consumer_ids_changed == ("NotCreated",) and b.consumer_ids("NotCreated") == ["c-1"]
    assert b.get_subscription_group("NotCreated") is None
    b2 = make_broker(tmp_path / "store2", autoCreateSubscriptionGroup="true")
    b2.heartbeat("conn", "c-1", consumers=[ConsumerData("AutoMade")])
    assert b2.get_subscription_group("AutoMade") is not None


def test_an_old_subscription_never_replaces_a_newer_one_and_an_unsubscribe_is_dropped() -> None:
    """ConsumerGroupInfo#updateSubscription: during a redeploy the old consumers' heartbeats (an older
    subVersion) replaced the new expression, so the new consumers' pulls were refused
    SUBSCRIPTION_NOT_LATEST (25) until the last old one stopped; and a topic a consumer stopped
    subscribing stayed in the group's table for ever (its pulls still filtered, consumerProgress listed it)."""
    clock = FakeClock()
    reg = ClientRegistry(clock)
    changes: list[str] = []
    reg.consumer_ids_changed_listeners.append(lambda g, clients: changes.append(g))
    old = ConsumerData("G", subscriptions=(SubscriptionData("T", "TagA", sub_version=100),
                                           SubscriptionData("U", "*", sub_version=100)))
    new = ConsumerData("G", subscriptions=(SubscriptionData("T", "TagB", sub_version=200),
                                           SubscriptionData("U", "*", sub_version=200)))
    reg.heartbeat("conn-old", "old@1", consumers=[old])
    reg.heartbeat("conn-new", "new@1", consumers=[new])
    reg.heartbeat("conn-old", "old@1", consumers=[old])  # the old consumer's next heartbeat
    info = reg.consumer_group("G")
    assert info is not None and (info.subscriptions["T"].sub_string, info.subscriptions["T"].sub_version) == ("TagB", 200)

    changes.clear()
    only_t = ConsumerData("G", subscriptions=(SubscriptionData("T", "TagB", sub_version=300),))
    reg.heartbeat("conn-new", "new@1", consumers=[only_t])
    info = reg.consumer_group("G")
    assert info is not None and sorted(info.subscriptions) == ["T"] and changes == ["G"]
