"""Broker: the typed facade over one store directory (topics, groups, send, pull, pop, retries,
delay/timer messages, transactions, offsets, stats, ACL).

Why: the remoting server, the gRPC server and mqadmin's LocalBrokerClient only translate requests into
these calls; keeping every rule here means a local ``mqadmin`` on a store directory and a running cluster
behave the same. Every message the broker writes itself (pop revive, retries, delay and timer
delivery, transaction commits and op markers) goes through ``put_message_internal``, so the put
hooks treat them exactly like client sends. Clock-driven services run on their own threads after
``start()``; ``tick()`` runs one deterministic round of all of them at the injected clock's time.
Read-only mode opens the store without the lock, starts nothing and never writes a byte, for
inspecting a store a running broker (even a Java one) owns; it also builds each service (pop, delay
levels, timers, transactions, ACL, stats, clients, send/pull) only when a call first needs it, so an
mqadmin query pays for the store, the topics and the config tables, not for a whole broker.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from broker_core.auth.config import SECRET_KEYS
from broker_core.auth.errors import AuthError
from broker_core.common.round_failures import RoundFailures
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.message_id import decode_offset_msg_id
from broker_core.store.codec.properties import PROPERTY_REAL_TOPIC
from broker_core.store.codec.sys_flag import INNER_BATCH_FLAG
from broker_core.store.commit_log import PutMessageResult, now_ms
from broker_core.store.config_file import ConfigWriteError
from broker_core.store.message_request_mode import MODES, MessageRequestMode, MessageRequestModeTable
from broker_core.store.message_store import GetMessageResult, GetMessageStatus, MessageStore
from broker_core.store.retention import disk_usage_ratio
from broker_core.store.subscription_group_config import SubscriptionGroupConfig, SubscriptionGroupTable
from broker_core.store.topic_config import DataVersion, TopicConfig

from .broker_config import SLAVE_ROLE, BrokerConfig
from .consumer_offset_manager import ConsumerOffsetManager
from .errors import (
    BrokerError,
    BrokerSystemError,
    InvalidParameterError,
    NoPermissionError,
    QueryNotFoundError,
    ServiceNotAvailableError,
    SubscriptionGroupNotExistError,
    SubscriptionParseFailedError,
    TopicNotExistError,
    config_written,
)
from .filter.calc_bit_map import CommitLogDispatcherCalcBitMap
from .filter.consumer_filter_manager import ConsumerFilterManager
from .pop.pop_config import CONSUME_INIT_MODE_MAX, MAX_POP_MSG_NUMS
from .subscription_group_manager import SubscriptionGroupManager
from .topic_manager import TopicManager
from .topic_validator import RETRY_GROUP_TOPIC_PREFIX, dlq_topic, is_retry_topic, retry_topic
from .wait_steps import WaitSteps, drive_async

# Start-up: a read-only Broker (mqadmin on a store directory) builds its services on first use, so a
# query by key never imports pop, timers, transactions, ACL evaluation, stats or the client registry.
# Their types are for the checker; each builder below imports its module.
if TYPE_CHECKING:
    from broker_core.auth.manager import AuthManager
    from broker_core.auth.model import Acl, User
    from broker_core.store.codec.batch import BatchItem
    from broker_core.store.consume_queue import CqUnit
    from broker_core.store.retention import RetentionReport
    from broker_core.store.schedule import ScheduleMessageService, ScheduleStats
    from broker_core.store.timer.timer_message_store import TickResult, TimerBacklog, TimerMessageStore
    from broker_core.store.verify import LostRecord, VerifyReport

    from .client_registry import (
        Channel,
        ClientChannelInfo,
        ClientRegistry,
        ConsumerData,
        ConsumerGroupInfo,
        HeartbeatResult,
    )
    from .hooks import PutMessageHook
    from .long_polling import PullRequestHoldService
    from .pop import AckResult, ChangeInvisibleResult, PopResult, PopService
    from .pull import PullResult, PullService
    from .put_pipeline import PutPipeline
    from .queue_lock import MessageQueue, RebalanceLockManager
    from .request_context import RequestContext
    from .reset_offset import OffsetResetListener, ResetOffsetPlanEntry, ResetOffsetService
    from .retention_warning import UnconsumedDropWarner
    from .retry import RetryService, SendBackResult
    from .route_info import BrokerRegistration
    from .send import MessageSender, SendResult
    from .stats import (
        BrokerConsumeStats,
        BrokerStats,
        GroupConsumeStats,
        GroupQueueStats,
        StatsWindow,
        TopicStats,
    )
    from .transaction import (
        CheckListener,
        CheckReport,
        EndTransactionResult,
        TransactionalMessageCheckService,
        TransactionalMessageService,
    )
    from .transaction.transaction_metrics import TransactionCounters

log = logging.getLogger("rmqops.broker")
T = TypeVar("T")

if TYPE_CHECKING:
    QueueRef = MessageQueue | tuple[str, int]
# Optional hooks part B (pop/FIFO) installs: (group, topic, queue_id) -> value.
InflightProvider = Callable[[str, str, int], int]
BlockedProvider = Callable[[str, str, int], bool]
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # the group Apache's mqadmin tools pull with
TCMT_QUEUE_NUMS = 1  # TRANS_CHECK_MAX_TIME_TOPIC queues (TopicConfigManager#createTopicOfTranCheckMaxTime)


@dataclass(slots=True)
class BrokerTickResult:
    """What one ``Broker.tick()`` did, per service."""

    timer: TickResult | None = None
    scheduled_delivered: int = 0
    revived: int = 0
    transaction_check: CheckReport | None = None


def _transaction_counters() -> TransactionCounters:
    from .transaction.transaction_metrics import TransactionCounters

    return TransactionCounters()


@dataclass(slots=True)
class TransactionMetricsView:
    """Half messages pending per real topic (persisted TransactionMetrics) and this process's counters."""

    half_pending: dict[str, int] = field(default_factory=dict)
    counters: TransactionCounters = field(default_factory=_transaction_counters)

    @property
    def half_pending_total(self) -> int:
        return sum(self.half_pending.values())


@dataclass(frozen=True, slots=True)
class StorePositions:
    """Where the commitlog is: its range, the flushed and dispatched positions, checkpoint times."""

    commit_log_min_offset: int
    commit_log_max_offset: int
    flushed_offset: int
    dispatch_behind_bytes: int
    physic_msg_timestamp: int
    logics_msg_timestamp: int


@dataclass(frozen=True, slots=True)
class TransactionBacklog:
    """Half/op queue entries the check service has not reached, and halves still awaiting a decision."""

    half_depth: int
    op_depth: int
    pending_check: int
    pending_by_topic: dict[str, int] = field(default_factory=dict)


