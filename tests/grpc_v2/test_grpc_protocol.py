"""Protocol edges the official client never exercises, through a raw stub: status codes, bad input, TLS."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import threading
import time

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc

from .conftest import start_grpc_broker, stop_grpc_broker

MD = (("x-mq-client-id", "test@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


def stub(port: int) -> service_pb2_grpc.MessagingServiceStub:
    return service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))


def endpoints(port: int):
    return pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)])


def test_every_answer_carries_a_status_and_client_id_is_required(grpc_broker):
    s = stub(grpc_broker.port)
    r = s.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="Nope"), endpoints=endpoints(grpc_broker.port)))
    assert r.status.code == pb.Code.CLIENT_ID_REQUIRED
    r = s.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="Nope"), endpoints=endpoints(grpc_broker.port)),
                     metadata=MD)
    assert r.status.code == pb.Code.TOPIC_NOT_FOUND
    grpc_broker.broker.create_or_update_topic("Route", 2, 3)
    r = s.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="Route"), endpoints=endpoints(grpc_broker.port)),
                     metadata=MD)
    assert r.status.code == pb.Code.OK
    # upstream layout: write-only queues first (3 writable, 2 readable), then read-write
    assert [(q.id, q.permission) for q in r.message_queues] == [
        (0, pb.Permission.WRITE), (1, pb.Permission.READ_WRITE), (2, pb.Permission.READ_WRITE)]
    assert all(q.broker.endpoints == endpoints(grpc_broker.port) and q.broker.id == 0 for q in r.message_queues)


def test_bad_receive_and_ack_input(grpc_broker):
    grpc_broker.broker.create_or_update_topic("Edge", 1, 1)
    s = stub(grpc_broker.port)
    mq = pb.MessageQueue(topic=pb.Resource(name="Edge"), id=0)
    req = pb.ReceiveMessageRequest(group=pb.Resource(name="G"), message_queue=mq, batch_size=1,
                                   invisible_duration=Duration(seconds=1), long_polling_timeout=Duration(seconds=5))
    items = list(s.ReceiveMessage(req, metadata=MD, timeout=10))
    assert items[0].status.code == pb.Code.ILLEGAL_INVISIBLE_TIME and items[-1].HasField("delivery_timestamp")
    ack = s.AckMessage(pb.AckMessageRequest(group=pb.Resource(name="G"), topic=pb.Resource(name="Edge"),
                                            entries=[pb.AckMessageEntry(message_id="x", receipt_handle="garbage")]),
                       metadata=MD)
    assert ack.entries[0].status.code == pb.Code.INVALID_RECEIPT_HANDLE
    end = s.EndTransaction(pb.EndTransactionRequest(topic=pb.Resource(name="Edge"), transaction_id=" "),
                           metadata=MD)
    assert end.status.code == pb.Code.INVALID_TRANSACTION_ID


def test_empty_queue_long_poll_answers_message_not_found_in_time(grpc_broker):
    import time
    grpc_broker.broker.create_or_update_topic("Empty", 1, 1)
    s = stub(grpc_broker.port)
    req = pb.ReceiveMessageRequest(group=pb.Resource(name="G"),
                                   message_queue=pb.MessageQueue(topic=pb.Resource(name="Empty"), id=0),
                                   batch_size=4, invisible_duration=Duration(seconds=30),
                                   long_polling_timeout=Duration(seconds=5))
    t0 = time.monotonic()
    items = list(s.ReceiveMessage(req, metadata=MD, timeout=8))
    took = time.monotonic() - t0
    assert items[0].status.code == pb.Code.MESSAGE_NOT_FOUND and 4.0 <= took < 7.5


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "broker.crt", tmp_path / "broker.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_when_a_certificate_is_configured(tmp_path):
    cert, key = _self_signed(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home, {"grpcTlsCertPath": str(cert), "grpcTlsKeyPath": str(key)})
    try:
        running.broker.create_or_update_topic("T", 1, 1)
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        channel = grpc.secure_channel(f"localhost:{running.port}", creds)
        s = service_pb2_grpc.MessagingServiceStub(channel)
        r = s.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="T"), endpoints=endpoints(running.port)),
                         metadata=MD, timeout=5)
        assert r.status.code == pb.Code.OK
        plain = stub(running.port)
        with pytest.raises(grpc.RpcError):
            plain.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="T")), metadata=MD, timeout=3)
    finally:
        stop_grpc_broker(running)


def test_pull_and_offset_rpcs(grpc_broker):
    from google.protobuf.timestamp_pb2 import Timestamp
    b = grpc_broker.broker
    b.create_or_update_topic("PullT", 1, 1)
    for i in range(5):
        b.send_message("PullT", f"p{i}".encode(), queue_id=0)
    s = stub(grpc_broker.port)
    mq = pb.MessageQueue(topic=pb.Resource(name="PullT"), id=0)
    items = list(s.PullMessage(pb.PullMessageRequest(group=pb.Resource(name="PullG"), message_queue=mq, offset=2,
                                                     batch_size=10), metadata=MD, timeout=10))
    assert items[0].status.code == pb.Code.OK
    assert [i.message.body for i in items[1:-1]] == [b"p2", b"p3", b"p4"] and items[-1].next_offset == 5
    r = s.GetOffset(pb.GetOffsetRequest(group=pb.Resource(name="PullG"), message_queue=mq), metadata=MD)
    assert r.status.code == pb.Code.OFFSET_NOT_FOUND
    assert s.UpdateOffset(pb.UpdateOffsetRequest(group=pb.Resource(name="PullG"), message_queue=mq, offset=4),
                          metadata=MD).status.code == pb.Code.OK
    assert s.GetOffset(pb.GetOffsetRequest(group=pb.Resource(name="PullG"), message_queue=mq),
                       metadata=MD).offset == 4
    q = pb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.END)
    assert s.QueryOffset(q, metadata=MD).offset == 5
    q = pb.QueryOffsetRequest(message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.TIMESTAMP,
                              timestamp=Timestamp(seconds=0))
    assert s.QueryOffset(q, metadata=MD).offset == 0
    # a policy number the protocol does not define: said as such, not "query by TIMESTAMP needs a timestamp"
    unknown = s.QueryOffset(pb.QueryOffsetRequest(message_queue=mq, query_offset_policy=99), metadata=MD).status
    assert (unknown.code, unknown.message) == (pb.Code.BAD_REQUEST, "unknown query offset policy 99")
    # after resetOffsetByTime the next pull says the offset was reset (it said "offset 4 is outside [0, 5]",
    # an offset well inside the queue), next_offset carrying the reset offset; a pull from there reads on
    b.reset_offset("PullG", "PullT", offset=1)
    items = list(s.PullMessage(pb.PullMessageRequest(group=pb.Resource(name="PullG"), message_queue=mq, offset=4,
                                                     batch_size=10), metadata=MD, timeout=10))
    assert (items[0].status.code, items[0].status.message) == (
        pb.Code.ILLEGAL_OFFSET, "the offset of group PullG on this queue was reset to 1; pull from next_offset")
    assert items[-1].next_offset == 1
    items = list(s.PullMessage(pb.PullMessageRequest(group=pb.Resource(name="PullG"), message_queue=mq, offset=1,
                                                     batch_size=10), metadata=MD, timeout=10))
    assert [i.message.body for i in items[1:-1]] == [b"p1", b"p2", b"p3", b"p4"]


def test_stop_waits_for_a_broker_call_in_progress(tmp_path):
    """mqbroker shuts the Broker down right after the endpoint stops: a call still running on the
    endpoint's worker threads would meet a closing store. Stopping waits for calls in progress (long
    polls park no thread, so only short calls are waited for); it used to return at once."""
    home = tmp_path / "home"
    home.mkdir()
    running = start_grpc_broker(tmp_path / "store", home)
    b = running.broker
    b.create_or_update_topic("StopT", 1, 1)
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    real_commit = b.commit_offset

    def held_commit(*args, **kwargs):  # the broker call, held while the endpoint is told to stop
        entered.set()
        release.wait(10)
        try:
            return real_commit(*args, **kwargs)
        finally:
            finished.set()

    b.commit_offset = held_commit
    mq = pb.MessageQueue(topic=pb.Resource(name="StopT"), id=0)

    def update_offset() -> None:
        with contextlib.suppress(grpc.RpcError):  # the stopping server may cancel the RPC itself
            stub(running.port).UpdateOffset(pb.UpdateOffsetRequest(group=pb.Resource(name="StopG"), message_queue=mq,
                                                                   offset=3), metadata=MD, timeout=10)

    caller = threading.Thread(target=update_offset, daemon=True)
    try:
        caller.start()
        assert entered.wait(10)
        stopping = asyncio.run_coroutine_threadsafe(running.endpoint.stop(0.1), running._loop)
        time.sleep(0.5)
        assert not stopping.done(), "the endpoint stopped with a broker call still running"
        release.set()
        stopping.result(10)
        assert finished.is_set()
    finally:
        release.set()
        stop_grpc_broker(running)
    caller.join(10)


def _consumer_backoff(port: int, group: str, topic: str) -> pb.RetryPolicy:
    settings = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=topic), expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"))]))

    def commands():
        yield pb.TelemetryCommand(settings=settings)
        time.sleep(1)

    for answer in stub(port).Telemetry(commands(), metadata=MD, timeout=10):
        assert answer.status.code == pb.Code.OK, answer.status
        return answer.settings.backoff_policy
    raise AssertionError("no settings answer")


def test_consumer_settings_carry_the_group_s_retry_policy(grpc_broker):
    """An EXPONENTIAL group retry policy was answered as the default customized list, and customized
    steps were cut to whole seconds (500 ms, 1500 ms -> 1 s, 1 s); the proxy sends both as configured."""
    b = grpc_broker.broker
    b.create_or_update_topic("Backoff", 1, 1)
    b.create_or_update_subscription_group("ExpG", retry_max_times=5, group_retry_policy={
        "type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2}})
    b.create_or_update_subscription_group("CustG", group_retry_policy={
        "type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [500, 1500, 2500]}})
    exp = _consumer_backoff(grpc_broker.port, "ExpG", "Backoff")
    assert exp.max_attempts == 6 and exp.WhichOneof("strategy") == "exponential_backoff"
    assert (exp.exponential_backoff.initial.ToMilliseconds(), exp.exponential_backoff.max.ToMilliseconds(),
            exp.exponential_backoff.multiplier) == (1000, 60000, 2.0)
    cust = _consumer_backoff(grpc_broker.port, "CustG", "Backoff")
    assert [d.ToMilliseconds() for d in cust.customized_backoff.next] == [500, 1500, 2500]


def test_forwarding_one_item_of_a_batchcq_batch_dead_letters_that_item(grpc_broker):
    """ForwardMessageToDeadLetterQueue on the 2nd message of a BatchCQ batch stored the whole encoded
    batch in %DLQ% (all items, binary frames, the batch's key); the item alone must go there."""
    from broker_core.store.codec.batch import BatchItem

    b = grpc_broker.broker
    b.create_or_update_topic("BatchT", 1, 1, attributes={"+queue.type": "BatchCQ"})
    b.send_batch("BatchT", [BatchItem(body, {}) for body in (b"b1", b"b2", b"b3")],
                 {"UNIQ_KEY": "AC10000100002A9F0000000000000003"})  # its own UNIQ_KEY: one inner batch
    s = stub(grpc_broker.port)
    req = pb.ReceiveMessageRequest(group=pb.Resource(name="FwdG"),
                                   message_queue=pb.MessageQueue(topic=pb.Resource(name="BatchT"), id=0),
                                   batch_size=8, invisible_duration=Duration(seconds=30),
                                   long_polling_timeout=Duration(seconds=5))
    got = [i.message for i in s.ReceiveMessage(req, metadata=MD, timeout=10) if i.HasField("message")]
    assert [m.body for m in got] == [b"b1", b"b2", b"b3"]
    m2 = got[1]
    r = s.ForwardMessageToDeadLetterQueue(pb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="FwdG"), topic=pb.Resource(name="BatchT"),
        receipt_handle=m2.system_properties.receipt_handle, message_id=m2.system_properties.message_id,
        delivery_attempt=1, max_delivery_attempts=16), metadata=MD, timeout=10)
    assert r.status.code == pb.Code.OK, r.status
    [dead] = b.store.get_messages("%DLQ%FwdG", 0, 0, 10).messages
    assert dead.body == b"b2" and dead.uniq_key == m2.system_properties.message_id
