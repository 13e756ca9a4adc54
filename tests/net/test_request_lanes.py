"""Sends, pulls, client management and admin requests have worker lanes of their own, as Apache's
executors, and a client that hung up has its waiting requests dropped (a probe's flood: 2,000 clients
each sent one slow GET_BROKER_RUNTIME_INFO and closed; a producer's send then waited ~33 s)."""

from __future__ import annotations

import time

from net_util import RawClient
from test_server_codes import create_topic, send
from waiting import wait_for

from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, encode_frame
from broker_core.remoting.headers import SendMessageRequestHeaderV2
from broker_core.store.codec.properties import encode_properties

FLOODERS = 200
EACH = 3


def _flood(addr: str) -> list[RawClient]:
    """FLOODERS connections, each with EACH GET_BROKER_RUNTIME_INFOs pipelined (unanswered yet)."""
    clients = [RawClient(addr) for _ in range(FLOODERS)]
    frame = b"".join(encode_frame(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, opaque=i))
                     for i in range(EACH))
    for c in clients:
        c.send_raw(frame)
    return clients


def test_a_send_is_answered_while_admin_requests_flood_the_broker(broker_setup):
    servers, _broker, _ns, bc = broker_setup
    create_topic(bc, "Lanes")
    assert send(bc, "Lanes", b"warm").code == ResponseCode.SUCCESS
    _, server = servers.brokers[0]
    flooders = _flood(f"127.0.0.1:{bc.sock.getpeername()[1]}")
    try:
        # the flood is queued for the admin workers (a fixed 0.3 s was too short on a loaded machine)
        wait_for(lambda: server.ctx.pools["admin"].waiting > FLOODERS, "the admin flood to queue up")
        producer = RawClient(f"127.0.0.1:{bc.sock.getpeername()[1]}")
        started = time.monotonic()
        r = send(producer, "Lanes", b"while flooded")
        took = time.monotonic() - started
        producer.close()
        assert r.code == ResponseCode.SUCCESS
        assert server.ctx.pools["admin"].waiting > 0, "the flood was over before the send: the test proves nothing"
        # one shared pool took turns by connection: the send waited one admin call per flooder (~3 s here)
        assert took < 1.0, f"the send took {took:.2f} s behind the admin flood"
    finally:
        for c in flooders:
            c.close()


def test_requests_of_a_client_that_hung_up_are_dropped_but_its_oneway_sends_are_stored(broker_setup):
    servers, broker, _ns, bc = broker_setup
    create_topic(bc, "Gone", queues=1)
    _, server = servers.brokers[0]
    addr = f"127.0.0.1:{bc.sock.getpeername()[1]}"
    flooders = _flood(addr)
    admin = server.ctx.pools["admin"]
    wait_for(lambda: admin.waiting > FLOODERS, "the admin flood to queue up")
    # a oneway send on a connection that closes at once is still stored (nobody waits for an answer)
    oneway = RawClient(addr)
    h = SendMessageRequestHeaderV2(a="P", b="Gone", c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0,
                                   i=encode_properties({}))
    oneway.send(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_ext_fields(), b"oneway then gone",
                                        oneway=True))
    oneway.close()
    for c in flooders:
        c.close()
    # dropped at once: running them takes seconds (each ~5-15 ms of CPU, FLOODERS * EACH of them)
    deadline = time.monotonic() + 1.0
    while admin.waiting and time.monotonic() < deadline:
        time.sleep(0.02)
    assert admin.waiting == 0, f"{admin.waiting} calls of closed connections still wait"
    deadline = time.monotonic() + 5
    while broker.store.get_max_offset_in_queue("Gone", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert broker.store.get_max_offset_in_queue("Gone", 0) == 1
    # the broker serves as before
    assert bc.call(RequestCode.GET_BROKER_RUNTIME_INFO).code == ResponseCode.SUCCESS
