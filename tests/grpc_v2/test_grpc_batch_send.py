"""A SendMessage request of several messages is stored as one batch put: all or nothing.

Why: RocketMQ's proxy (SendMessageActivity -> ProducerProcessor) sends the messages of one request
as one MessageBatch, which the broker stores as one contiguous batch. Stored one at a time, a put
refused after the first left the earlier messages stored behind an error the client retries.
"""

from __future__ import annotations

import gzip
import time
import uuid
from pathlib import Path

import grpc

from broker_core.broker.hooks import PutMessageHookError
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from broker_core.store.codec.message import MessageInner
from tests.waiting import wait_all_dispatched

from .conftest import RunningGrpcBroker, start_grpc_broker, stop_grpc_broker

MD = (("x-mq-client-id", "batch@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


def _wire(topic: str, body: bytes, group: str | None = None) -> object:
    system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=pb.MessageType.NORMAL,
                                 body_encoding=pb.Encoding.IDENTITY)
    if group is not None:
        system.message_type = pb.MessageType.FIFO
        system.message_group = group
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=system)


def _send(port: int, *messages: object) -> object:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        return stub.SendMessage(pb.SendMessageRequest(messages=list(messages)), metadata=MD, timeout=10)


def _stored(b: object, topic: str, queues: int) -> dict[int, int]:
    """queue id -> number of messages stored there."""
    wait_all_dispatched(b)
    return {q: n for q in range(queues) if (n := b.get_max_offset(topic, q))}  # type: ignore[attr-defined]


def test_a_multi_message_send_is_stored_as_one_contiguous_batch(grpc_broker: RunningGrpcBroker) -> None:
    b = grpc_broker.broker
    b.create_or_update_topic("Batch", 4, 4)
    first = _send(grpc_broker.port, _wire("Batch", b"before"))
    assert first.status.code == pb.Code.OK
    messages = [_wire("Batch", f"m-{i}".encode()) for i in range(3)]
    sent = _send(grpc_broker.port, *messages)
    assert sent.status.code == pb.Code.OK, sent
    # one entry per message: its own message id, consecutive queue offsets
    assert [e.status.code for e in sent.entries] == [pb.Code.OK] * 3
    assert [e.message_id for e in sent.entries] == [m.system_properties.message_id for m in messages]
    base = sent.entries[0].offset
    assert [e.offset for e in sent.entries] == [base, base + 1, base + 2]
    # all in one queue (not spread by round robin), as contiguous records of the commit log
    stored = _stored(b, "Batch", 4)
    batch_queue = [q for q, n in stored.items() if n >= base + 3]
    assert len(batch_queue) == 1 and sum(stored.values()) == 4, stored
    records = b.read_queue("Batch", batch_queue[0], base, 32).messages
    assert [m.body for m in records] == [b"m-0", b"m-1", b"m-2"]
    assert [m.queue_offset for m in records] == [base, base + 1, base + 2]
    assert [m.properties["UNIQ_KEY"] for m in records] == [e.message_id for e in sent.entries]
    for a, c in zip(records, records[1:], strict=False):
        assert c.commit_log_offset == a.commit_log_offset + a.store_size


def test_a_multi_message_send_on_a_batchcq_topic_is_one_inner_batch(grpc_broker: RunningGrpcBroker) -> None:
    """Upstream's proxy gives the MessageBatch of a multi-message request its own UNIQ_KEY, which makes
    it one inner-batch record on a BatchCQ topic; each entry still names its own message."""
    b = grpc_broker.broker
    b.create_or_update_topic("BatchInner", 1, 1, attributes={"+queue.type": "BatchCQ"})
    messages = [_wire("BatchInner", f"i-{i}".encode()) for i in range(3)]
    sent = _send(grpc_broker.port, *messages)
    assert [e.status.code for e in sent.entries] == [pb.Code.OK] * 3
    assert [e.message_id for e in sent.entries] == [m.system_properties.message_id for m in messages]
    assert [e.offset for e in sent.entries] == [0, 1, 2]
    _stored(b, "BatchInner", 1)
    records = b.read_queue("BatchInner", 0, 0, 32).messages
    assert [m.body for m in records] == [b"i-0", b"i-1", b"i-2"]
    assert [m.properties["UNIQ_KEY"] for m in records] == [e.message_id for e in sent.entries]
    assert len({m.commit_log_offset for m in records}) == 1  # one record holds the three


