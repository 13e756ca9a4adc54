"""TransactionalMessageService: half messages, end-transaction, op markers and the check-back scan.

Why this shape (RocketMQ 5 TransactionalMessageServiceImpl + Bridge + EndTransactionProcessor):
a half message is an ordinary record in RMQ_SYS_TRANS_HALF_TOPIC, so it is durable and invisible to
consumers of the real topic. Ending a transaction never rewrites anything: commit appends the real
message, and both commit and rollback append an op marker naming the half's queue offset. The check
scan walks the half queue from its committed offset, reads op markers to learn which halves are
done, and for each old-enough half without one re-appends the half (so the scan can move on and the
half stays durable) and asks the producer group for its decision. Every step is an append plus an
offset commit, so a restart at any point resumes correctly (at-least-once, as RocketMQ).

All time comes from the injected clock; ``check(now)`` and ``batch_send_op_message(now)`` are what
the background service calls, and what tests call directly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from broker_core.broker.transaction.check_offsets import OffsetStore, TransactionCheckOffsetTable
from broker_core.broker.transaction.end_transaction import (
    EndTransactionResult,
    EndTransactionStatus,
    result_of_final_put,
)
from broker_core.broker.transaction.op_message import OpBatcher, build_op_message, decode_op_body
from broker_core.broker.transaction.transaction_config import TransactionConfig
from broker_core.broker.transaction.transaction_metrics import TransactionMetrics
from broker_core.broker.transaction.transactional_message_util import (
    CID_RMQ_SYS_TRANS,
    REMOVE_TAG,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    end_message_transaction,
    get_immunity_time,
    parse_half_message_inner,
    renew_half_message_inner,
    renew_immunity_half_message_inner,
    to_check_max_time_message,
)
from broker_core.store.codec.hosts import Host
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.message_id import UniqKeyGenerator
from broker_core.store.codec.properties import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from broker_core.store.codec.sys_flag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.deleted_topics import deleted_since_stored
from broker_core.store.message_store import GetMessageResult, GetMessageStatus

if TYPE_CHECKING:
    from broker_core.store.message_store import MessageStore

log = logging.getLogger("rmqops.transaction")

PutMessage = Callable[[MessageInner], PutMessageResult]
# ``listener(half, producer_group)`` asks a live producer of the group for its decision; it returns False
# when it reached none (then the next listener is asked, see Broker.add_transaction_check_listener)
CheckListener = Callable[[MessageExt, str], bool | None]

OP_MSG_PULL_NUMS = 32
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
OP_DISPATCH_WAIT_S = 5.0  # how long a check waits for its op markers to reach the op queue
MAX_PROCESS_TIME_LIMIT_S = 60.0  # wall-clock bound of one queue's scan (RocketMQ MAX_PROCESS_TIME_LIMIT)
_ENDED_MEMORY = 65_536  # decisions remembered to keep duplicate END_TRANSACTIONs from re-committing
_NO_NEW = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE)
_TRAN_NAMES = {TRANSACTION_COMMIT_TYPE: "committed", TRANSACTION_ROLLBACK_TYPE: "rolled back"}


@dataclass
class CheckReport:
    """What one ``check`` pass did (for logs, tests and the dashboard)."""

    checked: list[MessageExt] = field(default_factory=list)  # halves re-put and sent to the listener
    discarded: list[MessageExt] = field(default_factory=list)
    half_offset: dict[int, int] = field(default_factory=dict)  # queue id -> committed half offset after
    op_offset: dict[int, int] = field(default_factory=dict)


class TransactionalMessageService:
    def __init__(self, store: MessageStore, put_message: PutMessage | None = None,
                 offsets: OffsetStore | None = None, config: TransactionConfig | None = None,
                 clock: Callable[[], int] | None = None, config_dir: str | Path | None = None,
                 store_host: Host = ("127.0.0.1", 10911), check_listener: CheckListener | None = None) -> None:
        """``put_message`` is the Broker's internal put (put hooks applied, as Java's store.putMessage);
        ``offsets`` its ConsumerOffsetManager (default: a table in config/transactionCheckOffset.json);
        ``check_listener(half, producer_group)`` asks a live producer of the group for its decision."""
        self.store = store
        self.put_message: PutMessage = put_message or store.put_message
        self.config = config or TransactionConfig()
        self.clock = clock or store.clock
        config_dir = Path(config_dir) if config_dir is not None else store.config_dir
        self._owns_offsets = offsets is None
        self.offsets: OffsetStore = offsets if offsets is not None else TransactionCheckOffsetTable(config_dir)
        self.metrics = TransactionMetrics(config_dir)
        self.store_host = store_host
        self.check_listener = check_listener
        # the limits of the config held now: the Broker replaces ``config`` on updateBrokerConfig
        self.op_batcher = OpBatcher(lambda: (self.config.transaction_op_msg_max_size,
                                             self.config.transaction_op_batch_interval))
        self._uniq = UniqKeyGenerator(store_host[0], self.clock)
        self._ended: OrderedDict[str, int] = OrderedDict()
        self._ended_lock = threading.Lock()
        self._check_lock = threading.Lock()
        self._op_write_lock = threading.Lock()
        self.op_batch_wakeup: Callable[[], None] | None = None  # set by the check service
        self._op_written_to = 0  # commitlog end offset of the newest op record written
        self._loaded = False

    def load(self) -> None:
        """Read the check offsets and metrics once; a later call (the check service's start) must not
        replace in-memory state that is newer than the files."""
        if self._loaded:
            return
        if isinstance(self.offsets, TransactionCheckOffsetTable) and self._owns_offsets:
            self.offsets.load()
        if self.config.enable_transaction_metrics:
            self.metrics.load()
        self._loaded = True

    # -- prepare ----------------------------------------------------------------------------------
    def prepare_message(self, msg: MessageInner) -> PutMessageResult:
        """Store ``msg`` as a half message (RMQ_SYS_TRANS_HALF_TOPIC queue 0); the input is not modified."""
        result = self.put_message(parse_half_message_inner(msg))
        if result.ok or result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT:
            self.metrics.counters.prepared += 1
            if self.config.enable_transaction_metrics:
                self.metrics.add_and_get(msg.topic, 1, self.clock())
        return result

    # -- end transaction --------------------------------------------------------------------------
    def end_transaction(self, producer_group: str, tran_state_table_offset: int, commit_log_offset: int,
                        msg_id: str | None, transaction_id: str | None, commit_or_rollback: int,
                        from_transaction_check: bool) -> EndTransactionResult:
        """Commit or roll back the half stored at ``commit_log_offset`` (EndTransactionProcessor).

        ``tran_state_table_offset`` is the half's queue offset and ``commit_log_offset`` its physical
        offset, as the producer got them from the send result or the check request. State 0 (unknown)
        and unknown values are IGNORED. Validation failures never write anything.
        """
        if commit_or_rollback not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if commit_or_rollback == TRANSACTION_NOT_TYPE:
                self.metrics.counters.unknown_answers += 1
                log.warning("producer group %s %s: transaction %s still unknown", producer_group,
                            "answered a check" if from_transaction_check else "ended", transaction_id)
            return EndTransactionResult(EndTransactionStatus.IGNORED,
                                        f"commitOrRollback {commit_or_rollback}: nothing to do")
        half, error = self._find_half(commit_log_offset)
        if half is None:
            return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR, error)
        if self._reject_commit_or_rollback(from_transaction_check, half):
            log.warning("end transaction of %s rejected: older than its check immunity time, wait for the check",
                        msg_id)
            return EndTransactionResult(EndTransactionStatus.ILLEGAL_OPERATION,
                                        "the half message is older than its CHECK_IMMUNITY_TIME_IN_SECONDS; "
                                        "it will be checked back")
        error = self._check_prepare_message(half, producer_group, tran_state_table_offset, commit_log_offset)
        if error:
            return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR, error)
        real_topic = half.get_property(PROPERTY_REAL_TOPIC)
        if commit_or_rollback == TRANSACTION_COMMIT_TYPE and self._drop_if_topic_deleted(half, "commit"):
            return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR,
                                        f"topic {real_topic} was deleted after the half message at commit log offset "
                                        f"{commit_log_offset} was stored; the message is not delivered")
        previous = self._remember_decision(half, commit_or_rollback)
        if previous is not None:
            # A second answer for the same transaction (client end + check answer, or a retried
            # one-way request): mark this half done, never commit twice.
            self.delete_prepare_message(half)
            if previous == commit_or_rollback:
                return EndTransactionResult(EndTransactionStatus.SUCCESS,
                                            f"transaction already {_TRAN_NAMES[previous]}")
            return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR,
                                        f"transaction already {_TRAN_NAMES[previous]}")
        if commit_or_rollback == TRANSACTION_ROLLBACK_TYPE:
            self.delete_prepare_message(half)
            self.metrics.counters.rollbacks += 1
            if self.config.enable_transaction_metrics:
                self.metrics.add_and_get(real_topic, -1, self.clock())
            return EndTransactionResult(EndTransactionStatus.SUCCESS)
        try:
            final = end_message_transaction(half, TRANSACTION_COMMIT_TYPE)
        except ValueError as e:
            self._forget_decision(half)
            return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR, str(e))
        try:
            put_result = self.put_message(final)
        except ValueError as e:  # a put hook refused it (e.g. an illegal timer property)
            self._forget_decision(half)
            return EndTransactionResult(EndTransactionStatus.MESSAGE_ILLEGAL, f"The message is illegal: {e}")
        result = result_of_final_put(put_result)
        if result.ok:
            self.delete_prepare_message(half)
            self.metrics.counters.commits += 1
            if self.config.enable_transaction_metrics:
                self.metrics.add_and_get(final.topic, -1, self.clock())
        else:
            self._forget_decision(half)
        return result

    def _drop_if_topic_deleted(self, half: MessageExt, why: str) -> bool:
        """True (the half is marked done, counted and logged) when its REAL_TOPIC was deleted after the
        half was stored. A commit, or a check-back's renewed copy, would put it into a topic made again
        under the name, whose queues must start empty (``deleted_topics``; RocketMQ has no such check)."""
        real_topic = half.get_property(PROPERTY_REAL_TOPIC)
        if not deleted_since_stored(self.store.dispatch_filter, real_topic, half.commit_log_offset):
            return False
        log.warning("half message %s at commit log offset %d not delivered (%s): its topic %s was deleted after "
                    "it was stored", half.uniq_key, half.commit_log_offset, why, real_topic)
        self.delete_prepare_message(half)
        self.metrics.counters.deleted_topic += 1
        if self.config.enable_transaction_metrics:
            self.metrics.add_and_get(real_topic, -1, self.clock())
        return True

    def _find_half(self, commit_log_offset: int) -> tuple[MessageExt | None, str]:
        if commit_log_offset < 0:
            return None, f"The commit log offset wrong: {commit_log_offset}"
        half = self.store.look_message_by_offset(commit_log_offset)
        if half is None:
            return None, "Find prepared transaction message failed"
        if half.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            return None, (f"Find prepared transaction message failed: the message at commit log offset "
                          f"{commit_log_offset} is in topic {half.topic}, not a half message")
        return half, ""

    def _reject_commit_or_rollback(self, from_transaction_check: bool, half: MessageExt) -> bool:
        if from_transaction_check:
            return False
        immunity = half.get_property(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not immunity:
            return False
        return self.clock() - half.born_timestamp > get_immunity_time(immunity, self.config.transaction_timeout)

    @staticmethod
    def _check_prepare_message(half: MessageExt, producer_group: str, queue_offset: int, phy: int) -> str:
        if half.get_property(PROPERTY_PRODUCER_GROUP) != producer_group:
            return "The producer group wrong"
        if half.queue_offset != queue_offset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != phy:
            return "The commit log offset wrong"
        return ""

    @staticmethod
    def _decision_key(half: MessageExt) -> str:
        uniq = half.get_property(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or f"@{half.commit_log_offset}"
        return f"{half.get_property(PROPERTY_PRODUCER_GROUP)}\x00{uniq}"

    def _remember_decision(self, half: MessageExt, tran_type: int) -> int | None:
        key = self._decision_key(half)
        with self._ended_lock:
            previous = self._ended.get(key)
            if previous is None:
                self._ended[key] = tran_type
                while len(self._ended) > _ENDED_MEMORY:
                    self._ended.popitem(last=False)
            return previous

    def _forget_decision(self, half: MessageExt) -> None:
        with self._ended_lock:
            self._ended.pop(self._decision_key(half), None)

    # -- op markers -------------------------------------------------------------------------------
    def delete_prepare_message(self, half: MessageExt) -> bool:
        """Queue the op marker for ``half`` (written in batches, see ``batch_send_op_message``)."""
        if self.op_batcher.add(half.queue_id, half.queue_offset, self.clock()) and self.op_batch_wakeup:
            self.op_batch_wakeup()
        return True

    def batch_send_op_message(self, now: int | None = None, force: bool = False) -> int:
        """Write the op bodies that are due (all of them with ``force``); returns records written."""
        now = self.clock() if now is None else now
        written = 0
        with self._op_write_lock:
            for queue_id, body in self.op_batcher.take_due(now, force):
                msg = build_op_message(queue_id, body, self.store_host, now, self._uniq.next_id())
                try:
                    result = self.put_message(msg)
                except Exception:
                    log.exception("transaction op message write failed")
                    result = None
                if result is None or not result.ok:
                    log.error("transaction op message write failed (%s); body %r kept for the next attempt",
                              result.status.value if result else "exception", body)
                    self.op_batcher.requeue(queue_id, body)
                    continue
                written += 1
                self._op_written_to = max(self._op_written_to, result.wrote_offset + result.wrote_bytes)
        self.metrics.counters.op_messages_written += written
        return written

    # -- check ------------------------------------------------------------------------------------
    def check(self, now: int | None = None) -> CheckReport:
        """One scan of every half queue (TransactionalMessageServiceImpl.check)."""
        if not self._loaded:
            self.load()
        report = CheckReport()
        to_resolve: list[MessageExt] = []
        with self._check_lock:
            # Ops still queued in memory, or written but not yet in the op queue (dispatch runs
            # behind the put), would make finished halves look unfinished and check them back.
            self.batch_send_op_message(force=True)
            if not self.store.wait_for_dispatch(OP_DISPATCH_WAIT_S, up_to=self._op_written_to):
                log.warning("transaction check: op markers up to commitlog offset %d not dispatched within "
                            "%.0f s; finished halves may be checked back", self._op_written_to, OP_DISPATCH_WAIT_S)
            for queue_id in self.store.queue_ids(RMQ_SYS_TRANS_HALF_TOPIC):
                start = self.clock() if now is None else now
                try:
                    self._check_queue(queue_id, start, report, to_resolve)
                except Exception:
                    log.exception("transaction check of half queue %d failed", queue_id)
            if self._owns_offsets:
                self.offsets.persist()  # type: ignore[attr-defined]
        # The listener runs after the scan (Java hands it to an executor), so a producer that
        # answers synchronously never re-enters the scan.
        for half in to_resolve:
            self.resolve_half_msg(half)
        return report

    def _fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self.offsets.query_offset(CID_RMQ_SYS_TRANS, topic, queue_id)
        if offset == -1:
            offset = self.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def _update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit_offset(CID_RMQ_SYS_TRANS, topic, queue_id, offset)

    def _check_queue(self, queue_id: int, start_time: int, report: CheckReport,
                     to_resolve: list[MessageExt]) -> None:
        cfg = self.config
        timeout = cfg.transaction_timeout
        half_offset = self._fetch_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
        op_offset = self._fetch_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            log.error("half queue %d: illegal offsets half=%d op=%d, skipped", queue_id, half_offset, op_offset)
            return
        remove_map: dict[int, int] = {}
        op_msg_map: dict[int, set[int]] = {}
        done_op_offset: list[int] = []
        pull = self._fill_op_remove_map(remove_map, queue_id, op_offset, half_offset, op_msg_map, done_op_offset)
        get_null_count = 1
        new_offset = i = half_offset
        next_op_offset = pull.next_begin_offset
        deadline = time.monotonic() + MAX_PROCESS_TIME_LIMIT_S
        while time.monotonic() < deadline:
            removed_op = remove_map.pop(i, None)
            if removed_op is not None:
                pending = op_msg_map.get(removed_op)
                if pending is not None:
                    pending.discard(i)
                    if not pending:
                        del op_msg_map[removed_op]
                        done_op_offset.append(removed_op)
                new_offset = i = i + 1
                continue
            got = self.store.get_messages(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, i, 1)
            msg = got.messages[0] if got.messages else None
            if msg is None:
                get_null_count += 1
                if get_null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL or got.status in _NO_NEW:
                    break
                log.info("half queue %d: offset %d unreadable (%s), moving to %d", queue_id, i,
                         got.status.value, got.next_begin_offset)
                new_offset = i = got.next_begin_offset
                continue
            if msg.store_timestamp >= start_time:
                # Stored during this scan (a copy just put back for a check, or a new half): look at it
                # next time. Before the discard test, unlike RocketMQ's order: dispatch here is
                # synchronous, so the copy made for the last allowed check was read at once and
                # discarded before the producer could answer it (a COMMIT then left it both delivered
                # and discarded); RocketMQ's background reput usually hides the copy from that scan.
                break
            if self._drop_if_topic_deleted(msg, "check"):
                new_offset = i = i + 1
                continue
            if self._need_discard(msg, cfg.transaction_check_max) or self._need_skip(msg, start_time):
                report.discarded.append(msg)
                self.resolve_discard_msg(msg)
                new_offset = i = i + 1
                continue
            age = start_time - msg.born_timestamp
            immunity = timeout
            immunity_str = msg.get_property(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_str is not None:
                immunity = _immunity_time(immunity_str, timeout)
                if age <= immunity and self._check_prepare_queue_offset(remove_map, done_op_offset, msg):
                    new_offset = i = i + 1
                    continue
            elif 0 <= age <= immunity:
                break  # too young; everything after it is younger still
            op_msgs = pull.messages if pull.status is GetMessageStatus.FOUND else None
            need_check = ((op_msgs is None and age > immunity)
                          or (bool(op_msgs) and op_msgs[-1].born_timestamp - start_time > timeout)
                          or age <= -1)
            if need_check:
                renewed = self._put_back_half_msg_queue(msg)
                if renewed is None:
                    break  # the store refuses writes: stop here, retry on the next check
                to_resolve.append(renewed)
                report.checked.append(renewed)
            else:
                next_op_offset = pull.next_begin_offset if pull is not None else next_op_offset
                pull = self._fill_op_remove_map(remove_map, queue_id, next_op_offset, half_offset, op_msg_map,
                                                done_op_offset)
                if pull.status is not GetMessageStatus.FOUND and not (age > immunity):
                    # No further op records and nothing to decide yet: Java sleeps and spins until its
                    # time limit; stopping here and resuming at the next check is equivalent.
                    break
                continue
            new_offset = i = i + 1
        if new_offset != half_offset:
            self._update_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _calculate_op_offset(done_op_offset, op_offset)
        if new_op_offset != op_offset:
            self._update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)
        report.half_offset[queue_id] = new_offset
        report.op_offset[queue_id] = new_op_offset

    def _fill_op_remove_map(self, remove_map: dict[int, int], queue_id: int, pull_offset: int, mini_offset: int,
                            op_msg_map: dict[int, set[int]], done_op_offset: list[int]) -> GetMessageResult:
        got = self.store.get_messages(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, pull_offset, OP_MSG_PULL_NUMS)
        if got.status is not GetMessageStatus.FOUND:
            if got.status not in _NO_NEW and got.status is not GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
                log.warning("op queue %d: offset %d illegal (%s), moving to %d", queue_id, pull_offset,
                            got.status.value, got.next_begin_offset)
                self._update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, got.next_begin_offset)
            return got
        for op in got.messages:
            if not op.body:
                log.error("op message without body at queue %d offset %d", queue_id, op.queue_offset)
                done_op_offset.append(op.queue_offset)
                continue
            named: set[int] = set()
            if op.tags == REMOVE_TAG:
                for offset in decode_op_body(op.body):
                    if offset < mini_offset:
                        continue
                    remove_map[offset] = op.queue_offset
                    named.add(offset)
            else:
                log.error("op message with illegal tag %r at queue %d offset %d", op.tags, queue_id, op.queue_offset)
            if named:
                op_msg_map[op.queue_offset] = named
            else:
                done_op_offset.append(op.queue_offset)
        return got

    @staticmethod
    def _need_discard(msg: MessageExt, transaction_check_max: int) -> bool:
        """Count this check in TRANSACTION_CHECK_TIMES (in the message's map) or say it is one too many."""
        props = msg.properties
        text = props.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        check_times = 1
        if text is not None:
            try:
                check_times = int(text)
            except ValueError:
                check_times = -1
            if check_times >= transaction_check_max:
                return True
            check_times += 1
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times)
        return False

    def _need_skip(self, msg: MessageExt, now: int) -> bool:
        if now - msg.born_timestamp > self.config.transaction_check_max_time_in_ms:
            log.info("half message %s is older than transactionCheckMaxTimeInMs; discarded", msg.msg_id)
            return True
        return False

    def _check_prepare_queue_offset(self, remove_map: dict[int, int], done_op_offset: list[int],
                                    msg: MessageExt) -> bool:
        """Within the immunity time: True means "handled, move on" (finished, or re-put for later)."""
        text = msg.get_property(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if text is None:
            return self._put_immunity_msg_back(msg)
        try:
            prepared = int(text)
        except ValueError:
            prepared = -1
        if prepared == -1:
            return False
        op = remove_map.pop(prepared, None)
        if op is not None:
            done_op_offset.append(op)
            return True
        return self._put_immunity_msg_back(msg)

    def _put_immunity_msg_back(self, msg: MessageExt) -> bool:
        result = self._safe_put(renew_immunity_half_message_inner(msg))
        return result is not None and result.ok

    def _put_back_half_msg_queue(self, msg: MessageExt) -> MessageExt | None:
        """Re-append the half (with its new check count); the stored copy, or None when the put failed."""
        result = self._safe_put(renew_half_message_inner(msg))
        if result is None or not result.ok:
            log.error("re-put of half message %s failed: %s", msg.msg_id, result.status.value if result else "exception")
            return None
        stored = self.store.look_message_by_offset(result.wrote_offset, result.wrote_bytes)
        if stored is None:  # cannot happen on a healthy store; fall back to the in-memory view
            msg.queue_offset, msg.commit_log_offset = result.queue_offset, result.wrote_offset
            return msg
        return stored

    def _safe_put(self, msg: MessageInner) -> PutMessageResult | None:
        try:
            return self.put_message(msg)
        except Exception:
            log.exception("transaction put to %s failed", msg.topic)
            return None

    def resolve_half_msg(self, half: MessageExt) -> None:
        """Ask the producer group for the decision on ``half`` (the re-put copy: its offsets are the
        ones the producer must answer with)."""
        group = half.get_property(PROPERTY_PRODUCER_GROUP) or ""
        log.info("check transaction: real_topic=%s uniqKey=%s offset=%d commitLogOffset=%d",
                 half.get_property(PROPERTY_REAL_TOPIC), half.uniq_key, half.queue_offset, half.commit_log_offset)
        if self.check_listener is None:
            log.warning("check transaction failed: no check listener for producer group %s", group)
            return
        self.metrics.counters.checks_sent += 1
        try:
            if self.check_listener(half, group) is False:
                log.info("no live producer of group %s to check the transaction at offset %d", group,
                         half.commit_log_offset)
        except Exception:
            log.exception("check listener failed for producer group %s", group)

    def resolve_discard_msg(self, half: MessageExt) -> None:
        """A half checked too often (or too old): park it in TRANS_CHECK_MAX_TIME_TOPIC."""
        log.error("half message %s (uniqKey %s) checked too many times or too old; moved to "
                  "TRANS_CHECK_MAX_TIME_TOPIC", half.msg_id, half.uniq_key)
        result = self._safe_put(to_check_max_time_message(half))
        if result is not None and result.ok:
            self.metrics.counters.discarded += 1
            if self.config.enable_transaction_metrics:
                self.metrics.add_and_get(half.get_property(PROPERTY_REAL_TOPIC), -1, self.clock())
        else:
            log.error("put of half message %s to TRANS_CHECK_MAX_TIME_TOPIC failed", half.msg_id)

    # -- figures / lifecycle ----------------------------------------------------------------------
    def half_messages_pending(self, topic: str | None = None) -> int:
        """Halves not yet committed/rolled back/discarded (TransactionMetrics; per real topic if given)."""
        return self.metrics.get_transaction_count(topic) if topic else self.metrics.half_messages_pending()

    def persist(self) -> None:
        if self._owns_offsets:
            self.offsets.persist()  # type: ignore[attr-defined]
        if self.config.enable_transaction_metrics:
            self.metrics.persist()

    def close(self) -> None:
        """Write every queued op marker and persist offsets and metrics."""
        self.batch_send_op_message(force=True)
        self.persist()


def _immunity_time(text: str, transaction_timeout: int) -> int:
    """The check scan's reading of CHECK_IMMUNITY_TIME_IN_SECONDS (unparsable -> transactionTimeOut)."""
    try:
        return int(text) * 1000
    except ValueError:
        return transaction_timeout


def _calculate_op_offset(done: list[int], old_offset: int) -> int:
    """The op queue may advance over a contiguous run of finished op records only."""
    new_offset = old_offset
    for offset in sorted(done):
        if offset == new_offset:
            new_offset += 1
        else:
            break
    return new_offset
