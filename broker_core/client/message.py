"""The message a producer sends, and decoding what pull/query answers carry.

Why here: a send needs the properties string (TAGS, KEYS, UNIQ_KEY, DELAY, ...) in RocketMQ's
encoding, and pull/query/check bodies are stored records decoded by the store codec — the only
module that knows the record bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from broker_core.remoting import ResponseCode
from broker_core.store.codec.batch import iter_batch_raw
from broker_core.store.codec.compression import BodyDecompressError, decompressed_body
from broker_core.store.codec.message import MessageExt, RecordError, decode_record
from broker_core.store.codec.message_id import UniqKeyGenerator
from broker_core.store.codec.sys_flag import COMPRESSED_FLAG, INNER_BATCH_FLAG, NEED_UNWRAP_FLAG
from broker_core.store.codec.validate import PropertiesSizeError, check_properties_fit

from .instance import BrokerError

log = logging.getLogger(__name__)

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
# DefaultMQProducer.maxMessageSize: the broker's default maxMessageSize too
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

_uniq = UniqKeyGenerator()


class MessageCheckError(BrokerError, ValueError):
    """A message the producer refuses before sending anything (Java's ``Validators.checkMessage``, an
    MQClientException with MESSAGE_ILLEGAL): ``message`` names the field and the limit. A BrokerError
    with the code the broker would answer, so a caller handling failed sends (the trace dispatcher)
    handles it too; a ValueError, as it is the caller's argument that is wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(ResponseCode.MESSAGE_ILLEGAL, message)
        self.message = message


def check_body_size(topic: str, size: int, max_message_size: int) -> None:
    """Java's "the message body size over max value": a body (or a whole encoded batch) over the
    producer's maxMessageSize is refused before it is sent. Sent, the broker refuses it anyway, and one
    over the remoting frame limit (16 MiB) makes the broker reset the connection every other send
    of the client shares."""
    if size > max_message_size:
        raise MessageCheckError(f"the message body size over max value, MAX: {max_message_size} "
                                f"(body {size} bytes, topic {topic})")


def check_message(msg: Message, props: dict[str, str], max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    """Refuse, before it is encoded, what the broker would refuse or store as something else.

    ``props`` are the message's wire properties (user ones plus TAGS, KEYS, UNIQ_KEY...). An empty body
    ("the message body length is zero", as Java's client), a body over ``max_message_size`` (the
    producer's maxMessageSize), a 0x01/0x02 separator in a property name or value, a tag or a key (the
    broker would decode other properties from it), and properties over the 32,767 bytes a record's i16
    length holds are refused with MessageCheckError; so one bad message of an AutoBatch fails alone,
    never the batch it would have joined."""
    if msg.body is None or len(msg.body) == 0:
        raise MessageCheckError(f"the message body length is zero (topic {msg.topic})")
    check_body_size(msg.topic, len(msg.body), max_message_size)
    try:
        check_properties_fit(props)
    except PropertiesSizeError as e:
        raise MessageCheckError(f"the message {e} (topic {msg.topic})") from None
    except RecordError as e:
        raise MessageCheckError(f"illegal message for topic {msg.topic}: {e}") from None


def new_uniq_key() -> str:
    return _uniq.next_id()


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0

    def wire_properties(self) -> dict[str, str]:
        """Properties as sent: user ones plus TAGS/KEYS/DELAY/WAIT and a UNIQ_KEY if none yet."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = self.keys if isinstance(self.keys, str) else " ".join(self.keys)
        if self.delay_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        props.setdefault(PROPERTY_WAIT_STORE_MSG_OK, "true")
        props.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, new_uniq_key())
        return props


def decode_records(body: bytes, decompress: bool = True, unwrap: bool = True) -> list[MessageExt]:
    """Every stored record of a PULL/QUERY/VIEW/CHECK body, in order; RecordError on torn data.

    ``decompress`` (Java's deCompressBody): a body a Java or ali-ons producer compressed (over 4 KiB, SYSFLAG
    COMPRESSED_FLAG) is handed over as it was sent, with COMPRESSED_FLAG cleared from its SYSFLAG (Java's
    MessageDecoder does ``sysFlag &= ~COMPRESSED_FLAG``; the compression type bits stay); one that cannot be
    inflated is kept as stored, flag and all, with a warning naming the message.

    ``unwrap`` (Java's decodesBatch, what a pull's body goes through): a BatchCQ inner-batch record becomes
    its messages. A view or a key query shows the stored record itself (Java's viewMessage and queryMessage
    decode without unwrapping), so those pass ``unwrap=False``."""
    out: list[MessageExt] = []
    pos = 0
    n = len(body)
    mv = memoryview(body)
    while pos < n:
        msg = decode_record(mv, pos)
        if msg.store_size <= 0:
            raise RecordError(f"record at body offset {pos} has size {msg.store_size}")
        pos += msg.store_size
        if unwrap and msg.sys_flag & INNER_BATCH_FLAG:
            out.extend(_unwrap(msg))
        else:
            if decompress and msg.sys_flag & COMPRESSED_FLAG:
                try:
                    msg.body = decompressed_body(msg.body, msg.sys_flag)
                    msg.sys_flag &= ~COMPRESSED_FLAG
                except BodyDecompressError as e:
                    log.warning("message %s of %s: %s; its body is handed over as stored", msg.msg_id, msg.topic, e)
            out.append(msg)
    return out


def _unwrap(record: MessageExt) -> list[MessageExt]:
    """A BatchCQ inner-batch record as its messages: item i has queue offset base + i (as Java unwraps)."""
    flags = record.sys_flag & ~(INNER_BATCH_FLAG | NEED_UNWRAP_FLAG)
    return [MessageExt(record.store_size, record.magic_code, record.body_crc, record.queue_id, flag,
                       record.queue_offset + i, record.commit_log_offset, flags, record.born_timestamp,
                       record.born_host, record.store_timestamp, record.store_host, record.reconsume_times,
                       record.prepared_transaction_offset, body, record.topic, props)
            for i, (flag, body, props) in enumerate(iter_batch_raw(record.body))]


def message_id(msg: MessageExt) -> str:
    """What users see as the msgId: the client's UNIQ_KEY, else the offset id."""
    return msg.uniq_key or msg.msg_id