class Broker:
    def __init__(self, store_root: str | Path, config: BrokerConfig | None = None,
                 clock: Callable[[], int] = now_ms, read_only: bool = False,
                 audit_log_path: Path | None = None) -> None:
        self.root = Path(store_root)
        self.config = config or BrokerConfig()
        self.config.store.store_path_root_dir = str(self.root)
        self.clock = clock
        self.read_only = read_only
        self.store = MessageStore(self.root, self.config.store, clock, read_only)
        self.topic_manager = TopicManager(self.store, self.config, clock, read_only)
        self.topic_manager.load_deleted_topics()
        self.store.dispatch_filter = self.topic_manager.dispatch_filter
        # SQL92 consumers and their bloom bits, loaded before the store opens: recovery re-dispatches
        # records, and their ext bitmaps are computed with the filters the broker had.
        cfg = self.config
        self.consumer_filter_manager = ConsumerFilterManager(
            self.store.config_dir, clock, cfg.max_error_rate_of_bloom_filter, cfg.expect_consumer_num_use_filter,
            cfg.filter_data_clean_time_span, read_only)
        self.consumer_filter_manager.load()
        cfg.store.bit_map_length_consume_queue_ext = self.consumer_filter_manager.bloom_filter.m
        self.store.filter_bit_map_hook = CommitLogDispatcherCalcBitMap(self.consumer_filter_manager,
                                                                       cfg.enable_calc_filter_bit_map)
        self.store.open()
        try:
            self.topic_manager.init()
            self.group_manager = SubscriptionGroupManager(SubscriptionGroupTable(self.store.config_dir), self.config,
                                                          clock, read_only)
            self.group_manager.init()
            self.offset_manager = ConsumerOffsetManager(self.store.config_dir, clock, read_only,
                                                        before_write=self.store.flush_commit_log)
            self.offset_manager.load()
            self.request_modes = MessageRequestModeTable(self.store.config_dir)
            self.request_modes.load()
        except BaseException:
            self.store.shutdown()
            raise
        self._audit_log_path = audit_log_path
        # Where a group's messages are in flight (pop) and whether its FIFO queue is blocked: the pop
        # service's answers, asked through these so that a read-only Broker loads it only when asked.
        self.inflight_provider: InflightProvider | None = self._pop_inflight
        self.fifo_blocked_provider: BlockedProvider | None = self._pop_fifo_blocked
        self.offset_reset_listeners: list[OffsetResetListener] = []
        self._flush_stop = threading.Event()
        self._flush_thread: threading.Thread | None = None
        # One updateBrokerConfig at a time, from reading the config to writing its file (Java's
        # Configuration.update holds its write lock as long): two at once each rewrote the file from
        # what they had read, and the last one dropped the other's keys.
        self._config_update_lock = threading.Lock()
        # The ACL keys, identity and ports updateBrokerConfig wrote to the config file for the next start,
        # where they differ from the running ones (which the broker keeps until then): see next_start.
        self._next_start: dict[str, str] = {}
        self._started = False
        self._closed = False
        if read_only:
            return  # every service below is built on first use (see "services")
        try:
            self._build_services()
        except BaseException:
            if self._built("auth_manager"):
                self.auth_manager.close()
            self.store.shutdown()
            raise

    def _build_services(self) -> None:
        """A writable Broker builds every service now, in dependency order: background threads start
        them in ``start()``, and a file one of them cannot load must stop the broker at start-up."""
        for name in ("auth_manager", "stats", "client_registry", "pull_hold_service", "put_pipeline", "sender",
                     "puller", "lock_manager", "reset_service", "retention_warner", "retry_service", "pop_service",
                     "schedule_service", "timer_store", "transaction_service", "transaction_check_service"):
            getattr(self, name)

    def _built(self, name: str) -> bool:
        """Whether the service ``name`` exists yet (a read-only Broker builds services on first use)."""
        return name in self.__dict__

    # -- services: built once, on first use (``cached_property``); a writable Broker builds all in __init__
    @cached_property
    def auth_manager(self) -> AuthManager:
        from broker_core.auth.audit import AuditLog
        from broker_core.auth.manager import AuthManager, default_audit_log_path

        auth_cfg = self.config.auth
        enabled = auth_cfg.authentication_enabled or auth_cfg.authorization_enabled
        if self.read_only:
            auth_cfg = dataclasses.replace(auth_cfg, init_authentication_user="",
                                           inner_client_authentication_credentials="",
                                           migrate_auth_from_v1_enabled=False)
            audit = AuditLog(None)
        else:
            audit = AuditLog(self._audit_log_path or default_audit_log_path()) if enabled else AuditLog(None)
        return AuthManager(self.store.config_dir, auth_cfg, self.clock, audit=audit)

    @cached_property
    def stats(self) -> BrokerStats:
        from .stats import BrokerStats

        return BrokerStats(self.clock)

    @cached_property
    def client_registry(self) -> ClientRegistry:
        from .client_registry import ClientRegistry

        registry = ClientRegistry(self.clock, notify_enabled=self._notify_consumer_ids_changed_enable)
        registry.consumer_group_removed_listeners.append(self._consumer_group_removed)
        return registry

    def _notify_consumer_ids_changed_enable(self, group: str) -> bool:
        """The group's notifyConsumerIdsChangedEnable, read at each change (an unknown group: True, as
        ClientManageProcessor's default)."""
        sgc = self.group_manager.get(group)
        return sgc is None or sgc.notify_consumer_ids_changed_enable

    @cached_property
    def pull_hold_service(self) -> PullRequestHoldService:
        from .long_polling import PullRequestHoldService

        service = PullRequestHoldService(self.store)
        self.store.arrival_listeners.append(service.notify_message_arriving)
        return service

    @cached_property
    def put_pipeline(self) -> PutPipeline:
        from .hooks import build_put_message_hooks
        from .put_pipeline import PutPipeline

        return PutPipeline(self.store, build_put_message_hooks(self.config.store, self.clock, self._timer_reject),
                           self.read_only)

    def _timer_reject(self, deliver_ms: int) -> bool:
        """The wheel's flow control for a new timer message (timerCongestNumEachSlot); no wheel, no limit."""
        timer = self.timer_store
        return timer is not None and timer.is_reject(deliver_ms)

    @property
    def put_message_hooks(self) -> list[PutMessageHook]:
        """The put hooks every write goes through (``put_pipeline``'s list: append to add one)."""
        return self.put_pipeline.hooks

    @cached_property
    def sender(self) -> MessageSender:
        from .send import MessageSender

        return MessageSender(self.store, self.topic_manager, self.group_manager, self.config, self.clock,
                             self.put_pipeline, on_put=self.stats.record_put,
                             prepare_transaction=self._prepare_transaction)

    @cached_property
    def puller(self) -> PullService:
        from .pull import PullService

        return PullService(self.store, self.topic_manager, self.group_manager, self.offset_manager, self.config,
                           self.pull_hold_service, on_get=self.stats.record_get,
                           consumer_filters=self.consumer_filter_manager,
                           online_consumers=self.client_registry.consumer_group)

    @cached_property
    def lock_manager(self) -> RebalanceLockManager:
        from .queue_lock import RebalanceLockManager

        return RebalanceLockManager(self.clock, self.config.rebalance_lock_max_live_time)

    @cached_property
    def reset_service(self) -> ResetOffsetService:
        from .reset_offset import ResetOffsetService

        return ResetOffsetService(self.store, self.topic_manager, self.group_manager, self.offset_manager,
                                  self.clock, self.offset_reset_listeners)

    @cached_property
    def retention_warner(self) -> UnconsumedDropWarner:
        """Retention deleting messages a group has not consumed: one WARNING naming them (the store
        reports the dropped queue ranges; the offsets to compare with are ours)."""
        from .retention_warning import UnconsumedDropWarner

        warner = UnconsumedDropWarner(self.offset_manager.which_group_by_topic, self.offset_manager.query_offset)
        self.store.retention.listeners.append(warner)
        return warner

    # Retry, pop, delay levels, timer wheel and transactions all write through put_message_internal.
    @cached_property
    def retry_service(self) -> RetryService:
        from .retry import RetryService

        return RetryService(self.put_message_internal, self.group_manager.find, self.topic_manager,
                            self.config.store_host)

    @cached_property
    def pop_service(self) -> PopService:
        from .pop.pop_service import PopService

        cfg = self.config
        service = PopService(self.store, self.offset_manager, self.group_manager.find, self.put_message_internal,
                             cfg.broker_name, cfg.broker_cluster_name, self.clock, self.store.config_dir,
                             topics=self.topic_manager, config=cfg.pop_config(), store_host=cfg.store_host,
                             consumer_filters=self.consumer_filter_manager, on_get=self.stats.record_get)
        service.load()
        self.offset_reset_listeners.append(service.on_offset_reset)
        return service

    def _pop_inflight(self, group: str, topic: str, queue_id: int) -> int:
        return self.pop_service.inflight(group, topic, queue_id)

    def _pop_fifo_blocked(self, group: str, topic: str, queue_id: int) -> bool:
        return self.pop_service.is_fifo_blocked(group, topic, queue_id)

    @cached_property
    def schedule_service(self) -> ScheduleMessageService:
        from broker_core.store.schedule import ScheduleMessageService

        service = ScheduleMessageService(self.store, self.put_message_internal, self.store.config_dir,
                                         clock=self.clock)
        service.load()
        return service

    @cached_property
    def timer_store(self) -> TimerMessageStore | None:
        """The timer wheel (None when timerWheelEnable is off). A read-only look at a store that never
        had a wheel must not create one."""
        cfg = self.config
        if not cfg.store.timer_wheel_enable or (self.read_only and not (self.root / "timerwheel").exists()):
            return None
        from broker_core.store.timer.timer_message_store import TimerMessageStore

        return TimerMessageStore(self.store, config=cfg.store, clock=self.clock,
                                 put_message_hook=self.put_message_internal)

    @cached_property
    def transaction_service(self) -> TransactionalMessageService:
        from .transaction.transactional_message_service import TransactionalMessageService

        cfg = self.config
        service = TransactionalMessageService(self.store, self._transaction_put, self.offset_manager,
                                              cfg.transaction_config(), self.clock, self.store.config_dir,
                                              cfg.store_host)
        service.load()
        return service

    @cached_property
    def transaction_check_service(self) -> TransactionalMessageCheckService:
        from .transaction.transactional_message_check_service import TransactionalMessageCheckService

        return TransactionalMessageCheckService(self.transaction_service, self.clock)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Broker:
        """Start store services and the periodic consumer-offset flush (flushConsumerOffsetInterval)."""
        if self.read_only or self._started:
            return self
        self.store.start()
        self.schedule_service.start()
        if self.timer_store is not None:
            self.timer_store.start()
        self.pop_service.start()
        self.transaction_check_service.start()
        self._flush_stop.clear()
        self._flush_thread = threading.Thread(target=self._flush_loop, name="ConsumerOffsetFlush", daemon=True)
        self._flush_thread.start()
        self._started = True
        return self

    def _flush_loop(self) -> None:
        interval = self.config.flush_consumer_offset_interval / 1000
        failures = RoundFailures(log, "periodic config file flush")  # offsets, filters and groups alike
        while not self._flush_stop.wait(interval):
            try:
                self.offset_manager.persist()
                self.consumer_filter_manager.persist()
                self.group_manager.persist_pending()
            except Exception as e:
                failures.failed(e)
            else:
                failures.succeeded()

    def persist(self) -> None:
        """Write every changed config file now (atomic writes)."""
        if self.read_only:
            return
        for write in self._config_writers():
            write()

    def _config_writers(self) -> tuple[Callable[[], object], ...]:
        return (self.consumer_filter_manager.persist, self.pop_service.persist, self.schedule_service.persist,
                self.transaction_service.persist, self.offset_manager.persist, self.group_manager.persist_pending)

    def _shutdown_services(self) -> list[str]:
        """Stop every service that writes, newest work first; each persists its own files on the way out.
        Returns what failed (one line each)."""
        if self.read_only:  # only what was used was built
            if self._built("pop_service"):
                self.pop_service.long_polling.shutdown()
            if self._built("timer_store") and self.timer_store is not None:
                self.timer_store.shutdown(flush=False)
            return []
        failed: list[str] = []
        for stop in (self.transaction_check_service.shutdown, self.pop_service.shutdown,
                     self.schedule_service.shutdown,
                     self.timer_store.shutdown if self.timer_store is not None else None):
            if stop is None:
                continue
            try:
                stop()
            except OSError as e:  # a full disk: one line naming the file, not a traceback
                log.error("broker service shutdown: %s", e)
                failed.append(str(e))
            except Exception as e:
                log.exception("broker service shutdown failed")
                failed.append(f"{getattr(stop, '__qualname__', stop)}: {e!r}")
        return failed

    def _save_config_files(self) -> list[str]:
        """Write every config file a writer owns; returns what could not be written (one line each,
        naming the file). Each one: a file the disk cannot take stops no other."""
        failed: list[str] = []
        for write in self._config_writers():
            try:
                write()
            except OSError as e:
                log.error("broker shutdown: %s", e)
                failed.append(str(e))
        return failed

    def tick(self) -> BrokerTickResult:
        """One round of every clock-driven service at ``clock()``: timer wheel, delay levels, pop revive,
        transaction op markers / check-back. Deterministic; what tests call instead of sleeping."""
        self._require_writable()
        out = BrokerTickResult()
        if self.timer_store is not None:
            out.timer = self.timer_store.tick()
        out.scheduled_delivered = self.schedule_service.tick()
        out.revived = self.pop_service.tick()
        out.transaction_check = self.transaction_check_service.tick()
        return out

    def announce_namesrv(self, addrs: list[str]) -> None:
        """The name servers this broker registers with, noted beside the store lock: an mqadmin refused
        the store can then name the right ``-n`` (a port chosen at start, a remote name server)."""
        self.store.announce_holder(namesrv=";".join(addrs))

    # What the last shutdown could not save, one line each naming the file; empty after a clean one.
    unsaved_at_shutdown: tuple[str, ...] = ()

    def shutdown(self) -> None:
        """Stop the services, save every config file, close the store.

        A file that could not be saved (a full disk: the consumer offsets committed since the last
        flush are lost) is logged and listed in ``unsaved_at_shutdown``, and the store's ``abort`` file
        is kept: the shutdown was not clean, the next start must know it (its recovery re-checks the
        commitlog, which costs time only), and mqbroker must not say it was.
        """
        if self._closed:
            return
        self._closed = True
        self._flush_stop.set()
        if self._flush_thread is not None:
            self._flush_thread.join(timeout=10)
        if self._built("pull_hold_service"):
            self.pull_hold_service.shutdown()
        unsaved: list[str] = []
        try:
            unsaved += self._shutdown_services()
            if not self.read_only:
                unsaved += self._save_config_files()
        finally:
            if self._built("auth_manager"):
                self.auth_manager.close()
            try:
                self.store.shutdown(keep_abort=bool(unsaved))
            except OSError as e:  # the commitlog could not be flushed (EIO): abort stays, recovery follows
                log.error("broker shutdown: store: %s", e)
                unsaved.append(str(e))
            self.unsaved_at_shutdown = tuple(unsaved)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- ACL ---------------------------------------------------------------------------------------
    def _authorize(self, auth: RequestContext | None, request: str | None, *, topic: str | None = None,
                   group: str | None = None, topics: Iterable[str] = (),
                   subscriptions: dict[str, list[str]] | None = None) -> None:
        """Authenticate and authorize a remote caller; in-process callers (auth=None) are trusted.
        ``request`` None authenticates only."""
        if auth is None:
            return
        cfg = self.auth_manager.config
        if not (cfg.authentication_enabled or cfg.authorization_enabled):
            return
        try:
            subject = auth.subject
            if auth.authentication is not None:
                user = self.auth_manager.authenticate(auth.authentication)
                if user is not None and subject is None:
                    subject = user.username
            elif cfg.authentication_enabled and subject is None:
                raise NoPermissionError("the request carries no credentials (AccessKey/Signature)")
            if subject is not None and not subject.startswith("User:"):
                subject = "User:" + subject
            if request is None:
                return
            self.auth_manager.authorize_request(subject, auth.source_ip, request,
                                                request_code=auth.request_code, channel_id=auth.channel_id,
                                                topic=topic, group=group, topics=topics,
                                                subscriptions=subscriptions)
        except AuthError as e:
            raise NoPermissionError(e.message, code=e.code) from e

    def authenticate(self, auth: RequestContext) -> RequestContext:
        """A protocol pipeline's first step (spec D.2): verify the request's signature once; the returned
        context names the user and carries no signature, so each operation only authorizes it."""
        if auth.authentication is None:
            return auth
        try:
            user = self.auth_manager.authenticate(auth.authentication)
        except AuthError as e:
            raise NoPermissionError(e.remark, code=e.code) from e
        subject = user.username if user is not None else auth.subject or auth.authentication.username
        return dataclasses.replace(auth, subject=subject, authentication=None)

    def authorize_grpc(self, auth: RequestContext, rpc: str, *, topic: str | None = None,
                       group: str | None = None, is_consumer: bool = False,
                       publishing_topics: Iterable[str] = (), subscription_topics: Iterable[str] = ()) -> None:
        """Authenticate a gRPC v2 call and demand what its RPC needs (grpc-v2 spec 2.1/2.2).

        Why separate from ``_authorize``: gRPC RPCs do not map one-to-one onto remoting request
        codes (ChangeInvisibleDuration demands only the group; QueryRoute PUB or SUB), so the gRPC
        adapter asks once here and then calls the Broker as a trusted in-process caller."""
        from broker_core.auth.authorization import AuthorizationContext, checks_for_grpc

        cfg = self.auth_manager.config
        if not (cfg.authentication_enabled or cfg.authorization_enabled):
            return
        try:
            subject = auth.subject
            if cfg.authentication_enabled:
                if auth.authentication is None:
                    raise NoPermissionError("the request carries no credentials (authorization header)")
                user = self.auth_manager.authenticate(auth.authentication)
                if user is not None:
                    subject = user.username
            if not cfg.authorization_enabled:
                return
            if subject is not None and not subject.startswith("User:"):
                subject = "User:" + subject
            for resource, actions in checks_for_grpc(rpc, topic=topic, group=group, is_consumer=is_consumer,
                                                     publishing_topics=publishing_topics,
                                                     subscription_topics=subscription_topics):
                self.auth_manager.authorize(AuthorizationContext(subject, resource, actions, auth.source_ip,
                                                                 auth.request_code or rpc, auth.channel_id))
        except AuthError as e:
            raise NoPermissionError(e.message, code=e.code) from e

    @property
    def is_slave(self) -> bool:
        """brokerRole=SLAVE (read live: updateBrokerConfig may change it). A slave takes no message puts
        (PutPipeline), ends no transactions and resets no offsets server-side, as Apache's."""
        return self.config.store.broker_role == SLAVE_ROLE

    def _require_writable(self) -> None:
        if self.read_only:
            raise ServiceNotAvailableError("the broker is open read-only (inspection mode); nothing can change")
        if self._closed:  # a request a server thread was still running when the broker shut down
            raise ServiceNotAvailableError("the broker is shut down")

    # -- topics ------------------------------------------------------------------------------------
    def create_or_update_topic(self, topic: str, read_queue_nums: int | None = None,
                               write_queue_nums: int | None = None, perm: int = 6, order: bool = False,
                               attributes: str | dict[str, str] | None = None, topic_filter_type: str = "SINGLE_TAG",
                               topic_sys_flag: int = 0, auth: RequestContext | None = None) -> TopicConfig:
        self._authorize(auth, "UPDATE_AND_CREATE_TOPIC", topic=topic)
        self._require_writable()
        return self.topic_manager.create_or_update(topic, read_queue_nums, write_queue_nums, perm, order, attributes,
                                                   topic_filter_type, topic_sys_flag)

    def create_or_update_topic_list(self, configs: Sequence[TopicConfig],
                                    auth: RequestContext | None = None) -> list[TopicConfig]:
        """UPDATE_AND_CREATE_TOPIC_LIST (mqadmin updateTopicList): every config or none (see
        TopicManager.create_or_update_list). Topic [Create] on each, as UPDATE_AND_CREATE_TOPIC asks
        (Apache's broker asks nothing for the list: see authorization.checks_for_request)."""
        self._authorize(auth, "UPDATE_AND_CREATE_TOPIC_LIST", topics=[c.topic_name for c in configs])
        self._require_writable()
        return self.topic_manager.create_or_update_list(configs)

    def delete_topic(self, topic: str, auth: RequestContext | None = None) -> bool:
        """Config, queues and offsets go; so do the POP retry topics of groups that consumed it."""
        self._authorize(auth, "DELETE_TOPIC_IN_BROKER", topic=topic)
        self._require_writable()
        to_clean = [topic]
        if self.config.clear_retry_topic_when_delete_topic:
            for group in sorted(self.offset_manager.which_group_by_topic(topic)):
                for pop_retry in (f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}", f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"):
                    if self.topic_manager.get(pop_retry) is not None:
                        to_clean.append(pop_retry)
        existed = False
        for i, t in enumerate(to_clean):
            # Its pop state off the disk first: a power cut after the deletion kept the old FIFO batches
            # in consumerOrderInfo.json, blocking the topic made again; once more after, in memory, for
            # a pop that ran in between.
            with config_written(f"topic {t} was not deleted"):
                self.pop_service.forget_topic(t, persist=True)
            existed |= self.topic_manager.delete(t, system=i > 0)
            self.offset_manager.clean_offset_by_topic(t)
            self.pop_service.forget_topic(t)
        self._write_offsets_after_deleting(f"topic {topic}")
        return existed

    def _write_offsets_after_deleting(self, what: str) -> None:
        """consumerOffset.json without the offsets a deletion dropped. The deletion stands when it
        cannot be written (a full disk): the offset flush writes it when it can, and the caller says so."""
        try:
            self.offset_manager.persist(force=True)
        except ConfigWriteError as e:
            raise BrokerSystemError(f"{what} was deleted, but {e}: its consumer offsets are dropped in memory "
                                    "and written at the next offset flush") from e

    # -- store maintenance (mqadmin cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic) ------------
    def _maintain(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except PermissionError:
            raise ServiceNotAvailableError("the broker is open read-only (inspection mode); nothing can change") from None

    def clean_expired_consume_queues(self, auth: RequestContext | None = None) -> list[tuple[str, int]]:
        """CLEAN_EXPIRED_CONSUMEQUEUE: queues left pointing only at deleted commitlog files go, those of
        system topics excepted (TopicValidator.isSystemTopic, as RocketMQ 5's cleanExpired)."""
        self._authorize(auth, "CLEAN_EXPIRED_CONSUMEQUEUE")
        self._require_writable()
        return self._maintain(lambda: self.store.clean_expired_consume_queues(keep=self.topic_manager.is_system_topic))

    def delete_expired_commit_log(self, auth: RequestContext | None = None) -> RetentionReport:
        """DELETE_EXPIRED_COMMITLOG (executeDeleteFilesManually): retention now, whatever deleteWhen says,
        and in the clean service's next 19 runs too (deleteFileBatchMax files each); only files older
        than fileReservedTime go (or the oldest when the disk is over the forcible ratio)."""
        self._authorize(auth, "DELETE_EXPIRED_COMMITLOG")
        self._require_writable()
        return self._maintain(lambda: self.store.delete_expired_files(force=True))

    def clean_unused_topics(self, auth: RequestContext | None = None) -> list[str]:
        """CLEAN_UNUSED_TOPIC: queues of topics this broker has no config for go (system topics stay)."""
        self._authorize(auth, "CLEAN_UNUSED_TOPIC")
        self._require_writable()
        return self._maintain(self.topic_manager.clean_unused)

    def set_message_request_mode(self, topic: str, group: str, mode: str, pop_share_queue_num: int = 0,
                                 auth: RequestContext | None = None) -> MessageRequestMode:
        """SET_MESSAGE_REQUEST_MODE (mqadmin setConsumeMode): PULL or POP for ``group`` on ``topic``,
        kept in config/messageRequestMode.json. Retry topics are refused, as Java refuses them.

        As Apache's QueryAssignmentProcessor, the topic must exist here and the group is
        findSubscriptionGroupConfig's: made when autoCreateSubscriptionGroup is on, else (or when its
        name is invalid) SUBSCRIPTION_GROUP_NOT_EXIST. Why: a typo'd topic or group was saved as given,
        a mode no consumer would ever be assigned."""
        self._authorize(auth, "SET_MESSAGE_REQUEST_MODE")
        self._require_writable()
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise BrokerSystemError("retry topic is not allowed to set mode")
        if mode not in MODES:
            raise BrokerSystemError(f"mode {mode!r} is not PULL or POP")
        if self.topic_manager.get(topic) is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        try:
            self.group_manager.find(group)
        except InvalidParameterError as e:  # Apache's findSubscriptionGroupConfig answers null for it
            raise SubscriptionGroupNotExistError(f"subscription group [{group}] does not exist: {e}") from None
        entry = MessageRequestMode(topic, group, mode, pop_share_queue_num)
        with config_written(f"the consume mode of group {group} on topic {topic} did not change"):
            self.request_modes.put(entry)
        return entry

    def message_request_mode(self, topic: str, group: str) -> MessageRequestMode | None:
        return self.request_modes.get(topic, group)

    def get_topic(self, topic: str, auth: RequestContext | None = None) -> TopicConfig | None:
        self._authorize(auth, "GET_TOPIC_CONFIG", topic=topic)
        return self.topic_manager.get(topic)

    def list_topics(self, auth: RequestContext | None = None) -> list[TopicConfig]:
        self._authorize(auth, "GET_ALL_TOPIC_CONFIG")
        return self.topic_manager.list()

    # -- broker config (updateBrokerConfig) ---------------------------------------------------------
    def update_broker_config(self, props: dict[str, str], auth: RequestContext | None = None,
                             persist_to: Path | None = None) -> list[str]:
        """UPDATE_BROKER_CONFIG: set keys on the live config objects (broker, store and auth keys) and
        write them to ``persist_to``, by default the broker's brokerConfigPath (the file ``mqbroker -c``
        started it with), so a restart keeps them. Black-listed keys are refused and unknown keys
        ignored, as RocketMQ's Configuration does; a value that does not parse refuses the whole update.
        The broker's identity and ports (START_ONLY_KEYS) and the ACL keys only go to the file, for the
        next start: without one they are refused. Returns the keys applied."""
        from .config_update import (
            AUTH_KEYS,
            START_ONLY_KEYS,
            apply_in_place,
            black_list,
            persist_changes,
            start_only_refusal,
            updated_config,
        )

        self._authorize(auth, "UPDATE_BROKER_CONFIG")
        self._require_writable()
        if black_list(self.config.properties.get("configBlackList", "")) & props.keys():
            raise NoPermissionError("Can not update config in black list.")
        persist_to = persist_to if persist_to is not None else self.config.broker_config_path
        if AUTH_KEYS & props.keys() and persist_to is not None:
            # written for the next start: who may switch ACL off there is who may administer ACLs
            # (UPDATE_BROKER_CONFIG itself needs authentication only, as RocketMQ's)
            self._authorize(auth, "AUTH_UPDATE_ACL")
        with self._config_update_lock:
            known = self.config.to_properties()
            changes = {k: str(v) for k, v in props.items() if k in known}
            new = updated_config(self.config, changes, self.root)  # first: a bad value is named as such
            refusal = start_only_refusal(known, changes) if persist_to is None else None
            if refusal is not None:
                raise NoPermissionError(refusal)
            if persist_to is not None and changes:
                try:
                    persist_changes(persist_to, changes)
                except OSError as e:
                    raise BrokerSystemError(f"cannot write broker config {persist_to}: {e.strerror}") from None
            # ACL keys, the identity and the ports written to the file take effect at the next start
            apply_in_place(self.config, new, [k for k in changes if k not in AUTH_KEYS | START_ONLY_KEYS])
            if persist_to is not None:
                written = new.to_properties()
                for key in (AUTH_KEYS | START_ONLY_KEYS) & changes.keys():
                    if written.get(key) == known.get(key):
                        self._next_start.pop(key, None)  # the running value again: nothing pending
                    else:
                        self._next_start[key] = written.get(key, changes[key])
            if self._built("transaction_service"):  # it reads transactionCheckMax/TimeOut/... from its own copy
                self.transaction_service.config = self.config.transaction_config()
            if self._built("pop_service"):  # enableRetryTopicV2, popFromRetryProbability, reviveInterval, ...
                self.pop_service.config = self.config.pop_config()
            if self._built("lock_manager"):  # it was given rebalanceLockMaxLiveTime when built
                self.lock_manager.lock_max_live_time_ms = self.config.rebalance_lock_max_live_time
        if "brokerPermission" in changes:
            # the routes advertise topic perm & brokerPermission: a new DataVersion makes the name
            # server take the next registration (Java's AdminBrokerProcessor does the same)
            self.topic_manager.bump_data_version()
        return sorted(changes)

    # -- subscription groups -----------------------------------------------------------------------
    def create_or_update_subscription_group(self, group: str | SubscriptionGroupConfig,
                                            auth: RequestContext | None = None, **settings: object
                                            ) -> SubscriptionGroupConfig:
        self._authorize(auth, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP")
        self._require_writable()
        return self.group_manager.create_or_update(group, **settings)

    def create_or_update_subscription_group_list(self, configs: Sequence[SubscriptionGroupConfig],
                                                 auth: RequestContext | None = None) -> list[SubscriptionGroupConfig]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (mqadmin updateSubGroupList): every config or none.
        Authentication only, as UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (Apache has no header for either)."""
        self._authorize(auth, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST")
        self._require_writable()
        return self.group_manager.create_or_update_list(configs)

    def delete_subscription_group(self, group: str, clean_offset: bool = False,
                                  auth: RequestContext | None = None) -> bool:
        self._authorize(auth, "DELETE_SUBSCRIPTIONGROUP", group=group)
        self._require_writable()
        existed = self.group_manager.delete(group)
        if clean_offset:
            self.offset_manager.remove_offset(group)
            self._write_offsets_after_deleting(f"subscription group {group}")
        return existed

    def get_subscription_group(self, group: str, auth: RequestContext | None = None) -> SubscriptionGroupConfig | None:
        """GET_SUBSCRIPTIONGROUP_CONFIG: Group [Get] (only the whole table is authentication-only)."""
        self._authorize(auth, "GET_SUBSCRIPTIONGROUP_CONFIG", group=group)
        return self.group_manager.get(group)

    def list_subscription_groups(self, auth: RequestContext | None = None) -> list[SubscriptionGroupConfig]:
        self._authorize(auth, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG")
        return self.group_manager.list()

    # -- produce -----------------------------------------------------------------------------------
    def send_message(self, topic: str, body: bytes, properties: dict[str, str] | None = None, *,
                     queue_id: int | None = None, message_group: str | None = None, flag: int = 0,
                     born_host: tuple[str, int] = ("127.0.0.1", 0), born_timestamp: int | None = None,
                     sys_flag: int = 0, reconsume_times: int = 0, producer_group: str | None = None,
                     default_topic: str = "TBW102", default_topic_queue_nums: int | None = None,
                     auth: RequestContext | None = None, max_reconsume_times: int | None = None) -> SendResult:
        """SEND_MESSAGE. To ``%RETRY%group`` with ``reconsume_times`` over ``max_reconsume_times`` (None:
        the group's retryMaxTimes), or while the group holds an orderly queue lock, it goes to the DLQ."""
        self._authorize(auth, "SEND_MESSAGE", topic=topic, group=producer_group)
        self._require_writable()
        return self.sender.send_message(topic, body, properties, queue_id=queue_id, message_group=message_group,
                                        flag=flag, born_host=born_host, born_timestamp=born_timestamp,
                                        sys_flag=sys_flag, reconsume_times=reconsume_times,
                                        default_topic=default_topic,
                                        default_topic_queue_nums=default_topic_queue_nums,
                                        max_reconsume_times=max_reconsume_times,
                                        group_locked=self._orderly_group_locked)

    def _orderly_group_locked(self, group: str) -> bool:
        """RebalanceLockManager#isLockAllExpired negated: an orderly consumer of ``group`` holds a queue lock."""
        return not self.lock_manager.is_lock_all_expired(group)

    def send_batch(self, topic: str, messages: Sequence[BatchItem], properties: dict[str, str] | None = None, *,
                   queue_id: int | None = None, message_group: str | None = None,
                   born_host: tuple[str, int] = ("127.0.0.1", 0), born_timestamp: int | None = None,
                   sys_flag: int = 0, producer_group: str | None = None, default_topic: str = "TBW102",
                   default_topic_queue_nums: int | None = None, auth: RequestContext | None = None) -> SendResult:
        self._authorize(auth, "SEND_BATCH_MESSAGE", topic=topic, group=producer_group)
        self._require_writable()
        return self.sender.send_batch(topic, messages, properties, queue_id=queue_id, message_group=message_group,
                                      born_host=born_host, born_timestamp=born_timestamp, sys_flag=sys_flag,
                                      default_topic=default_topic, default_topic_queue_nums=default_topic_queue_nums)

    # -- internal writes ---------------------------------------------------------------------------
    def put_message_internal(self, msg: MessageInner) -> PutMessageResult:
        """The put every broker-side writer uses: ``put_pipeline`` (the put hooks: DELAY ->
        SCHEDULE_TOPIC_XXXX, TIMER_* -> rmq_sys_wheel_timer; then the store). A hook's refusal is
        returned as its put status, as the Java store answers (WHEEL_TIMER_NOT_ENABLE, MESSAGE_ILLEGAL)."""
        return self.put_pipeline.put(msg)

    def _prepare_transaction(self, msg: MessageInner) -> PutMessageResult:
        """TRAN_MSG client sends become half messages (through the same pipeline)."""
        return self.transaction_service.prepare_message(msg)

    def _transaction_put(self, msg: MessageInner) -> PutMessageResult:
        """Discarded halves go to TRANS_CHECK_MAX_TIME_TOPIC, which exists only once the first one does."""
        from .retry import PERM_READ_WRITE
        from .transaction.transactional_message_util import TRANS_CHECK_MAX_TIME_TOPIC

        if msg.topic == TRANS_CHECK_MAX_TIME_TOPIC and self.topic_manager.get(TRANS_CHECK_MAX_TIME_TOPIC) is None:
            self.topic_manager.create_if_absent(TopicConfig(TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS,
                                                            TCMT_QUEUE_NUMS, PERM_READ_WRITE))
        return self.put_message_internal(msg)

    # -- transactions ------------------------------------------------------------------------------
    def end_transaction(self, producer_group: str, tran_state_table_offset: int, commit_log_offset: int,
                        commit_or_rollback: int, *, msg_id: str | None = None, transaction_id: str | None = None,
                        from_transaction_check: bool = False, topic: str | None = None,
                        auth: RequestContext | None = None) -> EndTransactionResult:
        """END_TRANSACTION: commit (8) or roll back (12) the half at ``commit_log_offset`` (the send
        result's offset msgId) whose queue offset is ``tran_state_table_offset``; 0 is IGNORED.

        Authorization is against the half's real topic (a caller cannot name another topic to end a
        transaction it may not publish to); a ``topic`` that contradicts the half is refused."""
        half = self.store.look_message_by_offset(commit_log_offset) if commit_log_offset >= 0 else None
        real = half.get_property(PROPERTY_REAL_TOPIC) if half is not None else None
        self._authorize(auth, "END_TRANSACTION", topic=real or topic)
        if self.is_slave:  # EndTransactionProcessor: a slave neither commits nor rolls back (no put, no op)
            from .transaction.end_transaction import EndTransactionResult, EndTransactionStatus

            return EndTransactionResult(EndTransactionStatus.SLAVE_NOT_AVAILABLE,
                                        "Message store is slave mode, so end transaction is forbidden.")
        if topic and real and topic != real:
            raise InvalidParameterError(f"the transaction at commit log offset {commit_log_offset} belongs to "
                                        f"topic {real}, not {topic}")
        self._require_writable()
        return self.transaction_service.end_transaction(producer_group, tran_state_table_offset, commit_log_offset,
                                                        msg_id, transaction_id, commit_or_rollback,
                                                        from_transaction_check)

    def set_transaction_check_listener(self, listener: CheckListener | None) -> None:
        """Who asks a producer group about an unfinished half: ``listener(half, producer_group)``. The
        network layers install one that sends CHECK_TRANSACTION_STATE to a live producer; it answers
        with ``end_transaction(..., from_transaction_check=True)``."""
        self.transaction_service.check_listener = listener

    def add_transaction_check_listener(self, listener: CheckListener) -> None:
        """Add a front end's check listener (remoting, gRPC) to those installed: a half is checked by the
        first that reaches a live producer of its group (returns anything but False). Why a chain: each
        front end reaches only its own producers, and either may be started first; a second setting
        replaced the first, so gRPC producers were never asked and their halves were discarded."""
        previous = self.transaction_service.check_listener
        if previous is None:
            self.transaction_service.check_listener = listener
            return

        def check(half: MessageExt, producer_group: str) -> bool | None:
            reached = listener(half, producer_group)
            return previous(half, producer_group) if reached is False else reached

        self.transaction_service.check_listener = check

    def transaction_metrics(self, auth: RequestContext | None = None) -> TransactionMetricsView:
        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        metrics = self.transaction_service.metrics
        return TransactionMetricsView({t: m.count for t, m in sorted(metrics.transaction_count.items())},
                                      dataclasses.replace(metrics.counters))

    # -- 5.x pop -----------------------------------------------------------------------------------
    def pop_message(self, group: str, topic: str, queue_id: int | None = None, max_msgs: int = MAX_POP_MSG_NUMS,
                    invisible_time_ms: int = 60_000, expression_type: str | None = "TAG",
                    expression: str | None = "*", *, attempt_id: str | None = None, order: bool | None = None,
                    poll_time_ms: int = 0, init_mode: int = CONSUME_INIT_MODE_MAX,
                    auth: RequestContext | None = None) -> PopResult:
        """POP_MESSAGE; with ``poll_time_ms`` it parks until messages arrive (call from a worker thread)."""
        self._authorize(auth, "POP_MESSAGE", topic=topic, group=group)
        self._require_writable()
        return self.pop_service.pop(group, topic, queue_id, max_msgs, invisible_time_ms, expression_type, expression,
                                    attempt_id, order, poll_time_ms, init_mode)

    async def pop_message_async(self, group: str, topic: str, queue_id: int | None = None,
                                max_msgs: int = MAX_POP_MSG_NUMS, invisible_time_ms: int = 60_000,
                                expression_type: str | None = "TAG", expression: str | None = "*", *,
                                attempt_id: str | None = None, order: bool | None = None, poll_time_ms: int = 0,
                                init_mode: int = CONSUME_INIT_MODE_MAX,
                                auth: RequestContext | None = None) -> PopResult:
        """POP_MESSAGE for an asyncio server: a parked pop awaits its waiter (no thread parked)."""
        return await drive_async(self.pop_message_steps(group, topic, queue_id, max_msgs, invisible_time_ms,
                                                        expression_type, expression, attempt_id=attempt_id,
                                                        order=order, poll_time_ms=poll_time_ms,
                                                        init_mode=init_mode, auth=auth))

    def pop_message_steps(self, group: str, topic: str, queue_id: int | None = None,
                          max_msgs: int = MAX_POP_MSG_NUMS, invisible_time_ms: int = 60_000,
                          expression_type: str | None = "TAG", expression: str | None = "*", *,
                          attempt_id: str | None = None, order: bool | None = None, poll_time_ms: int = 0,
                          init_mode: int = CONSUME_INIT_MODE_MAX,
                          auth: RequestContext | None = None) -> WaitSteps[PopResult]:
        """POP_MESSAGE as wait steps (``wait_steps``), checked now: a server drives them with its reads on
        worker threads (``drive_in_workers``) so a burst of woken pops does not hold its event loop."""
        self._authorize(auth, "POP_MESSAGE", topic=topic, group=group)
        self._require_writable()
        return self.pop_service.pop_steps(group, topic, queue_id, max_msgs, invisible_time_ms, expression_type,
                                          expression, attempt_id, order, poll_time_ms, init_mode)

    def ack_message(self, group: str, topic: str, receipt_handle: str,
                    auth: RequestContext | None = None) -> AckResult:
        self._authorize(auth, "ACK_MESSAGE", topic=topic, group=group)
        self._require_writable()
        return self.pop_service.ack(group, topic, receipt_handle)

    def batch_ack(self, group: str, topic: str, receipt_handles: Iterable[str],
                  auth: RequestContext | None = None) -> list[AckResult]:
        self._authorize(auth, "BATCH_ACK_MESSAGE", topic=topic, group=group)
        self._require_writable()
        return self.pop_service.batch_ack(group, topic, receipt_handles)

    def change_invisible_time(self, group: str, topic: str, receipt_handle: str, invisible_time_ms: int,
                              auth: RequestContext | None = None) -> ChangeInvisibleResult:
        self._authorize(auth, "CHANGE_MESSAGE_INVISIBLETIME", topic=topic, group=group)
        self._require_writable()
        return self.pop_service.change_invisible_time(group, topic, receipt_handle, invisible_time_ms)

    # -- retries -----------------------------------------------------------------------------------
    def consumer_send_back(self, group: str, message: int | str, delay_level: int = 0,
                           origin_topic: str | None = None, max_reconsume_times: int | None = None,
                           auth: RequestContext | None = None, *, origin_msg_id: str | None = None,
                           queue_offset: int | None = None) -> SendBackResult:
        """CONSUMER_SEND_MSG_BACK: ``message`` is the commit log offset or the offset msgId of the
        message the consumer failed; it goes to %RETRY%group with a growing delay level, or to
        %DLQ%group once its reconsume times reach the maximum (or ``delay_level`` < 0).

        On a BatchCQ topic the offset names an inner batch: the failed item is the one whose UNIQ_KEY
        is ``origin_msg_id`` (the header's originMsgId) or at ``queue_offset`` (``inner_batch_item``)."""
        self._authorize(auth, "CONSUMER_SEND_MSG_BACK", group=group)
        self._require_writable()
        if isinstance(message, str):
            try:
                offset = decode_offset_msg_id(message).commit_log_offset
            except ValueError as e:
                raise InvalidParameterError(f"not an offset msgId: {message!r} ({e})") from e
        else:
            offset = message
        msg = self.store.look_message_by_offset(offset) if offset >= 0 else None
        if msg is None:
            raise BrokerSystemError(f"look message by offset failed, {offset}")
        if msg.sys_flag & INNER_BATCH_FLAG:
            from .retry import inner_batch_item

            msg = inner_batch_item(msg, origin_msg_id, queue_offset)
        return self.retry_service.send_back(group, msg, delay_level, max_reconsume_times, origin_topic)

    # -- delay levels and timer wheel --------------------------------------------------------------
    def timer_backlog(self, auth: RequestContext | None = None) -> TimerBacklog | None:
        """Timer messages waiting, by due bucket, with rates and lag; None when timerWheelEnable is off."""
        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        return self.timer_store.backlog() if self.timer_store is not None else None

    def schedule_stats(self, auth: RequestContext | None = None) -> list[ScheduleStats]:
        """Per delay level: its delay, delivery offset, queue end, next due time, delivered count."""
        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        return self.schedule_service.stats()

    # -- consume (4.x pull) ------------------------------------------------------------------------
    def pull_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                     expression_type: str | None = "TAG", subscription: str | None = "*",
                     suspend_timeout_ms: int = 0, commit_offset: int | None = None,
                     registered_sub_version: int | None = None, auth: RequestContext | None = None) -> PullResult:
        """PULL_MESSAGE; with ``suspend_timeout_ms`` it blocks (call from a worker thread).
        ``registered_sub_version``: filter by the group's heartbeat subscription (PullService.pull_steps)."""
        self._authorize(auth, "PULL_MESSAGE", topic=topic, group=group)
        if self.read_only:
            commit_offset = None
        return self.puller.pull_message(group, topic, queue_id, offset, max_msgs, expression_type, subscription,
                                        suspend_timeout_ms, commit_offset, registered_sub_version)

    async def pull_message_async(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                                 expression_type: str | None = "TAG", subscription: str | None = "*",
                                 suspend_timeout_ms: int = 0, commit_offset: int | None = None,
                                 registered_sub_version: int | None = None,
                                 auth: RequestContext | None = None) -> PullResult:
        """PULL_MESSAGE for an asyncio server: a suspended pull awaits a waiter that dispatch wakes,
        so no thread is parked per request. Same checks and answers as ``pull_message``."""
        return await drive_async(self.pull_message_steps(group, topic, queue_id, offset, max_msgs, expression_type,
                                                         subscription, suspend_timeout_ms, commit_offset,
                                                         registered_sub_version, auth=auth))

    def pull_message_steps(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                           expression_type: str | None = "TAG", subscription: str | None = "*",
                           suspend_timeout_ms: int = 0, commit_offset: int | None = None,
                           registered_sub_version: int | None = None,
                           auth: RequestContext | None = None) -> WaitSteps[PullResult]:
        """PULL_MESSAGE as wait steps (``wait_steps``), authorized now: a server drives them with each read
        on a worker thread (``drive_in_workers``), so 500 pulls woken by one large message do not hold
        its event loop (and the name server on it) for seconds."""
        self._authorize(auth, "PULL_MESSAGE", topic=topic, group=group)
        if self.read_only:
            commit_offset = None
        return self.puller.pull_steps(group, topic, queue_id, offset, max_msgs, expression_type, subscription,
                                      suspend_timeout_ms, commit_offset, registered_sub_version)

    def lock_batch_mq(self, group: str, client_id: str, queues: Iterable[QueueRef],
                      auth: RequestContext | None = None) -> set[MessageQueue]:
        mqs = self._queues(queues)
        self._authorize(auth, "LOCK_BATCH_MQ", group=group, topics=[mq.topic for mq in mqs])
        return self.lock_manager.try_lock_batch(group, mqs, client_id)

    def unlock_batch_mq(self, group: str, client_id: str, queues: Iterable[QueueRef],
                        auth: RequestContext | None = None) -> set[MessageQueue]:
        mqs = self._queues(queues)
        self._authorize(auth, "UNLOCK_BATCH_MQ", group=group, topics=[mq.topic for mq in mqs])
        return self.lock_manager.unlock_batch(group, mqs, client_id)

    def _queues(self, queues: Iterable[QueueRef]) -> list[MessageQueue]:
        from .queue_lock import MessageQueue

        out = []
        for q in queues:
            if isinstance(q, MessageQueue):
                out.append(MessageQueue(q.topic, self.config.broker_name, q.queue_id))
            else:
                topic, qid = q
                out.append(MessageQueue(topic, self.config.broker_name, int(qid)))
        return out

    # -- offsets -----------------------------------------------------------------------------------
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int,
                      auth: RequestContext | None = None) -> bool:
        """UPDATE_CONSUMER_OFFSET. False when ignored: an admin reset of this queue is not yet pulled."""
        self._authorize(auth, "UPDATE_CONSUMER_OFFSET", topic=topic, group=group)
        self._require_writable()
        if self.group_manager.get(group) is None:
            # ConsumerManageProcessor#updateConsumerOffset: a commit never creates a group (a typo
            # in a group name would otherwise become a group with offsets); clients heartbeat first
            raise SubscriptionGroupNotExistError(f"Group {group} not exist!")
        if self.topic_manager.get(topic) is None:
            raise TopicNotExistError(f"Topic {topic} not exist!")
        if offset < 0:
            raise InvalidParameterError(f"commitOffset must be >= 0, got {offset}")
        if self.config.use_server_side_reset_offset and self.offset_manager.has_offset_reset(group, topic, queue_id):
            return False
        self.offset_manager.commit_offset(group, topic, queue_id, offset)
        return True

    def query_offset(self, group: str, topic: str, queue_id: int, auth: RequestContext | None = None) -> int:
        """The group's next offset for the queue, -1 when it never committed one."""
        self._authorize(auth, "QUERY_CONSUMER_OFFSET", topic=topic, group=group)
        return self.offset_manager.query_offset(group, topic, queue_id)

    def plan_reset_offset(self, group: str, topic: str, timestamp: str | int | None = None, *,
                          offset: int | None = None, queue_id: int | None = None, client_force: bool | None = None,
                          auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        """What a reset would do, per queue. ``client_force`` given (isForce): client mode's table
        (useServerSideResetOffset=false), which the group's online consumers are sent; the consumers
        commit it themselves, as in Apache, so nothing is applied here."""
        self._authorize(auth, "INVOKE_BROKER_TO_RESET_OFFSET", topic=topic, group=group)
        if client_force is not None:
            return self.reset_service.plan_client(group, topic, -1 if timestamp is None else timestamp, client_force)
        return self.reset_service.plan(group, topic, timestamp, offset=offset, queue_id=queue_id)

    def apply_reset_offset(self, group: str, plan: list[ResetOffsetPlanEntry],
                           auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        for topic in sorted({e.topic for e in plan}):
            self._authorize(auth, "INVOKE_BROKER_TO_RESET_OFFSET", topic=topic, group=group)
        self._require_writable()
        if self.config.use_server_side_reset_offset and self.is_slave:  # AdminBrokerProcessor.resetOffsetInner
            raise BrokerSystemError("Can not reset offset in slave broker")
        return self.reset_service.apply(group, plan, server_side=self.config.use_server_side_reset_offset)

    def reset_offset(self, group: str, topic: str, timestamp: str | int | None = None, *, offset: int | None = None,
                     queue_id: int | None = None, auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        """Plan and apply in one step (INVOKE_BROKER_TO_RESET_OFFSET, server-side mode)."""
        plan = self.plan_reset_offset(group, topic, timestamp, offset=offset, queue_id=queue_id, auth=auth)
        return self.apply_reset_offset(group, plan, auth=auth)

    def plan_skip_accumulated_message(self, group: str, topic: str,
                                      auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        return self.plan_reset_offset(group, topic, -1, auth=auth)

    def skip_accumulated_message(self, group: str, topic: str,
                                 auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        return self.reset_offset(group, topic, -1, auth=auth)

    def clone_group_offset(self, src_group: str, dst_group: str, topic: str | None,
                           auth: RequestContext | None = None, offline: bool = True) -> list[ResetOffsetPlanEntry]:
        """CLONE_GROUP_OFFSET: ``dst_group`` takes ``src_group``'s committed offsets of ``topic``, in the
        offset manager (ConsumerOffsetManager.cloneOffset). A server-side reset of ``dst_group`` still
        pending stays, and wins over them (query_offset answers it first, as Apache's queryOffset): the
        caller reads back what the group holds.

        No ``topic``: every topic ``src_group`` holds offsets of that still exists (Apache's handler
        walks them too, skipping a topic without config). ``offline`` false (mqadmin's request): a
        source group online that does not subscribe to a topic is not copied on it
        (AdminBrokerProcessor.cloneGroupOffset)."""
        self._authorize(auth, "CLONE_GROUP_OFFSET", topic=topic or None, group=dst_group)
        self._require_writable()
        if topic:
            topics = [topic]
        else:
            topics = sorted(t for t in self.offset_manager.which_topic_by_consumer(src_group)
                            if self.topic_manager.get(t) is not None)
        live = None if offline else self.client_registry.consumer_group(src_group)
        plan: list[ResetOffsetPlanEntry] = []
        for t in topics:
            if live is not None and live.subscriptions and t not in live.subscriptions:
                log.warning("cloneGroupOffset: topic %s is not in the subscription of online group %s; not cloned",
                            t, src_group)
                continue
            plan.extend(self.reset_service.clone(src_group, dst_group, t))
        return plan

    def which_group_by_topic(self, topic: str, auth: RequestContext | None = None) -> set[str]:
        """Groups holding offsets for ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO, stored part)."""
        self._authorize(auth, "QUERY_TOPIC_CONSUME_BY_WHO", topic=topic)
        return self.offset_manager.which_group_by_topic(topic)

    def which_topic_by_consumer(self, group: str, auth: RequestContext | None = None) -> set[str]:
        """QUERY_TOPICS_BY_CONSUMER: Group [Get], the same demand as the group part of GET_CONSUME_STATS."""
        self._authorize(auth, "GET_CONSUME_STATS", group=group)
        return self.offset_manager.which_topic_by_consumer(group)

    # -- queue queries -----------------------------------------------------------------------------
    def get_min_offset(self, topic: str, queue_id: int, auth: RequestContext | None = None) -> int:
        self._authorize(auth, "GET_MIN_OFFSET", topic=topic)
        return self.store.get_min_offset_in_queue(topic, queue_id)

    def get_max_offset(self, topic: str, queue_id: int, auth: RequestContext | None = None) -> int:
        self._authorize(auth, "GET_MAX_OFFSET", topic=topic)
        return self.store.get_max_offset_in_queue(topic, queue_id)

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int, boundary: str = "lower",
                                   auth: RequestContext | None = None) -> int:
        self._authorize(auth, "SEARCH_OFFSET_BY_TIMESTAMP", topic=topic)
        return self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp, boundary.lower())

    def view_message(self, commit_log_offset: int, auth: RequestContext | None = None) -> MessageExt | None:
        """VIEW_MESSAGE_BY_ID: Topic [Get] on the message's own topic (authentication only when none)."""
        msg = self.store.look_message_by_offset(commit_log_offset)
        if msg is None:
            self._authorize(auth, None)
            return None
        self._authorize(auth, "VIEW_MESSAGE_BY_ID", topic=msg.topic)
        return msg

    def view_message_by_id(self, msg_id: str, auth: RequestContext | None = None) -> MessageExt | None:
        """An offset msgId (store host + commit log offset): the message stored there, when that
        message's own offset id is ``msg_id`` (a stale id pointing into rewritten data finds nothing)."""
        try:
            decoded = decode_offset_msg_id(msg_id.strip())
        except ValueError:
            self._authorize(auth, None)
            return None
        if not 0 <= decoded.commit_log_offset < self.store.get_max_phy_offset():
            self._authorize(auth, None)
            return None
        msg = self.view_message(decoded.commit_log_offset, auth)
        if msg is None or msg.commit_log_offset != decoded.commit_log_offset \
                or msg.msg_id.upper() != msg_id.strip().upper():
            return None
        return msg

    def query_message(self, topic: str, key: str, max_num: int = 64, begin_timestamp: int = 0,
                      end_timestamp: int = 2**63 - 1, *, unique_key: bool = False,
                      auth: RequestContext | None = None) -> list[MessageExt]:
        """QUERY_MESSAGE through the IndexFile: messages of ``topic`` whose KEYS holds the token ``key``,
        or (``unique_key``, the _UNIQUE_KEY_QUERY flag) whose UNIQ_KEY is ``key``, oldest first.
        Index hash collisions are filtered out here, so every caller gets exact matches."""
        self._authorize(auth, "QUERY_MESSAGE", topic=topic)
        found = self.store.query_message(topic, key, max_num, begin_timestamp, end_timestamp, exact=False)
        if unique_key:
            hits = [m for m in found if m.topic == topic and m.uniq_key == key]
            return sorted(hits, key=lambda m: m.store_timestamp)
        return [m for m in found if m.topic == topic and key in (m.keys or "").split(" ")]

    def read_queue(self, topic: str, queue_id: int, offset: int, max_num: int = 32,
                   expression_type: str | None = "TAG", expression: str | None = "*",
                   group: str = TOOLS_CONSUMER_GROUP, auth: RequestContext | None = None) -> GetMessageResult:
        """Read a queue as a tool does (mqadmin printMsg / queryMsgByOffset / consumeMessage): nothing is
        committed, no pull offset moves, no group is created. Authorized as PULL_MESSAGE by ``group``
        (Apache's tools pull as TOOLS_CONSUMER), so an ACL that allows a tool allows this read."""
        self._authorize(auth, "PULL_MESSAGE", topic=topic, group=group)
        tc = self.topic_manager.get(topic)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist, apply first please!")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:  # the pull's check: same answer on a store directory
            raise InvalidParameterError(f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                        f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        if max_num <= 0:
            raise InvalidParameterError(f"maxMsgNums must be positive, got {max_num}")
        from .filter import FilterSyntaxError, UnsupportedExpressionTypeError, build_filter

        try:
            message_filter = build_filter(expression_type, expression)
        except (FilterSyntaxError, UnsupportedExpressionTypeError) as e:
            raise SubscriptionParseFailedError(f"parse the subscription failed: {e}") from e
        return self.store.get_messages(topic, queue_id, max(offset, 0), max_num, message_filter,
                                       transfer_limits=True)

    def message_at(self, topic: str, queue_id: int, offset: int, group: str = TOOLS_CONSUMER_GROUP,
                   auth: RequestContext | None = None) -> MessageExt:
        """The message at a queue offset (queryMsgByOffset); QUERY_NOT_FOUND names the queue's range."""
        result = self.read_queue(topic, queue_id, offset, 1, group=group, auth=auth)
        if result.status is not GetMessageStatus.FOUND or not result.messages:
            raise QueryNotFoundError(f"no message at offset {offset} of {topic}/{queue_id}: {result.status.value} "
                                 f"(queue holds [{result.min_offset}, {result.max_offset}))")
        return result.messages[0]

    # -- clients (HEART_BEAT and what reads the client registry) -----------------------------------
    def heartbeat(self, channel: Channel, client_id: str, *, language: str = "JAVA", version: int = 0,
                  remote_addr: str = "", producer_groups: Sequence[str] = (), consumers: Sequence[ConsumerData] = (),
                  auth: RequestContext | None = None) -> HeartbeatResult:
        """HEART_BEAT: register the client's groups. A consumer group is created when allowed
        (autoCreateSubscriptionGroup); when it is not, the consumer is still registered (as the Java
        broker does: its pulls are the ones refused)."""
        self._authorize(auth, "HEART_BEAT",
                        subscriptions={c.group_name: [s.topic for s in c.subscriptions] for c in consumers})
        if not self.read_only:
            from .retry import PERM_READ_WRITE

            for c in consumers:
                try:
                    group = self.group_manager.find(c.group_name)
                except BrokerError:
                    log.info("heartbeat of %s for unknown group %s (autoCreateSubscriptionGroup is off)",
                             client_id, c.group_name)
                    continue
                if group.retry_queue_nums > 0:
                    # As Java's heartbeat does, whatever the message model: the group's retry topic exists
                    # (and is routed) before the first failed message is sent back, so retries are consumed
                    # at once; and consumerProgress, which finds groups by their retry topics, lists it.
                    self.topic_manager.create_if_absent(TopicConfig(retry_topic(c.group_name), group.retry_queue_nums,
                                                                    group.retry_queue_nums, PERM_READ_WRITE))
        result = self.client_registry.heartbeat(channel, client_id, language=language, version=version,
                                                remote_addr=remote_addr, producer_groups=tuple(producer_groups),
                                                consumers=tuple(consumers))
        if not self.read_only:
            # ConsumerGroupEvent.REGISTER on every heartbeat: SQL92 subscriptions get their bloom bits
            for c in consumers:
                self.consumer_filter_manager.register_group(c.group_name, c.subscriptions)
        return result

    def check_client_config(self, expression_type: str | None, expression: str | None,
                            auth: RequestContext | None = None) -> None:
        """CHECK_CLIENT_CONFIG (ClientManageProcessor.checkClientConfig), which a Java push or lite pull
        consumer sends at start for each SQL92 subscription: a TAG one always passes; a SQL92 one needs
        enablePropertyFilter (else BrokerSystemError) and an expression that compiles (else
        SubscriptionParseFailedError with the parser's message). Authentication only, as in RocketMQ."""
        from .filter import FilterSyntaxError, UnsupportedExpressionTypeError, build_filter, is_tag_type
        from .filter.factory import property_filter_disabled

        self._authorize(auth, None)
        if is_tag_type(expression_type):
            return
        if not self.config.enable_property_filter:
            raise BrokerSystemError(property_filter_disabled(expression_type))
        try:
            build_filter(expression_type, expression)
        except (FilterSyntaxError, UnsupportedExpressionTypeError) as e:
            raise SubscriptionParseFailedError(str(e)) from e

    def _consumer_group_removed(self, group: str) -> None:
        """The group's last client left (ConsumerGroupEvent.UNREGISTER): its SQL92 filters die."""
        if not self.read_only:
            self.consumer_filter_manager.unregister(group)

    def add_topic_change_listener(self, listener: Callable[[str, TopicConfig | None], None]) -> None:
        """``listener(topic, config or None)`` after any topic is created, changed or deleted — also the
        broker's own retry/DLQ topics — so the network layer can re-register with the name servers."""
        self.topic_manager.change_listeners.append(listener)

    def unregister_client(self, channel: Channel, producer_group: str | None = None,
                          consumer_group: str | None = None, auth: RequestContext | None = None) -> None:
        self._authorize(auth, "UNREGISTER_CLIENT", group=consumer_group)
        self.client_registry.unregister(channel, producer_group, consumer_group)

    def consumer_ids(self, group: str, auth: RequestContext | None = None) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP."""
        self._authorize(auth, "GET_CONSUMER_LIST_BY_GROUP", group=group)
        return self.client_registry.consumer_ids(group)

    def consumer_connection(self, group: str, auth: RequestContext | None = None) -> ConsumerGroupInfo | None:
        """GET_CONSUMER_CONNECTION_LIST: the group's online clients and subscriptions (None: offline)."""
        self._authorize(auth, "GET_CONSUMER_CONNECTION_LIST", group=group)
        return self.client_registry.consumer_group(group)

    def producer_connection(self, group: str, auth: RequestContext | None = None) -> list[ClientChannelInfo]:
        """GET_PRODUCER_CONNECTION_LIST: the group's online producers (Cluster [Get], as RocketMQ's header)."""
        self._authorize(auth, "GET_PRODUCER_CONNECTION_LIST", group=group)
        return self.client_registry.producer_clients(group)

    def consumer_running_info_client(self, group: str, client_id: str,
                                     auth: RequestContext | None = None) -> ClientChannelInfo | None:
        """GET_CONSUMER_RUNNING_INFO: the client of ``group`` the request is relayed to (Group [Get]). Only
        a consumer of that group: the group's permission must not reach another group's client."""
        self._authorize(auth, "GET_CONSUMER_RUNNING_INFO", group=group)
        return next((c for c in self.client_registry.consumer_clients(group) if c.client_id == client_id), None)

    def consumer_status_clients(self, group: str, topic: str,
                                auth: RequestContext | None = None) -> list[ClientChannelInfo]:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: the group's clients asked for their offsets of ``topic``
        (Topic [Get] + Group [Get])."""
        self._authorize(auth, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", topic=topic, group=group)
        return self.client_registry.consumer_clients(group)

    def message_to_consume_directly(self, group: str, topic: str | None, commit_log_offset: int | None,
                                    auth: RequestContext | None = None) -> MessageExt | None:
        """CONSUME_MESSAGE_DIRECTLY: the message a consumer of ``group`` is made to consume (None: no
        offset, or nothing stored there). Group [Sub] + Topic [Sub] on the request's topic, as RocketMQ;
        when the request names none, on the message's own topic: a raw client must not push another
        topic's message to the group by leaving the topic out (then the read comes first, its result
        is returned only once authorized)."""
        if topic:
            self._authorize(auth, "CONSUME_MESSAGE_DIRECTLY", group=group, topic=topic)
        msg = self.store.look_message_by_offset(commit_log_offset) if commit_log_offset is not None else None
        if not topic:
            self._authorize(auth, "CONSUME_MESSAGE_DIRECTLY", group=group, topic=msg.topic if msg else None)
        return msg

    # -- name server registration ------------------------------------------------------------------
    def registration(self, topics: Iterable[str] | None = None) -> BrokerRegistration:
        """What REGISTER_BROKER carries for this broker: its identity and every topic's queues, or with
        ``topics`` only those of them it still has (Apache's registerIncrementBrokerData after a topic
        change: a name server rewrites just these, so a wipeWritePerm of the others stays)."""
        from .route_info import BrokerRegistration, TopicQueueConfig

        c = self.config
        if topics is None:
            configs = self.topic_manager.list()
        else:
            configs = [tc for name in sorted(set(topics)) if (tc := self.topic_manager.get(name)) is not None]
        queues = [TopicQueueConfig(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                                   tc.topic_sys_flag, tc.order) for tc in configs]
        return BrokerRegistration(c.broker_cluster_name, c.broker_name, c.broker_addr, c.broker_id,
                                  topics=queues, data_version=self.topic_manager.table.data_version.counter)

    def topic_config_data_version(self) -> DataVersion:
        """A copy of the topic table's DataVersion (counter, stateVersion, timestamp), as REGISTER_BROKER
        sends it: Apache's name server compares all three to tell a changed topic table."""
        v = self.topic_manager.table.data_version
        return DataVersion(v.counter, v.state_version, v.timestamp)

    # -- stats -------------------------------------------------------------------------------------
    def topic_stats(self, topic: str, auth: RequestContext | None = None) -> TopicStats:
        """GET_TOPIC_STATS_INFO: every queue of max(read, write) with offsets and last store time, and
        the topic's put TPS over the last minute (AdminBrokerProcessor's tpsTopicPutNums)."""
        from .stats import QueueStats, TopicStats

        self._authorize(auth, "GET_TOPIC_STATS_INFO", topic=topic)
        tc = self.topic_manager.get(topic)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        out = []
        for qid in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            lo = self.store.get_min_offset_in_queue(topic, qid)
            hi = self.store.get_max_offset_in_queue(topic, qid)
            last = self.store.get_message_store_timestamp(topic, qid, hi - 1) if hi > 0 else 0
            out.append(QueueStats(topic, qid, lo, hi, max(last, 0)))
        return TopicStats(out, self.stats.topic_put_tps(topic))

    def consume_stats(self, group: str, topic: str | None = None,
                      auth: RequestContext | None = None) -> GroupConsumeStats:
        """GET_CONSUME_STATS: per read queue, broker vs consumer offset, lag, inflight, blocked; and the
        consume TPS, messages the group pulled a second over the last minute of ``topic`` or of every topic
        (BrokerStatsManager.tpsGroupGetNums summed, as RocketMQ's)."""
        from .stats import GroupConsumeStats

        topics = [topic] if topic else sorted(self.offset_manager.which_topic_by_consumer(group))
        self._authorize(auth, "GET_CONSUME_STATS", group=group, topics=topics)
        out = []
        for t in topics:
            tc = self.topic_manager.get(t)
            if tc is None:
                continue
            out += [self._queue_consume_stats(group, t, qid) for qid in range(tc.read_queue_nums)]
        return GroupConsumeStats(out, self.stats.group_get_tps(group, topic))

    def _queue_consume_stats(self, group: str, topic: str, queue_id: int) -> GroupQueueStats:
        """One queue's row of GET_CONSUME_STATS: the offsets as stored (-1: none), the lag from the commit
        (or 0), the store time of the last consumed message, what is in flight or blocked."""
        from .stats import GroupQueueStats

        broker_offset = self.store.get_max_offset_in_queue(topic, queue_id)
        consumer = self.offset_manager.query_offset(group, topic, queue_id)
        pulled = self.offset_manager.query_pull_offset(group, topic, queue_id)
        base = max(consumer, 0)
        last = self.store.get_message_store_timestamp(topic, queue_id, base - 1) if base > 0 else 0
        inflight = self.inflight_provider(group, topic, queue_id) if self.inflight_provider else 0
        blocked = self.fifo_blocked_provider(group, topic, queue_id) if self.fifo_blocked_provider else False
        return GroupQueueStats(topic, queue_id, broker_offset, consumer, max(pulled, consumer),
                               max(0, broker_offset - base), inflight, bool(blocked), max(last, 0),
                               self.offset_manager.last_commit_timestamp(group, topic, queue_id))

    def broker_consume_stats(self, is_order: bool = False, auth: RequestContext | None = None) -> BrokerConsumeStats:
        """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): every subscription group's position on each
        topic it holds offsets on, as Apache's fetchAllConsumeStatsInBroker reads it: a topic without a
        config is left out, so is (``is_order``) a topic that is not orderly, and one the group's online
        consumers do not subscribe to when they subscribe to anything; per write queue the max offset,
        the committed offset (0 when none), and the store time of the last consumed message; per topic
        the group's consume TPS. Cluster [Get]: it reads every group's progress.

        The pull offset is the group's (at least its commit), where Apache leaves it 0, which made its
        totalInflightDiff the negated sum of the commits."""
        from .stats import BrokerConsumeStats, GroupConsumeStats

        self._authorize(auth, "GET_BROKER_CONSUME_STATS")
        groups: list[tuple[str, list[GroupConsumeStats]]] = []
        total_diff = total_inflight_diff = 0
        for sgc in self.group_manager.list():
            group = sgc.group_name
            online = self.client_registry.consumer_group(group)
            subscribed = online.subscriptions if online is not None else {}
            per_topic = []
            for t in sorted(self.offset_manager.which_topic_by_consumer(group)):
                tc = self.topic_manager.get(t)
                if tc is None or (is_order and not tc.order) or (subscribed and t not in subscribed):
                    continue
                rows = []
                for qid in range(tc.write_queue_nums):
                    row = self._queue_consume_stats(group, t, qid)
                    # Apache's wrapper: offsets never below 0, and the lag is not clamped
                    broker_offset, consumer = max(row.broker_offset, 0), max(row.consumer_offset, 0)
                    row = dataclasses.replace(row, broker_offset=broker_offset, consumer_offset=consumer,
                                              pull_offset=max(row.pull_offset, 0), diff=broker_offset - consumer)
                    rows.append(row)
                    total_diff += row.diff
                    total_inflight_diff += row.pull_offset - consumer
                per_topic.append(GroupConsumeStats(rows, self.stats.group_get_tps(group, t)))
            groups.append((group, per_topic))
        return BrokerConsumeStats(groups, total_diff, total_inflight_diff)

    def view_broker_stats_data(self, stats_name: str, stats_key: str, auth: RequestContext | None = None
                               ) -> tuple[StatsWindow, StatsWindow, StatsWindow]:
        """VIEW_BROKER_STATS_DATA (mqadmin statsAll): minute/hour/day of TOPIC_PUT_NUMS or GROUP_GET_NUMS.
        Any topic's or group's counters: Cluster [Get]."""
        self._authorize(auth, "VIEW_BROKER_STATS_DATA")
        data = self.stats.stats_data(stats_name, stats_key)
        if data is None:
            raise BrokerSystemError(f"The stats <{stats_name}> <{stats_key}> not exist")
        return data

    def broker_config_properties(self, auth: RequestContext | None = None, next_start: bool = False
                                 ) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting, broker, store and auth keys alike (what updateBrokerConfig can
        change), with credential values masked (the request needs authentication only).

        The values the broker runs with, which mqadmin -b, explainAcl, the dashboard and other brokers'
        gRPC routes read (its name, its gRPC port, whether it enforces ACL). ``next_start``: the ACL keys,
        identity and ports as updateBrokerConfig wrote them to the config file for the next start
        instead, as Apache's getBrokerConfig reports every updated key at once; a playbook's plan
        compares with these, so a key already written is no change on the next run."""
        self._authorize(auth, "GET_BROKER_CONFIG")
        props = self.config.to_properties()
        if next_start:
            props.update(self._next_start)
        return {k: "***" if k in SECRET_KEYS and v else v for k, v in props.items()}

    def broker_runtime_info(self, auth: RequestContext | None = None) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the keys mqadmin brokerStatus / clusterList read (all strings)."""
        from .stats import store_tps_text

        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        st = self.stats
        put_y, put_t, put_now = st.put_totals.snapshot()
        get_y, get_t, get_now = st.get_totals.snapshot()
        store = self.store
        earliest = store.get_earliest_message_time()
        info = {
            "brokerVersionDesc": "V5_3_3", "brokerVersion": "479",
            # Apache's slave runs changeSpecialServiceStatus(brokerId == MASTER_ID): false, so clusterList
            # #ACTIVATED and brokerStatus tell a slave from its master
            "brokerActive": "false" if self.is_slave else "true",
            "runtime": st.runtime(), "bootTimestamp": str(st.start_ms),
            "msgPutTotalYesterdayMorning": str(put_y), "msgPutTotalTodayMorning": str(put_t),
            "msgPutTotalTodayNow": str(put_now), "msgGetTotalYesterdayMorning": str(get_y),
            "msgGetTotalTodayMorning": str(get_t), "msgGetTotalTodayNow": str(get_now),
            "putTps": store_tps_text(st.put_tps), "getTransferredTps": store_tps_text(st.get_tps),
            "commitLogMinOffset": str(store.get_min_phy_offset()), "commitLogMaxOffset": str(store.get_max_phy_offset()),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "earliestMessageTimeStamp": str(max(earliest, 0)),
            "sendThreadPoolQueueSize": "0", "pullThreadPoolQueueSize": "0", "ackThreadPoolQueueSize": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "ackThreadPoolQueueHeadWaitTimeMills": "0", "pageCacheLockTimeMills": "0",
            "brokerName": self.config.broker_name, "brokerClusterName": self.config.broker_cluster_name,
            "brokerAddr": self.config.broker_addr, "readOnly": "true" if self.read_only else "false",
            "pullLongPollingWaiting": str(self.pull_hold_service.waiting()),
        }
        info.update(self._disk_runtime_info())
        info.update(self._timer_runtime_info())
        info.update(self.schedule_service.running_stats())
        info.update(self._dashboard_runtime_info())
        return dict(sorted(info.items()))

    def _disk_runtime_info(self) -> dict[str, str]:
        """The disk keys of GET_BROKER_RUNTIME_INFO: clusterList's SPACE column and the dashboard read
        commitLogDiskRatio, so a broker asked over the network must answer them too."""
        store_cfg = self.config.store
        commit_log_dir = store_cfg.commit_log_dir if store_cfg.commit_log_dir.is_dir() else self.root
        info = {"commitLogDiskRatio": str(max(disk_usage_ratio(commit_log_dir), 0.0)),
                "consumeQueueDiskRatio": str(max(disk_usage_ratio(self.root), 0.0))}
        try:
            usage = shutil.disk_usage(commit_log_dir)
        except OSError:
            return info
        gib = 1024 ** 3
        info["commitLogDirCapacity"] = f"Total : {usage.total / gib:.2f} GiB, Free : {usage.free / gib:.2f} GiB."
        return info

    def _timer_runtime_info(self) -> dict[str, str]:
        """The timer keys of GET_BROKER_RUNTIME_INFO (all "0" when the wheel is off, as RocketMQ)."""
        keys = ("timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps")
        if self.timer_store is None:
            return dict.fromkeys(keys, "0")
        b = self.timer_store.backlog()
        return {"timerReadBehind": str(b.dequeue_behind_ms // 1000), "timerOffsetBehind": str(b.enqueue_behind_messages),
                "timerCongestNum": str(b.pending), "timerEnqueueTps": f"{b.enqueue_rate:.1f}",
                "timerDequeueTps": f"{b.dequeue_rate:.1f}"}

    def verify_store(self, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Check every CQ/BCQ unit and index entry against the commitlog (read-only; mqadmin verifyStore).
        In-process maintenance: the network never reaches it."""
        from broker_core.store.verify import verify_store

        report = verify_store(self.store, progress, deleted_topics=dict(self.topic_manager.deleted_topics))
        report.unused_topics = self.topic_manager.unused()
        return report

    def lost_found_records(self) -> list[LostRecord]:
        """Intact records crash recovery kept in the store's lost+found/ (mqadmin verifyStore --lostFound)."""
        from broker_core.store.verify import list_lost_found

        return list_lost_found(self.store.root)

    def earliest_msg_store_time(self, topic: str, queue_id: int, auth: RequestContext | None = None) -> int:
        """GET_EARLIEST_MSG_STORETIME: store time of the queue's oldest message, -1 when it has none."""
        self._authorize(auth, "GET_EARLIEST_MSG_STORETIME", topic=topic)
        return self.store.get_earliest_message_time(topic, queue_id)

    def query_consume_queue(self, topic: str, queue_id: int, index: int, count: int,
                            auth: RequestContext | None = None, group: str | None = None
                            ) -> tuple[int, int, list[CqUnit]]:
        """QUERY_CONSUME_QUEUE (mqadmin queryCq): the queue's (min, max) offsets and up to ``count`` units
        from ``index`` (within one CQ file, as RocketMQ reads them).

        Refused as RocketMQ's AdminBrokerProcessor refuses it, with its remarks: a queue with no consume
        queue (never written, or a queue id the topic does not have) is "Q@T is not exist!", and an
        index with no unit (below the min offset: expired; at or past the max) is "Index N of Q@T is
        not exist!". Never the min's units for an index below it: mqadmin numbers the units from the
        index it asked for, so they would be shown under offsets they do not have. (RocketMQ answers
        the index case SUCCESS with that remark and no body; the refusal here carries the same remark
        with SYSTEM_ERROR, which its mqadmin reports instead of failing on the missing body.)
        ``group`` (the request's consumerGroup, queryCq -g) is authorized too: Group [Get]."""
        self._authorize(auth, "QUERY_CONSUME_QUEUE", topic=topic, group=group)
        if self.topic_manager.get(topic) is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        cq = self.store.find_consume_queue(topic, queue_id)
        if cq is None:
            raise BrokerSystemError(f"{queue_id}@{topic} is not exist!")
        units = cq.iterate_from(index, max(count, 0))
        if units is None:
            raise BrokerSystemError(f"Index {index} of {queue_id}@{topic} is not exist!")
        return cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue(), units

    # -- ACL 2.0 administration (AUTH_* codes) ----------------------------------------------------
    def _auth_admin(self, auth: RequestContext | None, request: str) -> str | None:
        """Authorize an AUTH_* request (Cluster [Update]/[Get]) and name the caller for the Super-user guards."""
        self._authorize(auth, request)
        subject = auth.subject if auth is not None else None
        return subject.removeprefix("User:") if subject else None

    def create_user(self, username: str, password: str, user_type: str | None = None, user_status: str | None = None,
                    auth: RequestContext | None = None) -> User:
        caller = self._auth_admin(auth, "AUTH_CREATE_USER")
        self._require_writable()
        return self.auth_manager.create_user(username, password, user_type, user_status, caller=caller)

    def update_user(self, username: str, password: str | None = None, user_type: str | None = None,
                    user_status: str | None = None, auth: RequestContext | None = None) -> User:
        caller = self._auth_admin(auth, "AUTH_UPDATE_USER")
        self._require_writable()
        return self.auth_manager.update_user(username, password, user_type, user_status, caller=caller)

    def delete_user(self, username: str, auth: RequestContext | None = None) -> None:
        caller = self._auth_admin(auth, "AUTH_DELETE_USER")
        self._require_writable()
        self.auth_manager.delete_user(username, caller=caller)

    def get_user(self, username: str, auth: RequestContext | None = None) -> User | None:
        self._auth_admin(auth, "AUTH_GET_USER")
        return self.auth_manager.get_user(username)

    def list_users(self, filter_text: str | None = None, auth: RequestContext | None = None) -> list[User]:
        self._auth_admin(auth, "AUTH_LIST_USER")
        return self.auth_manager.list_users(filter_text)

    def create_acl(self, acl: Acl, auth: RequestContext | None = None) -> Acl:
        self._auth_admin(auth, "AUTH_CREATE_ACL")
        self._require_writable()
        return self.auth_manager.create_acl(acl)

    def update_acl(self, acl: Acl, auth: RequestContext | None = None) -> Acl:
        self._auth_admin(auth, "AUTH_UPDATE_ACL")
        self._require_writable()
        return self.auth_manager.update_acl(acl)

    def delete_acl(self, subject: str, resource: str | None = None, policy_type: str | None = None,
                   auth: RequestContext | None = None) -> None:
        self._auth_admin(auth, "AUTH_DELETE_ACL")
        self._require_writable()
        from broker_core.auth.model import PolicyType

        ptype = next((t for t in PolicyType if t.value.lower() == (policy_type or "Custom").strip().lower()), None)
        if ptype is None:
            raise InvalidParameterError(f"unknown policyType {policy_type!r} (Custom or Default)")
        self.auth_manager.delete_acl(subject, resource, ptype)

    def get_acl(self, subject: str, auth: RequestContext | None = None) -> Acl | None:
        self._auth_admin(auth, "AUTH_GET_ACL")
        return self.auth_manager.get_acl(subject)

    def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None,
                  auth: RequestContext | None = None) -> list[Acl]:
        self._auth_admin(auth, "AUTH_LIST_ACL")
        return self.auth_manager.list_acls(subject_filter, resource_filter)

    # -- dashboard figures (issue 14: what `mqadmin dashboard` shows beyond brokerStatus) ----------
    def _dashboard_runtime_info(self) -> dict[str, str]:
        """Our keys of GET_BROKER_RUNTIME_INFO (the dashboard's figures), so they travel over every
        transport in the one map RocketMQ already extends with its own timer and schedule keys."""
        p = self.store_positions()
        tx = self.transaction_backlog()
        info = {"commitLogFlushedOffset": str(p.flushed_offset),
                "checkpointPhysicMsgTimestamp": str(p.physic_msg_timestamp),
                "checkpointLogicsMsgTimestamp": str(p.logics_msg_timestamp),
                "transactionHalfDepth": str(tx.half_depth), "transactionOpDepth": str(tx.op_depth),
                "transactionHalfPending": str(tx.pending_check),
                "timerWheelEnable": "true" if self.timer_store is not None and self.config.store.timer_wheel_enable
                else "false"}
        if self.timer_store is not None:
            b = self.timer_store.backlog()
            info.update({f"timerDueIn_{name}": str(n) for name, n in b.due.items()})
            info.update({"timerDequeueBehindMs": str(b.dequeue_behind_ms),
                         "timerEnqueueBehindMs": str(b.enqueue_behind_ms),
                         "timerCurrReadTimeMs": str(b.curr_read_time_ms),
                         "timerLogMaxOffset": str(b.timer_log_max_offset),
                         "timerDequeueGetMsgMiss": str(b.missing)})
        for st in self.schedule_service.stats():
            info[f"scheduleLevel_{st.level}"] = (f"{st.delay_ms},{st.offset},{st.max_offset},"
                                                 f"{st.next_due_ms if st.next_due_ms is not None else -1}")
        return info

    def store_positions(self, auth: RequestContext | None = None) -> StorePositions:
        """Commitlog range, how far it is flushed and dispatched, and the checkpoint's store times."""
        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        store = self.store
        cp = store.checkpoint
        return StorePositions(
            commit_log_min_offset=store.get_min_phy_offset(), commit_log_max_offset=store.get_max_phy_offset(),
            flushed_offset=store.commit_log.flushed_offset, dispatch_behind_bytes=store.dispatch_behind_bytes(),
            physic_msg_timestamp=cp.physic_msg_timestamp if cp is not None else 0,
            logics_msg_timestamp=cp.logics_msg_timestamp if cp is not None else 0)

    def transaction_backlog(self, auth: RequestContext | None = None) -> TransactionBacklog:
        """Half and op queues against the check service's progress, plus halves awaiting a decision."""
        from .transaction.transactional_message_util import (
            CID_RMQ_SYS_TRANS,
            RMQ_SYS_TRANS_HALF_TOPIC,
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
        )

        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        svc = self.transaction_service
        half_depth = op_depth = 0
        for topic, add in ((RMQ_SYS_TRANS_HALF_TOPIC, "half"), (RMQ_SYS_TRANS_OP_HALF_TOPIC, "op")):
            for qid in self.store.queue_ids(topic):
                checked = max(svc.offsets.query_offset(CID_RMQ_SYS_TRANS, topic, qid),
                              self.store.get_min_offset_in_queue(topic, qid))
                depth = max(0, self.store.get_max_offset_in_queue(topic, qid) - checked)
                if add == "half":
                    half_depth += depth
                else:
                    op_depth += depth
        return TransactionBacklog(half_depth, op_depth, svc.half_messages_pending(),
                                  {t: m.count for t, m in sorted(svc.metrics.transaction_count.items())})

    # -- helpers other features use ----------------------------------------------------------------
    def retry_topic_of(self, group: str) -> str:
        return retry_topic(group)

    def dlq_topic_of(self, group: str) -> str:
        return dlq_topic(group)

    @staticmethod
    def is_retry_topic(topic: str) -> bool:
        return is_retry_topic(topic)


__all__ = ["Broker", "BrokerError"]
