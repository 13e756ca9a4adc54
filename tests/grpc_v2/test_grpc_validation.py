"""What the gRPC endpoint refuses before the Broker acts, as upstream's proxy does (GrpcValidator,
SendMessageActivity, the topic message-type check, receipt handles), through a raw stub: a client
must not reach system topics, relabel a message's type, or ack with a handle this broker never
issued, and each refusal carries the status code the official clients map."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from google.protobuf.duration_pb2 import Duration

from broker_core.broker.topic_validator import RMQ_SYS_TRANS_HALF_TOPIC, dlq_topic
from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc

from .conftest import RunningGrpcBroker, grpc_broker_running, messaging_stub

MD = (("x-mq-client-id", "validation@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))
R = pb.Resource


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGrpcBroker]:
    """One broker for the module (every test uses its own topics and groups): keeps the added time small."""
    with grpc_broker_running(tmp_path_factory.mktemp("grpc-validation")) as broker:
        for name, kind in (("VN", "NORMAL"), ("VF", "FIFO"), ("VD", "DELAY"), ("VT", "TRANSACTION")):
            broker.broker.create_or_update_topic(name, 1, 1, attributes={"+message.type": kind})
        yield broker


@pytest.fixture(scope="module")
def stub(running: RunningGrpcBroker) -> service_pb2_grpc.MessagingServiceStub:
    return messaging_stub(running)


def wire(topic: str, body: bytes = b"x", mtype: int = pb.MessageType.NORMAL, **sp: object) -> object:
    props = sp.pop("props", None) or {}
    system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=mtype,
                                 body_encoding=pb.Encoding.IDENTITY, **sp)
    return pb.Message(topic=R(name=topic), body=body, system_properties=system, user_properties=props)


def send(stub: service_pb2_grpc.MessagingServiceStub, message: object) -> object:
    return stub.SendMessage(pb.SendMessageRequest(messages=[message]), metadata=MD, timeout=10).status


def receive(stub: service_pb2_grpc.MessagingServiceStub, group: str, topic: str, n: int = 1) -> tuple[object, list]:
    req = pb.ReceiveMessageRequest(group=R(name=group), message_queue=pb.MessageQueue(topic=R(name=topic), id=0),
                                   batch_size=n, invisible_duration=Duration(seconds=30),
                                   long_polling_timeout=Duration(seconds=5))
    items = list(stub.ReceiveMessage(req, metadata=MD, timeout=10))
    return items[0].status, [i.message for i in items if i.HasField("message")]


def ack(stub: service_pb2_grpc.MessagingServiceStub, group: str, topic: str, handle: str) -> object:
    """The entry's status; the response's when the request as a whole was refused (no entries)."""
    entry = pb.AckMessageEntry(message_id="m", receipt_handle=handle)
    r = stub.AckMessage(pb.AckMessageRequest(group=R(name=group), topic=R(name=topic), entries=[entry]),
                        metadata=MD, timeout=5)
    return r.entries[0].status if r.entries else r.status


def queue_total(running: RunningGrpcBroker, topic: str) -> int:
    return running.broker.get_max_offset(topic, 0)


def test_system_topics_and_groups_are_out_of_reach(running, stub):
    """A pending and a rolled-back transaction half sit in RMQ_SYS_TRANS_HALF_TOPIC: no RPC may read it."""
    pending = wire("VT", b"SECRET-PENDING", pb.MessageType.TRANSACTION)
    assert send(stub, pending).code == pb.Code.OK
    illegal = pb.Code.ILLEGAL_TOPIC
    code, msgs = receive(stub, "GHalf", RMQ_SYS_TRANS_HALF_TOPIC, n=32)
    assert (code.code, msgs) == (illegal, []) and "system topic" in code.message
    route = stub.QueryRoute(pb.QueryRouteRequest(topic=R(name=RMQ_SYS_TRANS_HALF_TOPIC)), metadata=MD)
    assert route.status.code == illegal and not route.message_queues
    before = queue_total(running, "TBW102")
    assert send(stub, wire("TBW102")).code == illegal
    assert queue_total(running, "TBW102") == before
    half, g = R(name=RMQ_SYS_TRANS_HALF_TOPIC), R(name="GHalf")
    assert stub.QueryAssignment(pb.QueryAssignmentRequest(topic=half, group=g), metadata=MD).status.code == illegal
    assert ack(stub, "GHalf", RMQ_SYS_TRANS_HALF_TOPIC, "0 1 30000 0 0 broker-a 0 0 0").code == illegal
    change = pb.ChangeInvisibleDurationRequest(group=g, topic=half, receipt_handle="0 1 30000 0 0 broker-a 0 0 0",
                                               invisible_duration=Duration(seconds=10))
    assert stub.ChangeInvisibleDuration(change, metadata=MD).status.code == illegal
    dlq = pb.ForwardMessageToDeadLetterQueueRequest(group=g, topic=half, receipt_handle="0 1 30000 0 0 broker-a 0 0 0")
    assert stub.ForwardMessageToDeadLetterQueue(dlq, metadata=MD).status.code == illegal
    pull = pb.PullMessageRequest(group=g, message_queue=pb.MessageQueue(topic=half, id=0), offset=0, batch_size=32)
    items = list(stub.PullMessage(pull, metadata=MD, timeout=10))
    assert items[0].status.code == illegal and not any(i.HasField("message") for i in items)
    # the broker's own consumer groups are refused the same way; retry/DLQ topics stay ordinary topics
    code, _ = receive(stub, "CID_RMQ_SYS_TRANS", "VN")
    assert code.code == pb.Code.ILLEGAL_CONSUMER_GROUP
    assert send(stub, wire(dlq_topic("GNone"))).code == pb.Code.TOPIC_NOT_FOUND


def test_message_type_is_the_one_its_properties_make(running, stub):
    """The declared label does not count: a delivery time makes DELAY, a group FIFO, neither NORMAL."""
    later = int(time.time()) + 60
    conflict = pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    cases = {
        "VN": [wire("VN", delivery_timestamp={"seconds": later}), wire("VN", message_group="g1")],
        "VF": [wire("VF", mtype=pb.MessageType.FIFO)],
        "VD": [wire("VD", mtype=pb.MessageType.DELAY)],
    }
    for topic, messages in cases.items():
        for m in messages:
            got = send(stub, m)
            assert got.code == conflict, (topic, m.system_properties, got)
        assert queue_total(running, topic) == 0, topic
    # what matches its topic still goes through, whatever the label says
    assert send(stub, wire("VD", delivery_timestamp={"seconds": later})).code == pb.Code.OK
    assert send(stub, wire("VF", mtype=pb.MessageType.FIFO, message_group="g1")).code == pb.Code.OK


def test_property_limits_reserved_keys_delivery_time_and_invisible_time_codes(running, stub):
    too_large = pb.Code.MESSAGE_PROPERTIES_TOO_LARGE
    assert send(stub, wire("VN", props={"big": "v" * 20_000})).code == too_large
    assert send(stub, wire("VN", props={f"k{i}": "v" for i in range(129)})).code == too_large
    assert send(stub, wire("VN", props={"INNER_MULTI_QUEUE_OFFSET": "1"})).code == pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    ten_years = int(time.time()) + 10 * 365 * 86400
    assert send(stub, wire("VD", delivery_timestamp={"seconds": ten_years})).code == pb.Code.ILLEGAL_DELIVERY_TIME
    change = pb.ChangeInvisibleDurationRequest(group=R(name="GInv"), topic=R(name="VN"),
                                               receipt_handle="0 1 30000 0 0 broker-a 0 0 0",
                                               invisible_duration=Duration(seconds=-5))
    got = stub.ChangeInvisibleDuration(change, metadata=MD).status
    assert got.code == pb.Code.ILLEGAL_INVISIBLE_TIME and "negative" in got.message and "12 h" not in got.message


def test_forged_receipt_handles_are_refused_and_ack_nothing(running, stub):
    topic, group = "VH", "GHandles"
    running.broker.create_or_update_topic(topic, 1, 1)
    for i in range(2):
        assert send(stub, wire(topic, f"h{i}".encode())).code == pb.Code.OK
    code, msgs = receive(stub, group, topic)
    assert code.code == pb.Code.OK and len(msgs) == 1
    real = msgs[0].system_properties.receipt_handle
    f = real.split(" ")

    def forged(**fields: object) -> str:
        parts = list(f)
        for i, v in fields.items():
            parts[int(i[1:])] = str(v)
        return " ".join(parts)

    invalid = pb.Code.INVALID_RECEIPT_HANDLE
    assert ack(stub, group, topic, forged(f5="broker-zz")).code == invalid  # another broker's name
    assert ack(stub, group, topic, forged(f3=999)).code == invalid  # orderly marker on a non-orderly pop
    assert ack(stub, group, topic, forged(f3=500)).code == invalid  # no such revive queue
    assert ack(stub, group, topic, forged(f6=7)).code == invalid  # no such queue
    change = pb.ChangeInvisibleDurationRequest(group=R(name=group), topic=R(name=topic),
                                               receipt_handle=forged(f5="broker-zz"),
                                               invisible_duration=Duration(seconds=20))
    assert stub.ChangeInvisibleDuration(change, metadata=MD).status.code == invalid
    dlq = pb.ForwardMessageToDeadLetterQueueRequest(group=R(name=group), topic=R(name=topic),
                                                    receipt_handle=forged(f5="broker-zz"))
    assert stub.ForwardMessageToDeadLetterQueue(dlq, metadata=MD).status.code == invalid
    assert running.broker.get_topic(dlq_topic(group)) is None
    # none of them touched the message: its own handle still acks it
    assert ack(stub, group, topic, real).code == pb.Code.OK
    # an orderly-looking handle for the next, never delivered, offset: nothing to ack, and the
    # message is not skipped (Java's fallback would commit past it)
    nxt = forged(f3=999, f7=int(f[7]) + 1)
    assert ack(stub, group, topic, nxt).code != pb.Code.OK
    code, msgs = receive(stub, group, topic)
    assert code.code == pb.Code.OK and [m.body for m in msgs] == [b"h1"]


def test_rpcs_this_broker_does_not_serve_answer_not_implemented_quietly(running, stub, caplog):
    """RecallMessage and SyncLiteSubscription fell through to the generated base methods: the client got
    UNIMPLEMENTED, and grpc logged an ERROR traceback on every call (19,000 of them under a fuzzer)."""
    recall = stub.RecallMessage(pb.RecallMessageRequest(topic=R(name="VT"), recall_handle="h"), metadata=MD)
    assert recall.status.code == pb.Code.NOT_IMPLEMENTED
    sync = stub.SyncLiteSubscription(pb.SyncLiteSubscriptionRequest(), metadata=MD)
    assert sync.status.code == pb.Code.NOT_IMPLEMENTED
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_repeated_ack_succeeds_whatever_the_rest_of_its_batch_did(running, stub):
    """A client retries an ack after a timeout: the second ack of a message of a fully acked batch failed
    with INTERNAL_SERVER_ERROR (its checkpoint was gone), while the same retry succeeded as long as some
    other message of the batch was still in flight. Upstream answers SUCCESS to any in-range ack."""
    topic, group = "VRepeat", "GRepeat"
    running.broker.create_or_update_topic(topic, 1, 1)
    for i in range(2):
        assert send(stub, wire(topic, f"r{i}".encode())).code == pb.Code.OK
    code, msgs = receive(stub, group, topic, n=2)
    assert code.code == pb.Code.OK and len(msgs) == 2
    first, second = (m.system_properties.receipt_handle for m in msgs)
    assert ack(stub, group, topic, first).code == pb.Code.OK
    assert ack(stub, group, topic, first).code == pb.Code.OK  # the batch still has one in flight
    assert ack(stub, group, topic, second).code == pb.Code.OK
    assert ack(stub, group, topic, first).code == pb.Code.OK  # the whole batch is settled now
    assert ack(stub, group, topic, second).code == pb.Code.OK


def test_an_expired_handle_is_refused_as_invalid_not_as_a_server_error(running, stub):
    """Upstream's proxy refuses an expired receipt handle as INVALID_RECEIPT_HANDLE ("receipt handle is
    expired"): the client then knows the message will come again, which INTERNAL_SERVER_ERROR did not say."""
    topic, group = "VExpired", "GExpired"
    running.broker.create_or_update_topic(topic, 1, 1)
    assert send(stub, wire(topic, b"e")).code == pb.Code.OK
    got = ack(stub, group, topic, "0 1 30000 0 0 broker-a 0 0 0")  # popped at 1 ms past the epoch
    assert got.code == pb.Code.INVALID_RECEIPT_HANDLE and "expired" in got.message, got


