"""A cancellation must end a client task whatever loop turn it lands in. Python 3.11's
``asyncio.wait_for`` returned the awaited result when the task was cancelled in the turn the result
arrived, and the CancelledError was lost (the dashboard's refresh loop ran on after quit for this reason,
commit ef7336d). In the client that let the trace dispatcher's loop (stopped only by cancel) survive
a traced producer's shutdown(), which then never returned, made a cancelled invoke return the
broker's response and a cancelled connect return an open connection.

Each test lands the cancel at every turn from the one in which the awaited thing completes to a few
after it: a cancel the task accepted must end it cancelled."""

from __future__ import annotations

import asyncio
import time

from broker_core.client.connection import RemotingConnection
from broker_core.client.instance import MQClientInstance
from broker_core.client.producer import Producer
from broker_core.client.trace import DEFAULT_REGION
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, encode_frame
from broker_core.remoting.frame import FrameDecoder
from broker_core.store.codec.trace_data import TraceBean, TraceContext, TraceType
from tests.remoting_broker import BrokerProcess

TURNS = range(6)  # loop turns between the awaited thing completing and the cancel


def test_traced_producer_shutdown_ends_when_its_trace_flush_was_just_woken(broker: BrokerProcess,
                                                                          unique: str) -> None:
    """64 queued trace contexts wake the dispatcher's loop at once; a shutdown() right then cancels the
    loop in the turn its wait gets the wake-up. The old loop lost that cancel and flushed on forever,
    so shutdown() (which waits for the loop to end) never returned."""

    async def go() -> list[int]:
        inst = MQClientInstance(broker.namesrv_addr)
        hung: list[int] = []
        for turns in TURNS:
            group = f"{unique}P{turns}"
            producer = Producer(group, inst, enable_msg_trace=True)
            await producer.start()
            assert producer.trace is not None
            await asyncio.sleep(0.02)  # the dispatcher's loop is waiting for the next flush (every 0.1 s)
            for i in range(64):  # the 64th wakes the loop instead of waiting for flush_interval
                bean = TraceBean(topic=unique, msg_id=f"{turns}-{i}")
                producer.trace.append(TraceContext(TraceType.Pub, int(time.time() * 1000), DEFAULT_REGION,
                                                   group, beans=[bean]))
            for _ in range(turns):
                await asyncio.sleep(0)  # one loop turn each
            # not asyncio.timeout around shutdown(): its cancel would end the loop and hide the hang
            shutdown = asyncio.ensure_future(producer.shutdown())
            if not (await asyncio.wait([shutdown], timeout=5))[0]:
                hung.append(turns)
                shutdown.cancel()  # it is stuck waiting for the loop: this cancel ends the loop
                await asyncio.wait([shutdown])
        await inst.shutdown()
        return hung

    assert asyncio.run(go()) == [], "shutdown() never returned for a cancel landing that many turns after the wake"


def test_an_invoke_cancelled_as_its_response_arrives_ends_cancelled() -> None:
    """The peer answers, then cancels the caller's task ``turns`` loop turns later; the caller reading
    the answer in the meantime is fine, but a cancel the task accepted must raise CancelledError, not
    hand back the response (whoever cancelled has moved on, and a retry or cleanup would be skipped)."""

    async def go() -> list[tuple[int, bool, str]]:
        loop = asyncio.get_running_loop()
        outcomes: list[tuple[int, bool, str]] = []
        caller: asyncio.Task[RemotingCommand] | None = None
        turns = 0
        accepted: list[bool] = []

        def cancel_after(n: int) -> None:
            if n:
                loop.call_soon(cancel_after, n - 1)
            else:
                assert caller is not None
                accepted.append(caller.cancel())

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            dec = FrameDecoder()
            while data := await reader.read(4096):
                for req in dec.feed(data):
                    writer.write(encode_frame(req.response(ResponseCode.SUCCESS)))
                    cancel_after(turns)

        server = await asyncio.start_server(handler, "127.0.0.1", 0)  # a free port: CI runs other servers
        conn = await RemotingConnection.open(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        try:
            for turns in TURNS:
                accepted.clear()
                caller = asyncio.ensure_future(
                    conn.invoke(RemotingCommand.request(RequestCode.HEART_BEAT), timeout=10))
                try:
                    await caller
                    outcome = "response"
                except asyncio.CancelledError:
                    outcome = "cancelled"
                await asyncio.sleep(0.05)  # the scheduled cancel has run, whatever the order
                outcomes.append((turns, accepted[0], outcome))
        finally:
            conn.close()
            server.close()
            await server.wait_closed()
        return outcomes

    for turns, accepted, outcome in asyncio.run(asyncio.wait_for(go(), 60)):
        # a cancel the task accepted ends it cancelled; one that came too late finds it finished
        assert (accepted, outcome) in ((True, "cancelled"), (False, "response")), (turns, accepted, outcome)


def test_a_connect_cancelled_as_it_completes_ends_cancelled() -> None:
    """The connect is cancelled ``turns`` loop turns after it starts, for every count from its first
    turn to past its completion: a cancel the task accepted must raise CancelledError, not hand an open
    connection to a caller that has moved on."""

    async def go() -> list[tuple[int, bool, str]]:
        loop = asyncio.get_running_loop()
        outcomes: list[tuple[int, bool, str]] = []
        server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            for turns in range(20):  # a loopback connect completes in fewer turns than that
                opening = asyncio.ensure_future(RemotingConnection.open(f"127.0.0.1:{port}", timeout=10))
                accepted: list[bool] = []

                def cancel_after(n: int, opening: asyncio.Task[RemotingConnection] = opening,
                                 accepted: list[bool] = accepted) -> None:
                    if n:
                        loop.call_soon(cancel_after, n - 1)
                    else:
                        accepted.append(opening.cancel())

                cancel_after(turns)
                try:
                    (await opening).close()
                    outcome = "connection"
                except asyncio.CancelledError:
                    outcome = "cancelled"
                await asyncio.sleep(0.02)  # the scheduled cancel has run, whatever the order
                outcomes.append((turns, accepted[0], outcome))
        finally:
            server.close()
            await server.wait_closed()
        return outcomes

    outcomes = asyncio.run(asyncio.wait_for(go(), 60))
    assert outcomes[-1][1:] == (False, "connection"), "the connect never completed before its cancel"
    for turns, accepted, outcome in outcomes:
        assert (accepted, outcome) in ((True, "cancelled"), (False, "connection")), (turns, accepted, outcome)
