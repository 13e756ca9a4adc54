"""The name server's route table refreshed by brokers' registrations as RocketMQ's is: a broker
expires by the heartbeatTimeoutMillis it registered with (its --brokerChannelExpiredTime), and a
periodic registration puts back a topic route the name server lost (isTopicConfigChanged)."""

from __future__ import annotations

import signal

import pytest
from net_util import Mqbroker, RawClient

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import ClusterInfo
from tests.waiting import wait_for

RC = RequestCode
OK = ResponseCode.SUCCESS


@pytest.fixture
def procs():
    started: list[Mqbroker] = []
    try:
        yield started
    finally:
        for p in reversed(started):
            p.stop()


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