def test_an_expired_handle_is_refused_before_the_broker_whatever_its_queue_holds(running, stub):
    """The expiry is checked first, as upstream's proxy does: an expired handle whose offset the queue
    did not hold yet (a send whose dispatch had not run) was answered INTERNAL_SERVER_ERROR "status is
    abnormal (NOT_FOUND)" in a loaded CI run. ChangeInvisibleDuration refuses it the same way."""
    topic, group = "VExpiredAhead", "GExpiredAhead"
    running.broker.create_or_update_topic(topic, 1, 1)
    ahead = "0 1 30000 0 0 broker-a 0 7 0"  # offset 7 of an empty queue, popped at 1 ms past the epoch
    got = ack(stub, group, topic, ahead)
    assert got.code == pb.Code.INVALID_RECEIPT_HANDLE and "expired" in got.message, got
    changed = stub.ChangeInvisibleDuration(pb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle=ahead,
        invisible_duration=Duration(seconds=10), message_id="00"), metadata=MD)
    assert changed.status.code == pb.Code.INVALID_RECEIPT_HANDLE and "expired" in changed.status.message, changed


def test_a_born_host_that_is_a_host_name_is_kept_as_sent(running, stub):
    """The Java client sends its host name as born_host (Utilities.hostName()); every such send was refused
    BAD_REQUEST "not an IPv4 or IPv6 address". Upstream keeps the string as the BORN_HOST property; the
    record's binary born host is then the connection's address."""
    running.broker.create_or_update_topic("VB", 1, 1, attributes={"+message.type": "NORMAL"})
    for host in ("my-laptop", "10.0.0.7"):
        assert send(stub, wire("VB", body=host.encode(), born_host=host)).code == pb.Code.OK, host
    got, messages = receive(stub, "GBorn", "VB", 2)
    assert got.code == pb.Code.OK
    assert [(m.body, m.system_properties.born_host) for m in messages] == [
        (b"my-laptop", "my-laptop"), (b"10.0.0.7", "10.0.0.7")]
    stored = [running.broker.message_at("VB", 0, offset) for offset in (0, 1)]
    assert [m.born_host[0] for m in stored] == ["127.0.0.1", "10.0.0.7"]


