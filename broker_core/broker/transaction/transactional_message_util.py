"""The message shapes of the transaction protocol (RocketMQ TransactionalMessageUtil / Bridge / processors).

Why pure functions: the half, re-checked half, committed and discarded forms of a message are each
defined once here, without I/O, so the send path, the end-transaction path, the check service and
the tests all build exactly the same records (spec §1.9, §11.3).
"""

from __future__ import annotations

from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from broker_core.store.codec.sys_flag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)

RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","


def reset_transaction_value(sys_flag: int, tran_type: int) -> int:
    """MessageSysFlag.resetTransactionValue: replace bits 2-3 with ``tran_type``."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | (tran_type & TRANSACTION_TYPE_MASK)


def _java_parse_int(text: str | None) -> int:
    try:
        return int(text) if text is not None else 0
    except ValueError:
        return 0


def is_transaction_prepare_message(msg: MessageInner, reject_transaction_message: bool = False) -> bool:
    """SendMessageProcessor's test for "store this as a half message".

    ``TRAN_MSG`` parses as true (Java ``Boolean.parseBoolean``: case-insensitive "true"), except
    retries of old (< 4.6.1) clients, which carry TRAN_MSG from the committed original together with
    reconsumeTimes > 0 and a delay level. ``reject_transaction_message`` is BrokerConfig's switch; the
    caller answers NO_PERMISSION when this returns True while it is set.
    """
    flag = msg.properties.get(PROPERTY_TRANSACTION_PREPARED)
    if flag is None or flag.lower() != "true":
        return False
    return not (msg.reconsume_times > 0 and _java_parse_int(msg.properties.get(PROPERTY_DELAY_TIME_LEVEL)) > 0)


def parse_half_message_inner(msg: MessageInner) -> MessageInner:
    """The half form (Bridge.parseHalfMessageInner): RMQ_SYS_TRANS_HALF_TOPIC queue 0, tx bits 0.

    Adds ``__transactionId__`` (= UNIQ_KEY, when present), ``REAL_TOPIC``, ``REAL_QID``. The input is
    not modified.
    """
    props = dict(msg.properties)
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        props[PROPERTY_TRANSACTION_ID] = uniq
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return MessageInner(topic=RMQ_SYS_TRANS_HALF_TOPIC, body=msg.body, properties=props, queue_id=0,
                        flag=msg.flag, sys_flag=reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE),
                        born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
                        reconsume_times=msg.reconsume_times,
                        prepared_transaction_offset=msg.prepared_transaction_offset)


def renew_half_message_inner(msg: MessageExt, properties: dict[str, str] | None = None) -> MessageInner:
    """A stored half put back to the half queue unchanged (Bridge.renewHalfMessageInner)."""
    return MessageInner(topic=msg.topic, body=msg.body,
                        properties=dict(msg.properties if properties is None else properties),
                        queue_id=msg.queue_id, flag=msg.flag, sys_flag=msg.sys_flag,
                        born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host)


def renew_immunity_half_message_inner(msg: MessageExt) -> MessageInner:
    """Re-put of a half still inside its check-immunity time, remembering where the original half is."""
    inner = renew_half_message_inner(msg)
    if inner.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET) is None:
        inner.properties[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(msg.queue_offset)
    return inner


def end_message_transaction(half: MessageExt, commit_or_rollback: int = TRANSACTION_COMMIT_TYPE) -> MessageInner:
    """The committed message (EndTransactionProcessor.endMessageTransaction + processRequest).

    Real topic/queue, the half's body/flag/born time/hosts/reconsume times, tx bits = COMMIT,
    PREPARED TX OFFSET = the half's commitlog offset. REAL_TOPIC, REAL_QID and TRAN_MSG are removed
    from the map; Java serialized the map before removing them (spec §1.9 quirk) — omitting them is
    allowed and keeps the committed message from looking like a transactional send.
    Raises ValueError when the half lacks REAL_TOPIC / a numeric REAL_QID.
    """
    props = dict(half.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC, None)
    qid_text = props.pop(PROPERTY_REAL_QUEUE_ID, None)
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    if not topic:
        raise ValueError(f"half message at commitlog offset {half.commit_log_offset} has no REAL_TOPIC")
    if qid_text is None or not qid_text.isdigit():
        raise ValueError(f"half message at commitlog offset {half.commit_log_offset} has a bad REAL_QID "
                         f"{qid_text!r}")
    if commit_or_rollback not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        raise ValueError(f"commitOrRollback must be 8 or 12, got {commit_or_rollback}")
    return MessageInner(topic=topic, body=half.body, properties=props, queue_id=int(qid_text), flag=half.flag,
                        sys_flag=reset_transaction_value(half.sys_flag, commit_or_rollback),
                        born_timestamp=half.born_timestamp, born_host=half.born_host,
                        store_host=half.store_host, reconsume_times=half.reconsume_times,
                        prepared_transaction_offset=half.commit_log_offset)


def to_check_max_time_message(half: MessageExt) -> MessageInner:
    """A half checked too often, parked in TRANS_CHECK_MAX_TIME_TOPIC queue 0 (DefaultTransactionalMessageCheckListener)."""
    return MessageInner(topic=TRANS_CHECK_MAX_TIME_TOPIC, body=half.body, properties=dict(half.properties),
                        queue_id=0, flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
                        born_host=half.born_host, store_host=half.store_host,
                        reconsume_times=half.reconsume_times)


def get_immunity_time(check_immunity_time_str: str | None, transaction_timeout: int) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS as ms, never below transactionTimeOut (TransactionalMessageUtil)."""
    try:
        immunity = int(check_immunity_time_str) * 1000 if check_immunity_time_str is not None else 0
    except ValueError:
        immunity = 0
    return max(immunity, transaction_timeout)

