"""The one put pipeline every writer uses: the put hooks, then the store.

Why: client sends (single, exploded batch, BatchCQ inner batch), retries, pop revive, delay and
timer delivery and transaction commits must all see the same rewrites (DELAY -> SCHEDULE_TOPIC_XXXX,
TIMER_* -> rmq_sys_wheel_timer) and the same refusals, as RocketMQ's putMessageHookList runs inside
every store put. Before this module the Broker replaced ``sender.put_message`` from outside and
batches went straight to the store; now the sender and every service are given this pipeline's
``put`` and nothing is patched after construction.

A hook returns a replacement message or None; it refuses by raising ``hooks.PutMessageHookError``
(its ``status`` is the put status to answer), another ``ValueError`` (MESSAGE_ILLEGAL) or a
``BrokerError`` (passed through to the caller).
"""

from __future__ import annotations

from broker_core.store.codec.message import MessageInner
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.message_store import MessageStore

from .broker_config import SLAVE_ROLE
from .errors import BrokerError
from .hooks import PutMessageHook, PutMessageHookError


class PutPipeline:
    """``hooks`` is a live list: the Broker registers its own first; tests and plugins may append."""

    def __init__(self, store: MessageStore, hooks: list[PutMessageHook] | None = None,
                 read_only: bool = False) -> None:
        self.store = store
        self.hooks: list[PutMessageHook] = list(hooks or [])
        self.read_only = read_only

    def run_hooks(self, msg: MessageInner) -> MessageInner:
        """Each hook may return a replacement (None keeps the message); a refusal raises."""
        for hook in list(self.hooks):
            out = hook(msg)
            if out is not None:
                msg = out
        return msg

    def _refused(self) -> PutMessageResult | None:
        """A put this broker must not store at all. A slave (brokerRole=SLAVE, duplicationEnable off) takes
        no writes, as Apache's HookUtils.checkBeforePutMessage: its commitlog belongs to its master, and
        a message stored on it alone would never reach the master's consumers. The role is read at each
        put, so an updateBrokerConfig of brokerRole counts from the next one."""
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="the broker is open read-only")
        cfg = self.store.config
        if cfg.broker_role == SLAVE_ROLE and not cfg.duplication_enable:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    remark="message store is in slave mode, so putMessage is forbidden")
        return None

    def _hooked(self, msg: MessageInner) -> MessageInner | PutMessageResult:
        try:
            return self.run_hooks(msg)
        except BrokerError:
            raise
        except PutMessageHookError as e:
            status = PutMessageStatus.__members__.get(e.status, PutMessageStatus.MESSAGE_ILLEGAL)
            return PutMessageResult(status, remark=str(e))
        except ValueError as e:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=str(e))

    def put(self, msg: MessageInner) -> PutMessageResult:
        """One message: hooks, then ``store.put_message``. A hook's refusal is the returned status."""
        refused = self._refused()
        if refused is not None:
            return refused
        out = self._hooked(msg)
        if isinstance(out, PutMessageResult):
            return out
        return self.store.put_message(out)

    def put_batch(self, msgs: list[MessageInner]) -> PutMessageResult:
        """An exploded batch: every message through the hooks first, then one contiguous store write.
        One refusal refuses the whole batch, so nothing of it is stored."""
        refused = self._refused()
        if refused is not None:
            return refused
        hooked = []
        for msg in msgs:
            out = self._hooked(msg)
            if isinstance(out, PutMessageResult):
                return out
            hooked.append(out)
        return self.store.put_messages(hooked)

    def put_inner_batch(self, msg: MessageInner, inner_num: int) -> PutMessageResult:
        """A BatchCQ inner batch: one record holding ``inner_num`` messages, through the same hooks."""
        refused = self._refused()
        if refused is not None:
            return refused
        out = self._hooked(msg)
        if isinstance(out, PutMessageResult):
            return out
        return self.store.put_inner_batch(out, inner_num)