def test_an_empty_tag_is_no_tag_and_a_blank_one_is_refused(running, stub):
    """GrpcValidator#validateTag checks only a non-empty tag."""
    running.broker.create_or_update_topic("VTag", 1, 1, attributes={"+message.type": "NORMAL"})
    assert send(stub, wire("VTag", body=b"untagged", tag="")).code == pb.Code.OK
    assert send(stub, wire("VTag", tag="  ")).code == pb.Code.ILLEGAL_MESSAGE_TAG
    got, messages = receive(stub, "GTag", "VTag")
    assert got.code == pb.Code.OK and [m.body for m in messages] == [b"untagged"]
    assert not messages[0].system_properties.HasField("tag")


def test_a_message_group_is_measured_in_utf8_bytes_below_64(running, stub):
    """SendMessageActivity#validateMessageGroup refuses a group of maxMessageGroupSize (64) UTF-8 bytes or more,
    and an empty group is no group (isNotEmpty first): the message is a plain one, not refused."""
    b = running.broker
    b.create_or_update_topic("VGroupLen", 1, 1, attributes={"+message.type": "FIFO"})
    fifo = pb.MessageType.FIFO
    assert send(stub, wire("VGroupLen", mtype=fifo, message_group="g" * 63)).code == pb.Code.OK
    assert send(stub, wire("VGroupLen", mtype=fifo, message_group="é" * 31)).code == pb.Code.OK  # 62 bytes
    for group in ("g" * 64, "é" * 32):  # 64 bytes: 64 and 32 characters
        got = send(stub, wire("VGroupLen", mtype=fifo, message_group=group))
        assert got.code == pb.Code.ILLEGAL_MESSAGE_GROUP and "64" in got.message, group
    assert send(stub, wire("VGroupLen", mtype=fifo, message_group="  ")).code == pb.Code.ILLEGAL_MESSAGE_GROUP
    assert queue_total(running, "VGroupLen") == 2
    b.create_or_update_topic("VGroupEmpty", 1, 1, attributes={"+message.type": "NORMAL"})
    assert send(stub, wire("VGroupEmpty", body=b"no-group", message_group="")).code == pb.Code.OK
    got, messages = receive(stub, "GGroupEmpty", "VGroupEmpty")
    assert got.code == pb.Code.OK and [m.body for m in messages] == [b"no-group"]
    assert not messages[0].system_properties.HasField("message_group")
    assert messages[0].system_properties.message_type == pb.MessageType.NORMAL


