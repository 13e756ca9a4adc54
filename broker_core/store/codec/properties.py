"""Message properties: ``name 0x01 value 0x02`` pairs (spec §2.1).

The dispatch path never builds a dict: ``get_property`` finds one key in the encoded string, with
Java's last-occurrence-wins rule, using C-level ``str.rfind``.
"""

from __future__ import annotations

NAME_VALUE_SEPARATOR = "\x01"
MAX_PROPERTIES_SIZE = 32767  # the PROPERTIES length is a signed i16 in a record and in a batch item

PROPERTY_SEPARATOR = "\x02"


def encode_properties(properties: dict[str, str] | None) -> str:
    """Serialize in the dict's insertion order; None values are skipped as Java skips nulls."""
    if not properties:
        return ""
    return "".join([f"{k}\x01{v}\x02" for k, v in properties.items() if v is not None])


def decode_properties(text: str) -> dict[str, str]:
    """Java-compatible parse: segments shorter than 3 chars, empty keys or empty values are ignored."""
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split("\x02"):
        if len(segment) < 3:
            continue
        key, sep, value = segment.partition("\x01")
        if sep and key and value:
            result[key] = value
    return result


def get_property(text: str, key: str) -> str | None:
    """Value of ``key`` in an encoded properties string (last non-empty occurrence wins), or None."""
    if not text:
        return None
    pos = text.rfind("\x02" + key + "\x01")
    if pos >= 0:
        start = pos + len(key) + 2
    elif text.startswith(key + "\x01"):
        start = len(key) + 1
    else:
        return None
    end = text.find("\x02", start)
    value = text[start:] if end < 0 else text[start:end]
    if value or pos <= 0:
        return value or None
    return _earlier_value(text, key, pos)


def _earlier_value(text: str, key: str, hi: int) -> str | None:
    """Java skips a pair with an empty value, so an occurrence of ``key`` before ``hi`` still counts."""
    needle = "\x02" + key + "\x01"
    while True:
        pos = text.rfind(needle, 0, hi)
        if pos >= 0:
            start = pos + len(needle)
        elif text.startswith(key + "\x01"):
            start = len(key) + 1
        else:
            return None
        end = text.find("\x02", start)
        value = text[start:end]  # not the last pair: a separator follows
        if value or pos <= 0:
            return value or None
        hi = pos


# Well-known keys (spec §2.2), named as MessageConst does.
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
KEY_SEPARATOR = " "