def test_a_fifo_multi_message_send_goes_to_its_group_queue(grpc_broker: RunningGrpcBroker) -> None:
    b = grpc_broker.broker
    b.create_or_update_topic("BatchFifo", 4, 4, attributes={"+message.type": "FIFO"})
    single = _send(grpc_broker.port, _wire("BatchFifo", b"alone", group="g1"))
    sent = _send(grpc_broker.port, _wire("BatchFifo", b"a", group="g1"), _wire("BatchFifo", b"b", group="g1"))
    assert single.status.code == sent.status.code == pb.Code.OK, sent
    assert [e.offset for e in sent.entries] == [1, 2]
    assert list(_stored(b, "BatchFifo", 4).values()) == [3]


def test_a_put_refused_after_the_first_stores_none_of_the_request(grpc_broker: RunningGrpcBroker) -> None:
    b = grpc_broker.broker
    b.create_or_update_topic("Refused", 1, 1)

    def refuse_second(msg: MessageInner) -> None:  # a put hook refusing one message, as a full store would
        if msg.body == b"refused":
            raise PutMessageHookError("the store refuses this put")

    b.put_message_hooks.append(refuse_second)
    sent = _send(grpc_broker.port, _wire("Refused", b"ok-1"), _wire("Refused", b"refused"), _wire("Refused", b"ok-3"))
    assert sent.status.code == pb.Code.BAD_REQUEST, sent
    assert "none was stored" in sent.status.message and "the store refuses this put" in sent.status.message, sent
    assert [e.status.code for e in sent.entries] == [pb.Code.BAD_REQUEST] * 3
    assert _stored(b, "Refused", 1) == {}
    # the records of one batch share one SYSFLAG: a GZIP body next to a plain one is refused, not mis-flagged
    gzipped = _wire("Refused", gzip.compress(b"zipped"))
    gzipped.system_properties.body_encoding = pb.Encoding.GZIP
    mixed = _send(grpc_broker.port, _wire("Refused", b"plain"), gzipped)
    assert mixed.status.code == pb.Code.BAD_REQUEST and "body encoding" in mixed.status.message, mixed
    assert _stored(b, "Refused", 1) == {}
    # the same request without the refused message is stored whole
    ok = _send(grpc_broker.port, _wire("Refused", b"ok-1"), _wire("Refused", b"ok-3"))
    assert ok.status.code == pb.Code.OK and [e.offset for e in ok.entries] == [0, 1], ok
    assert _stored(b, "Refused", 1) == {0: 2}


def test_a_delay_message_the_broker_cannot_take_refuses_the_whole_request(tmp_path: Path) -> None:
    """With the timer wheel off the broker refuses a DELAY message; the NORMAL one sent before it in
    the same request is not stored either."""
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home, {"timerWheelEnable": "false", "enableMixedMessageType": "true"})
    try:
        b = running.broker
        b.create_or_update_topic("Mixed", 1, 1, attributes={"+message.type": "MIXED"})
        delayed = _wire("Mixed", b"later")
        delayed.system_properties.message_type = pb.MessageType.DELAY
        delayed.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
        sent = _send(running.port, _wire("Mixed", b"now"), delayed)
        assert sent.status.code != pb.Code.OK and "none was stored" in sent.status.message, sent
        assert _stored(b, "Mixed", 1) == {}
    finally:
        stop_grpc_broker(running)