def test_an_empty_message_key_is_kept_and_a_blank_one_is_refused(running, stub):
    """SendMessageActivity#validateMessageKey checks only a non-empty key: "" goes into KEYS as sent (joined by
    spaces, as Message#setKeys does) and the other keys stay findable; "  " is ILLEGAL_MESSAGE_KEY."""
    from tests.waiting import wait_all_dispatched

    b = running.broker
    b.create_or_update_topic("VKeys", 1, 1, attributes={"+message.type": "NORMAL"})
    assert send(stub, wire("VKeys", body=b"with-empty", keys=["", "vk1", "", "vk2"])).code == pb.Code.OK
    assert send(stub, wire("VKeys", body=b"only-empty", keys=[""])).code == pb.Code.OK
    for keys in (["  "], ["vk3", " \t"]):
        got = send(stub, wire("VKeys", keys=keys))
        assert got.code == pb.Code.ILLEGAL_MESSAGE_KEY and "whitespace" in got.message, keys
    assert queue_total(running, "VKeys") == 2
    wait_all_dispatched(b)
    for key in ("vk1", "vk2"):
        assert [m.body for m in b.query_message("VKeys", key)] == [b"with-empty"], key
    # KEYS "" is stored as sent and reads back as no KEYS (a property with an empty value, as Java decodes it)
    assert [b.message_at("VKeys", 0, offset).keys for offset in (0, 1)] == [" vk1  vk2", None]
    got, messages = receive(stub, "GKeys", "VKeys", n=2)
    assert got.code == pb.Code.OK
    assert [(m.body, list(m.system_properties.keys)) for m in messages] == [
        (b"with-empty", ["vk1", "vk2"]), (b"only-empty", [])]


