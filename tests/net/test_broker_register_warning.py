"""Warnings about a peer that never answers say so: the str() of a TimeoutError is empty, and the
broker logged "register broker to name server ...: failed: " (and "get consumer status ... failed: ")
with nothing after the colon, as `e or type(e).__name__` always picked ``e``."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from harness import Servers, bound_socket
from net_util import RawClient

import broker_core.net.broker_server as broker_server
import broker_core.net.handlers_client as handlers_client
from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.net.outbound import failure_reason
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import ConsumerData, HeartbeatData, SubscriptionData

NET_LOG = "rmqops.broker.net"


@pytest.fixture
def hung_name_server() -> Iterator[str]:
    """A listening socket nobody accepts on: connects succeed (the backlog), requests never get an answer."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def start_broker(servers: Servers, namesrv_addrs: list[str]) -> None:
    """A broker registering with ``namesrv_addrs`` (not the harness's name server); stopped with ``servers``."""
    sock = bound_socket()
    root = servers.root / "broker-h"
    config = BrokerConfig.from_properties({"brokerName": "broker-h", "listenPort": str(sock.getsockname()[1])}, root)
    broker = Broker(root, config).start()
    server = broker_server.BrokerRemotingServer(broker, namesrv_addrs, server_config=servers.server_config)
    servers.brokers.append((broker, server))
    servers.loop.run(server.start(sock=sock))


def warnings_of(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == NET_LOG and r.getMessage().startswith(start)]


def test_a_hung_name_server_s_registration_warning_says_it_timed_out(
        servers: Servers, hung_name_server: str, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_server, "REGISTER_TIMEOUT_S", 0.3)
    caplog.set_level(logging.WARNING, logger=NET_LOG)
    start_broker(servers, [hung_name_server, servers.namesrv_addr])  # start() registers once at once
    assert warnings_of(caplog, "register broker to name server") == [
        f"register broker to name server {hung_name_server} failed: no answer within 0.3 s"]
    # the name server that answers still got the registration
    ns = RawClient(servers.namesrv_addr)
    try:
        assert ns.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        assert b"broker-h" in ns.call(RequestCode.GET_BROKER_CLUSTER_INFO).body
    finally:
        ns.close()


def test_a_silent_client_s_consumer_status_warning_says_it_timed_out(
        broker_setup: tuple, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    _servers, broker, _ns, bc = broker_setup
    monkeypatch.setattr(handlers_client, "RUNNING_INFO_TIMEOUT_S", 0.3)
    caplog.set_level(logging.WARNING, logger=NET_LOG)
    silent = RawClient(broker.config.broker_addr)  # a consumer that never answers the broker's requests
    try:
        sub = SubscriptionData(topic="TBW102", sub_string="*")
        hb = HeartbeatData(client_id="cid-silent",
                           consumer_data_set=[ConsumerData(group_name="SilentG", subscription_data_set=[sub])])
        assert silent.call(RequestCode.HEART_BEAT, {}, hb.to_json()).code == ResponseCode.SUCCESS
        r = bc.call(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "TBW102", "group": "SilentG"})
        assert r.code == ResponseCode.SUCCESS
        assert warnings_of(caplog, "get consumer status") == [
            "get consumer status from client cid-silent of SilentG failed: no answer within 0.3 s"]
    finally:
        silent.close()


@pytest.mark.parametrize(("error", "text"), [
    (TimeoutError(), "no answer within 3 s"),
    (ConnectionResetError(), "ConnectionResetError"),
    (ConnectionError("connection to x closed"), "connection to x closed"),
])
def test_failure_reason_never_leaves_the_text_empty(error: BaseException, text: str) -> None:
    assert failure_reason(error, 3.0) == text
