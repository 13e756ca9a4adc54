"""Message trace data (RocketMQ's TraceDataEncoder): the text bodies of RMQ_SYS_TRACE_TOPIC messages.

Why in the codec: a tracing client writes these bodies and mqadmin queryMsgTraceById reads them back;
Java clients and tools read ours and we read theirs, so the layout is defined once. One body holds
several trace contexts, each ended by FIELD_SPLITOR (\\x02), its fields split by CONTENT_SPLITOR (\\x01):

* Pub:       type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost, bodyLength,
             costTime, msgType ordinal, offsetMsgId, success
* SubBefore: type, timestamp, regionId, group, requestId, msgId, retryTimes, keys
* SubAfter:  type, requestId, msgId, costTime, success, keys, contextCode, timestamp, group
* EndTransaction: type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost, msgType
             ordinal, transactionId, transactionState, fromTransactionCheck
* Recall:    type, timestamp, regionId, group, topic, msgId, success

Java writes a missing tag or key as ``null`` (StringBuilder.append(null)); booleans as true/false.
The trace message's KEYS are the traced msgIds and their keys, so a key query on the trace topic by
msgId finds every context about that message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"


class TraceDataError(ValueError):
    """A trace body that does not follow the layout; the text names the context and field."""


class TraceType(StrEnum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"
    Recall = "Recall"


class MessageType:
    """org.apache.rocketmq.common.message.MessageType ordinals."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3
    Order_Msg = 4


class ConsumeReturnType:
    """ConsumeReturnType ordinals: SubAfter's contextCode."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass
class TraceBean:
    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    client_host: str = ""
    retry_times: int = 0
    body_length: int = 0
    msg_type: int = MessageType.Normal_Msg
    transaction_id: str | None = None
    transaction_state: str = ""
    from_transaction_check: bool = False


@dataclass
class TraceContext:
    trace_type: TraceType
    time_stamp: int = 0
    region_id: str = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


def _s(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_context(ctx: TraceContext) -> tuple[str, list[str]]:
    """One context as trace text, and the keys its trace message is indexed by (msgIds, then keys)."""
    c = CONTENT_SPLITOR
    parts: list[str] = []
    t = ctx.trace_type
    if t in (TraceType.Pub, TraceType.EndTransaction, TraceType.Recall):
        b = ctx.beans[0]
        head = [t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id]
        if t is TraceType.Pub:
            row = head + [b.tags, b.keys, b.store_host, b.body_length, ctx.cost_time, b.msg_type, b.offset_msg_id,
                          ctx.success]
        elif t is TraceType.EndTransaction:
            row = head + [b.tags, b.keys, b.store_host, b.msg_type, b.transaction_id, b.transaction_state,
                          b.from_transaction_check]
        else:
            row = head + [ctx.success]
        parts.append(c.join(_s(v) for v in row) + FIELD_SPLITOR)
    elif t is TraceType.SubBefore:
        for b in ctx.beans:
            row = [t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id, b.retry_times,
                   b.keys]
            parts.append(c.join(_s(v) for v in row) + FIELD_SPLITOR)
    else:  # SubAfter
        for b in ctx.beans:
            row = [t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys, ctx.context_code,
                   ctx.time_stamp, ctx.group_name]
            parts.append(c.join(_s(v) for v in row) + FIELD_SPLITOR)
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.keys:
            keys.extend(k for k in b.keys.split(" ") if k)
    return "".join(parts), list(dict.fromkeys(keys))


def _int(line: list[str], i: int, what: str) -> int:
    try:
        return int(line[i])
    except (IndexError, ValueError):
        raise TraceDataError(f"{line[0]} trace context: field {i} ({what}) is not a number: "
                             f"{line[i] if i < len(line) else '<missing>'!r}") from None


def _need(line: list[str], n: int) -> None:
    if len(line) < n:
        raise TraceDataError(f"{line[0]} trace context has {len(line)} fields, expected at least {n}")


def decode_trace_data(text: str) -> list[TraceContext]:
    """Every context of a trace body (TraceDataEncoder.decoderFromTraceDataString); unknown types are
    skipped as Java skips them."""
    out: list[TraceContext] = []
    for chunk in text.split(FIELD_SPLITOR):
        if not chunk:
            continue
        line = chunk.split(CONTENT_SPLITOR)
        kind = line[0]
        if kind == TraceType.Pub:
            _need(line, 13)
            bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                             body_length=_int(line, 9, "bodyLength"), msg_type=_int(line, 11, "msgType"))
            ctx = TraceContext(TraceType.Pub, _int(line, 1, "timestamp"), line[2], line[3],
                               cost_time=_int(line, 10, "costTime"), beans=[bean])
            if len(line) == 13:
                ctx.success = line[12] == "true"
            else:
                bean.offset_msg_id = line[12]
                ctx.success = line[13] == "true"
                if len(line) >= 15:
                    bean.client_host = line[14]
            out.append(ctx)
        elif kind == TraceType.SubBefore:
            _need(line, 8)
            bean = TraceBean(msg_id=line[5], retry_times=_int(line, 6, "retryTimes"), keys=line[7])
            out.append(TraceContext(TraceType.SubBefore, _int(line, 1, "timestamp"), line[2], line[3],
                                    request_id=line[4], beans=[bean]))
        elif kind == TraceType.SubAfter:
            _need(line, 6)
            ctx = TraceContext(TraceType.SubAfter, request_id=line[1], cost_time=_int(line, 3, "costTime"),
                               success=line[4] == "true", beans=[TraceBean(msg_id=line[2], keys=line[5])])
            if len(line) >= 7:
                ctx.context_code = _int(line, 6, "contextCode")
            if len(line) >= 9:
                ctx.time_stamp = _int(line, 7, "timestamp")
                ctx.group_name = line[8]
            out.append(ctx)
        elif kind == TraceType.EndTransaction:
            _need(line, 13)
            bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                             msg_type=_int(line, 9, "msgType"), transaction_id=line[10], transaction_state=line[11],
                             from_transaction_check=line[12] == "true")
            out.append(TraceContext(TraceType.EndTransaction, _int(line, 1, "timestamp"), line[2], line[3],
                                    beans=[bean]))
        elif kind == TraceType.Recall:
            _need(line, 7)
            out.append(TraceContext(TraceType.Recall, _int(line, 1, "timestamp"), line[2], line[3],
                                    success=line[6] == "true", beans=[TraceBean(topic=line[4], msg_id=line[5])]))
    return out
