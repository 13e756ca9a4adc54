"""SIGTERM to a running mqbroker while remoting and gRPC producers send: it stops within seconds, says
it shut down cleanly, logs no traceback, and every send it acknowledged is at its queue offset with
its body after a reopen (verifyStore clean).

Why: "Ctrl-C (or SIGTERM) stops it cleanly" is what mqbroker promises an operator, and a stop mostly
happens under load. The store-level shutdown tests call Broker.shutdown in-process; this one goes
through the process: the signal, the endpoints stopping (the gRPC one waiting for calls still on its
workers), then the Broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import threading
import time
from pathlib import Path

import grpc

from broker_core.broker.broker import Broker
from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from tests.client.conftest import create_topic
from tests.remoting_broker import BrokerProcess, running_broker

GRPC_MD = (("x-mq-client-id", "sigterm@1@0@test"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))
Ack = tuple[str, int, int, bytes]  # topic, queue id, queue offset, body


def _remoting_traffic(b: BrokerProcess, acked: list[Ack], stop: threading.Event, ready: threading.Event) -> None:
    async def send_until_stopped(producer: Producer, worker: int) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            body = f"remoting-{worker}-{n}-".encode() + b"r" * (n % 7 * 300)
            try:
                result = await producer.send(Message("SigR", body, keys=f"k{worker}-{n}"))
            except Exception:  # the broker is going away: refused or unreachable, never acknowledged
                await asyncio.sleep(0.05)
                continue
            if result.status == SendStatus.SEND_OK:
                acked.append(("SigR", result.message_queue.queue_id, result.queue_offset, body))

    async def run() -> None:
        inst = MQClientInstance(b.namesrv_addr)
        await create_topic(inst, b.broker_addr, "SigR", queues=4)
        await create_topic(inst, b.broker_addr, "SigG", queues=1)
        producer = Producer("SigP", inst, send_timeout=2.0)
        await producer.start()
        ready.set()
        await asyncio.gather(*(send_until_stopped(producer, w) for w in range(6)))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.shutdown(), 5)
            await asyncio.wait_for(inst.shutdown(), 5)

    asyncio.run(run())


def _grpc_traffic(address: str, worker: int, acked: list[Ack], stop: threading.Event) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        for n in itertools.count():
            if stop.is_set():
                return
            body = f"grpc-{worker}-{n}-".encode() + b"g" * (n % 5 * 400)
            message = pb.Message(topic=pb.Resource(name="SigG"), body=body, system_properties=pb.SystemProperties(
                message_id=f"SIGTERM{worker:02d}{n:08d}", body_encoding=pb.Encoding.IDENTITY,
                message_type=pb.MessageType.NORMAL))
            try:
                response = stub.SendMessage(pb.SendMessageRequest(messages=[message]), metadata=GRPC_MD, timeout=2)
            except grpc.RpcError:
                time.sleep(0.05)
                continue
            if response.status.code == pb.Code.OK:
                acked.append(("SigG", 0, response.entries[0].offset, body))


def test_sigterm_under_traffic_stops_cleanly_and_keeps_every_acknowledged_send(tmp_path: Path) -> None:
    acked: list[Ack] = []
    stop, ready = threading.Event(), threading.Event()
    with running_broker(tmp_path) as b:
        assert b.grpc_addr is not None
        senders = [threading.Thread(target=_remoting_traffic, args=(b, acked, stop, ready), daemon=True)]
        senders[0].start()
        assert ready.wait(30), b.log_text()
        senders += [threading.Thread(target=_grpc_traffic, args=(b.grpc_addr, w, acked, stop), daemon=True)
                    for w in range(3)]
        for t in senders[1:]:
            t.start()
        time.sleep(1.5)
        before = len(acked)
        os.kill(b.proc.pid, signal.SIGTERM)
        started = time.monotonic()
        code = b.proc.wait(timeout=20)
        took = time.monotonic() - started
        stop.set()
        for t in senders:
            t.join(20)
        log = b.log_text()
    assert code == 0, log[-3000:]
    assert took < 10, f"mqbroker took {took:.1f} s to stop"
    assert "The broker shut down cleanly." in log and "Traceback" not in log, log[-3000:]
    assert before > 50 and {a[0] for a in acked} == {"SigR", "SigG"}  # both protocols were sending
    broker = Broker(b.store)
    try:
        misplaced = []
        for topic, queue_id, offset, body in acked:
            got = broker.pull_message("VERIFY", topic, queue_id, offset, 1).messages
            if not got or got[0].queue_offset != offset or got[0].body != body:
                misplaced.append((topic, queue_id, offset))
        assert not misplaced, f"{len(misplaced)} of {len(acked)} acknowledged sends not in place: {misplaced[:5]}"
        report = broker.verify_store()
        assert not report.issues, report.issues[:5]
    finally:
        broker.shutdown()
