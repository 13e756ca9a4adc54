"""Messages between the wire (apache.rocketmq.v2 Message) and the store (properties of a record).

Why one module: a message sent over gRPC must be stored exactly as a remoting client's would be
(UNIQ_KEY, TAGS, KEYS, __SHARDINGKEY, TIMER_DELIVER_MS, TRAN_MSG + PGROUP), so that a consumer on
either protocol sees the same thing; and a stored record must come back with every system property
the official clients rely on (receipt handle, delivery attempt >= 1, an upper-case MD5 body digest).
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from broker_core.store.codec import properties as P
from broker_core.store.codec.compression import decompressed_body
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.sys_flag import COMPRESSED_FLAG

from .stubs import pb

# Stored properties that are the broker's own bookkeeping: never handed back as user properties,
# and refused as user property keys on send (ILLEGAL_MESSAGE_PROPERTY_KEY). Upstream's reserved set
# (MessageConst.STRING_HASH_SET) plus the keys this broker acts on (sharding key, transaction and
# inner-batch bookkeeping, trace context). INNER_MULTI_DISPATCH (LMQ dispatch) and
# __STARTDELIVERTIME are not reserved upstream: they stay ordinary user properties.
SYSTEM_PROPERTY_KEYS = frozenset({
    P.PROPERTY_KEYS, P.PROPERTY_TAGS, P.PROPERTY_WAIT_STORE_MSG_OK, P.PROPERTY_DELAY_TIME_LEVEL,
    P.PROPERTY_RETRY_TOPIC, P.PROPERTY_REAL_TOPIC, P.PROPERTY_REAL_QUEUE_ID, P.PROPERTY_TRANSACTION_PREPARED,
    P.PROPERTY_PRODUCER_GROUP, P.PROPERTY_MIN_OFFSET, P.PROPERTY_MAX_OFFSET, P.PROPERTY_ORIGIN_MESSAGE_ID,
    P.PROPERTY_RECONSUME_TIME, P.PROPERTY_MSG_REGION, P.PROPERTY_TRACE_SWITCH,
    P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, P.PROPERTY_MAX_RECONSUME_TIMES, P.PROPERTY_CONSUME_START_TIMESTAMP,
    P.PROPERTY_INNER_NUM, P.PROPERTY_INNER_BASE, P.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    P.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, P.PROPERTY_TRANSACTION_ID, P.PROPERTY_TRANSACTION_CHECK_TIMES,
    P.PROPERTY_CLUSTER, P.PROPERTY_POP_CK, P.PROPERTY_POP_CK_OFFSET, P.PROPERTY_FIRST_POP_TIME,
    P.PROPERTY_SHARDING_KEY, P.PROPERTY_TIMER_DELIVER_MS, P.PROPERTY_TIMER_DELAY_SEC, P.PROPERTY_TIMER_DELAY_MS,
    P.PROPERTY_TIMER_OUT_MS, P.PROPERTY_TIMER_ENQUEUE_MS, P.PROPERTY_TIMER_DEQUEUE_MS, P.PROPERTY_TIMER_ROLL_TIMES,
    P.PROPERTY_TIMER_DEL_UNIQKEY, P.PROPERTY_DLQ_ORIGIN_TOPIC, P.PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    "BORN_TIMESTAMP", "__BORNHOST", "TRACE_CONTEXT", "BUYER_ID", "CORRECTION_FLAG", "MSG_TYPE", "INSTANCE_ID",
    "TRANSFER_FLAG", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME",
    "MQ2_FLAG", "EXTEND_UNIQ_INFO", "DUP_INFO", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_LEVEL", "__CRC32#",
})
# Upstream proxy limits on what a producer puts next to the body (ProxyConfig userPropertyMaxNum,
# maxUserPropertySize): user properties, the tag and the keys together. The broker's own 32767-byte
# cap on the whole property string is hit later and only as a generic MESSAGE_ILLEGAL.
USER_PROPERTY_MAX_NUM = 128
MAX_USER_PROPERTY_SIZE = 16 * 1024
MAX_MESSAGE_GROUP_SIZE = 64  # ProxyConfig.maxMessageGroupSize: a group must take fewer UTF-8 bytes


class WireMessageError(ValueError):
    """A sent message the broker refuses before storing it; ``code`` is the v2 status code to answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """What SendMessage asks the Broker to store."""

    topic: str
    body: bytes
    properties: dict[str, str]
    message_type: int
    message_id: str
    message_group: str | None
    born_timestamp: int | None
    born_host: tuple[str, int]
    sys_flag: int = 0  # the record's SYSFLAG bits the wire message decides (COMPRESSED_FLAG for GZIP)