def test_a_delivery_time_is_capped_by_max_delay_time_mills_then_by_the_timer(running, stub, tmp_path):
    """SendMessageActivity#validateDelayTime refuses a delivery time more than maxDelayTimeMills (1 day by
    default; 0 or less: no such cap) ahead with ILLEGAL_DELIVERY_TIME; the broker's timerMaxDelaySec (3 days)
    still caps what that lets through. Up to 3 days were taken."""
    hour = 3600

    def ahead(s: service_pb2_grpc.MessagingServiceStub, seconds: int) -> object:
        return send(s, wire("VD", delivery_timestamp={"seconds": int(time.time()) + seconds}))

    assert ahead(stub, 23 * hour).code == pb.Code.OK
    got = ahead(stub, 25 * hour)
    assert got.code == pb.Code.ILLEGAL_DELIVERY_TIME and "maxDelayTimeMills" in got.message
    for limit, accepted, refused, key in (("0", 47 * hour, 73 * hour, "timerMaxDelaySec"),
                                          (str(5 * 24 * hour * 1000), 71 * hour, 4 * 24 * hour, "timerMaxDelaySec"),
                                          (str(2 * hour * 1000), hour, 3 * hour, "maxDelayTimeMills")):
        root = tmp_path / f"limit-{limit}"
        root.mkdir()
        with grpc_broker_running(root, {"maxDelayTimeMills": limit}) as other:
            other.broker.create_or_update_topic("VD", 1, 1, attributes={"+message.type": "DELAY"})
            s = messaging_stub(other)
            assert ahead(s, accepted).code == pb.Code.OK, limit
            got = ahead(s, refused)
            assert got.code == pb.Code.ILLEGAL_DELIVERY_TIME and key in got.message, (limit, got)
