"""The name server's route table refreshed by brokers' registrations as RocketMQ's is: a broker
expires by the heartbeatTimeoutMillis it registered with (its --brokerChannelExpiredTime), and a
periodic registration puts back a topic route the name server lost (isTopicConfigChanged)."""

from __future__ import annotations

import signal

import pytest
from harness import Servers
from net_util import Mqbroker, RawClient

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import ClusterInfo, TopicRouteData
from tests.waiting import wait_for

RC = RequestCode
OK = ResponseCode.SUCCESS



def registered_names(ns: RawClient) -> list[str]:
    return sorted(ClusterInfo.from_json(ns.call(RC.GET_BROKER_CLUSTER_INFO).body).broker_addr_table)


def test_silent_broker_expires_by_its_own_broker_channel_expired_time(tmp_path, procs):
    # the name server keeps its default (120 s for brokers that send no timeout); the broker asks for 1.5 s
    ns_proc = Mqbroker(tmp_path / "ns-store", "--namesrv-only", "--scanNotActiveBrokerInterval", "200",
                       expect_broker=False)
    procs.append(ns_proc)
    broker = Mqbroker(tmp_path / "b", "--broker-only", "-n", ns_proc.namesrv_addr or "",
                      "--registerNameServerPeriod", "300", "--brokerChannelExpiredTime", "1500",
                      expect_namesrv=False)
    procs.append(broker)
    ns = RawClient(ns_proc.namesrv_addr or "")
    try:
        wait_for(lambda: registered_names(ns) == ["broker-a"], "broker-a to register", 20)
        broker.signal(signal.SIGSTOP)  # silent, its connection stays open
        wait_for(lambda: registered_names(ns) == [], "broker-a to expire after its own 1.5 s", 15)
        broker.signal(signal.SIGCONT)
        wait_for(lambda: registered_names(ns) == ["broker-a"], "broker-a to register again", 15)
    finally:
        ns.close()


@pytest.fixture
def fast_registering(tmp_path):
    s = Servers(tmp_path)
    try:
        yield s, s.add_broker(register_period_ms=200)
    finally:
        s.close()


def test_route_lost_in_the_name_server_comes_back_with_the_next_registration(fast_registering):
    servers, (_broker, _server, addr) = fast_registering
    ns, bc = RawClient(servers.namesrv_addr), RawClient(addr)
    try:
        r = bc.call(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "Tz", "defaultTopic": "TBW102", "readQueueNums": "3",
                                                 "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG"})
        assert r.code == OK, r.remark
        wait_for(lambda: ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Tz"}).code == OK, "Tz routed", 10)
        # the name server alone forgets Tz (DELETE_TOPIC_IN_NAMESRV without the broker's delete)
        assert ns.call(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "Tz"}).code == OK
        # the broker still serves Tz with an unchanged DataVersion: its next registration routes it again
        wait_for(lambda: ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Tz"}).code == OK, "Tz routed again", 10)
        route = TopicRouteData.from_json(ns.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Tz"}).body)
        assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == \
            [("broker-a", 3, 2, 6)]
    finally:
        ns.close()
        bc.close()