def sys_flag_of(message: object) -> int:
    """SYSFLAG bits a sent message carries (upstream SendMessageActivity.buildSysFlag): a GZIP body is
    stored as sent, flagged COMPRESSED (compression type bits 0: ZLIB), so that every consumer (gRPC,
    remoting, mqadmin) inflates it and gets the original body. IDENTITY, UNSPECIFIED and encodings
    this protocol version has no name for are stored as plain bodies, as upstream does. (The
    transaction type bit upstream also sets here is this broker's TRAN_MSG property's job.)"""
    encoding = message.system_properties.body_encoding  # type: ignore[attr-defined]
    return COMPRESSED_FLAG if encoding == pb.Encoding.GZIP else 0


def _check_text(value: str, code: int, what: str) -> None:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise WireMessageError(code, f"{what} {value!r} contains a control character")


def inbound(message: object, peer_ip: str, max_body_size: int, *, now_ms: int | None = None,
            max_delay_ms: int = 0, timer_max_delay_ms: int = 0) -> InboundMessage:
    """Validate one wire message (upstream's checks, in its order) and map it to stored properties.

    With ``now_ms``, two limits (each > 0 to apply) cap how far ahead a delivery time may be, both
    answered ILLEGAL_DELIVERY_TIME: ``max_delay_ms``, the proxy's own (maxDelayTimeMills), and
    ``timer_max_delay_ms``, the broker timer's (timerMaxDelaySec), which it refuses only with a generic
    MESSAGE_ILLEGAL."""
    m = message  # pb.Message
    sp = m.system_properties  # type: ignore[attr-defined]
    topic = m.topic.name  # type: ignore[attr-defined]
    body = bytes(m.body)  # type: ignore[attr-defined]
    if not topic:
        raise WireMessageError(pb.Code.ILLEGAL_TOPIC, "topic name is empty")
    if not body:
        raise WireMessageError(pb.Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > max_body_size:
        raise WireMessageError(pb.Code.MESSAGE_BODY_TOO_LARGE,
                               f"message body size {len(body)} exceeds the limit of {max_body_size} bytes")
    if not sp.message_id.strip():
        raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_ID, "message id is blank")
    props: dict[str, str] = {}
    user_properties = m.user_properties  # type: ignore[attr-defined]
    if len(user_properties) > USER_PROPERTY_MAX_NUM:
        raise WireMessageError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
                               f"{len(user_properties)} user properties, at most {USER_PROPERTY_MAX_NUM} allowed")
    size = 0
    for key, value in user_properties.items():
        size += len(key.encode()) + len(value.encode())
        if key in SYSTEM_PROPERTY_KEYS:
            raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property key {key!r} is reserved")
        if not key:
            raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "property key is empty")
        _check_text(key, pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "property key")
        _check_text(value, pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"value of property {key}")
        props[key] = value
    if sp.tag:  # GrpcValidator#validateTag: an empty tag is no tag; a whitespace one is refused
        if not sp.tag.strip() or "|" in sp.tag:
            raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is blank or contains '|'")
        _check_text(sp.tag, pb.Code.ILLEGAL_MESSAGE_TAG, "tag")
        props[P.PROPERTY_TAGS] = sp.tag
    if sp.keys:
        for key in sp.keys:  # validateMessageKey: an empty key is kept as sent (the index skips it)
            if key and not key.strip():
                raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_KEY,
                                       f"message key {key!r} cannot be the char sequence of whitespace")
            _check_text(key, pb.Code.ILLEGAL_MESSAGE_KEY, "message key")
        props[P.PROPERTY_KEYS] = P.KEY_SEPARATOR.join(sp.keys)
    size += len(sp.tag.encode()) + sum(len(k.encode()) for k in sp.keys)
    if size > MAX_USER_PROPERTY_SIZE:
        raise WireMessageError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
                               f"user properties, tag and keys take {size} bytes, at most "
                               f"{MAX_USER_PROPERTY_SIZE} allowed")
    props[P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    group = sp.message_group or None  # validateMessageGroup: an empty group is no group, as upstream reads it
    if group is not None:
        if not group.strip():
            raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_GROUP, f"message group {group!r} is blank")
        if len(group.encode()) >= MAX_MESSAGE_GROUP_SIZE:
            raise WireMessageError(pb.Code.ILLEGAL_MESSAGE_GROUP,
                                   f"message group takes {len(group.encode())} UTF-8 bytes, it must take fewer "
                                   f"than {MAX_MESSAGE_GROUP_SIZE} (maxMessageGroupSize)")
        _check_text(group, pb.Code.ILLEGAL_MESSAGE_GROUP, "message group")
        props[P.PROPERTY_SHARDING_KEY] = group
    if sp.HasField("delivery_timestamp"):
        deliver_ms = sp.delivery_timestamp.seconds * 1000 + sp.delivery_timestamp.nanos // 1_000_000
        for limit, key in ((max_delay_ms, "maxDelayTimeMills"), (timer_max_delay_ms, "timerMaxDelaySec")):
            if limit > 0 and now_ms is not None and deliver_ms - now_ms > limit:
                raise WireMessageError(pb.Code.ILLEGAL_DELIVERY_TIME,
                                       f"delivery time is {deliver_ms - now_ms} ms ahead, at most {limit} ms "
                                       f"({key}) allowed")
        props[P.PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    if sp.message_type == pb.MessageType.TRANSACTION:
        props[P.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[P.PROPERTY_PRODUCER_GROUP] = topic  # the topic doubles as producer group for check-back
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            if seconds > 3600:
                raise WireMessageError(pb.Code.BAD_REQUEST, "orphaned transaction recovery duration exceeds 1 h")
            props[P.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    born_ms = None
    if sp.HasField("born_timestamp"):
        born_ms = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000
        props["BORN_TIMESTAMP"] = str(born_ms)
    # SendMessageActivity keeps the client's born_host as a property, whatever it is: the Java client
    # sends its host name there. The record's binary born host must be an address, so a name gives way
    # to the connection's peer, as the broker behind upstream's proxy stores its channel's address.
    props["__BORNHOST"] = sp.born_host or peer_ip
    born_ip = sp.born_host if _is_ip_address(sp.born_host) else peer_ip
    if sp.HasField("trace_context"):
        props["TRACE_CONTEXT"] = sp.trace_context
    return InboundMessage(topic, body, props, sp.message_type, sp.message_id, group, born_ms, (born_ip, 0),
                          sys_flag_of(m))


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def message_type_of(properties: dict[str, str]) -> int:
    """The v2 MessageType a stored message has (upstream's rule, in its order)."""
    if properties.get(P.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
        return pb.MessageType.TRANSACTION
    if any(k in properties for k in (P.PROPERTY_DELAY_TIME_LEVEL, P.PROPERTY_TIMER_DELIVER_MS,
                                     P.PROPERTY_TIMER_DELAY_SEC, P.PROPERTY_TIMER_DELAY_MS)):
        return pb.MessageType.DELAY
    if P.PROPERTY_SHARDING_KEY in properties:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def _timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def outbound(msg: MessageExt, receipt_handle: str | None = None, delivery_attempt: int | None = None,
             invisible_ms: int | None = None, *, body: bytes | None = None) -> object:
    """A stored record as the clients expect it delivered (spec §3.4: every 'server must set' field).

    The body goes out as the producer gave it, IDENTITY-encoded: a compressed record (ZLIB, LZ4 or
    ZSTD, SYSFLAG bits 8-10) is decompressed here, as upstream's default (cluster-mode) proxy gets
    popped messages through MessageDecoder with decompressBody on. Labelling the stored bytes GZIP
    instead handed LZ4/ZSTD bytes to the client's gunzip, whose error failed the whole receive on every
    redelivery. Raises BodyDecompressError for a body that does not decompress (the caller decides:
    upstream's decoder drops such a message from the batch); ``body`` overrides the delivered bytes."""
    props = msg.properties
    if body is None:
        body = decompressed_body(msg.body, msg.sys_flag)
    sp = pb.SystemProperties(
        message_id=props.get(P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
        body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=message_type_of(props),
        born_timestamp=_timestamp(int(props.get("BORN_TIMESTAMP") or msg.born_timestamp)),
        born_host=props.get("__BORNHOST") or msg.born_host[0],
        store_timestamp=_timestamp(msg.store_timestamp),
        store_host=_host(msg.store_host),
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=delivery_attempt if delivery_attempt is not None else msg.reconsume_times + 1,
    )
    if P.PROPERTY_TAGS in props:
        sp.tag = props[P.PROPERTY_TAGS]
    if props.get(P.PROPERTY_KEYS):
        sp.keys.extend(k for k in props[P.PROPERTY_KEYS].split(P.KEY_SEPARATOR) if k)
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_ms is not None:
        sp.invisible_duration.FromMilliseconds(invisible_ms)
    if P.PROPERTY_SHARDING_KEY in props:
        sp.message_group = props[P.PROPERTY_SHARDING_KEY]
    if P.PROPERTY_TIMER_DELIVER_MS in props:
        sp.delivery_timestamp.CopyFrom(_timestamp(int(props[P.PROPERTY_TIMER_DELIVER_MS])))
    if "TRACE_CONTEXT" in props:
        sp.trace_context = props["TRACE_CONTEXT"]
    if P.PROPERTY_DLQ_ORIGIN_TOPIC in props:
        sp.dead_letter_queue.topic = props[P.PROPERTY_DLQ_ORIGIN_TOPIC]
        sp.dead_letter_queue.message_id = props.get(P.PROPERTY_DLQ_ORIGIN_MESSAGE_ID, "")
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS}
    return pb.Message(topic=pb.Resource(name=msg.topic), user_properties=user, system_properties=sp,
                      body=body)
