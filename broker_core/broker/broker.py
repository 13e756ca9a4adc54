"""Broker: the typed facade over one store directory (topics, groups, send, pull, offsets, stats, ACL).

Why: the remoting server, the gRPC server and EmbeddedAdmin only translate requests into these
calls; keeping every rule here means a local ``mqadmin`` on a store directory and a running cluster
behave the same. Read-only mode opens the store without the lock and never writes a byte, for
inspecting a store a running broker (even a Java one) owns.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from broker_core.auth.audit import AuditLog
from broker_core.auth.errors import AuthError
from broker_core.auth.manager import AuthManager, default_audit_log_path
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.message import MessageExt
from broker_core.store.commit_log import now_ms
from broker_core.store.message_store import MessageStore
from broker_core.store.subscription_group_config import SubscriptionGroupConfig, SubscriptionGroupTable
from broker_core.store.topic_config import TopicConfig

from .broker_config import BrokerConfig
from .consumer_offset_manager import ConsumerOffsetManager
from .errors import (
    BrokerError,
    InvalidParameterError,
    NoPermissionError,
    ServiceNotAvailableError,
    TopicNotExistError,
)
from .long_polling import PullRequestHoldService
from .pull import PullResult, PullService
from .queue_lock import MessageQueue, RebalanceLockManager
from .request_context import RequestContext
from .reset_offset import OffsetResetListener, ResetOffsetPlanEntry, ResetOffsetService
from .send import MessageSender, PutMessageHook, SendResult
from .stats import BrokerStats, GroupQueueStats, QueueStats
from .subscription_group_manager import SubscriptionGroupManager
from .topic_manager import TopicManager
from .topic_validator import RETRY_GROUP_TOPIC_PREFIX, dlq_topic, is_retry_topic, retry_topic

log = logging.getLogger("rmqops.broker")

QueueRef = MessageQueue | tuple[str, int]
# Optional hooks part B (pop/FIFO) installs: (group, topic, queue_id) -> value.
InflightProvider = Callable[[str, str, int], int]
BlockedProvider = Callable[[str, str, int], bool]


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
        self.store.open()
        try:
            self.topic_manager.init()
            self.group_manager = SubscriptionGroupManager(SubscriptionGroupTable(self.store.config_dir), self.config,
                                                          clock, read_only)
            self.group_manager.init()
            self.offset_manager = ConsumerOffsetManager(self.store.config_dir, clock, read_only)
            self.offset_manager.load()
            self.auth_manager = self._make_auth_manager(audit_log_path)
        except BaseException:
            self.store.shutdown()
            raise
        self.stats = BrokerStats(clock)
        self.pull_hold_service = PullRequestHoldService()
        self.store.arrival_listeners.append(self.pull_hold_service.notify_message_arriving)
        self.sender = MessageSender(self.store, self.topic_manager, self.group_manager, self.config, clock,
                                    on_put=self.stats.record_put)
        self.put_message_hooks: list[PutMessageHook] = self.sender.put_message_hooks
        self.puller = PullService(self.store, self.topic_manager, self.group_manager, self.offset_manager,
                                  self.config, self.pull_hold_service, on_get=self.stats.record_get)
        self.lock_manager = RebalanceLockManager(clock, self.config.rebalance_lock_max_live_time)
        self.offset_reset_listeners: list[OffsetResetListener] = []
        self.reset_service = ResetOffsetService(self.store, self.topic_manager, self.group_manager,
                                                self.offset_manager, clock, self.offset_reset_listeners)
        self.inflight_provider: InflightProvider | None = None
        self.fifo_blocked_provider: BlockedProvider | None = None
        self._flush_stop = threading.Event()
        self._flush_thread: threading.Thread | None = None
        self._started = False
        self._closed = False

    def _make_auth_manager(self, audit_log_path: Path | None) -> AuthManager:
        auth_cfg = self.config.auth
        enabled = auth_cfg.authentication_enabled or auth_cfg.authorization_enabled
        if self.read_only:
            auth_cfg = dataclasses.replace(auth_cfg, init_authentication_user="",
                                           inner_client_authentication_credentials="",
                                           migrate_auth_from_v1_enabled=False)
            audit = AuditLog(None)
        else:
            audit = AuditLog(audit_log_path or default_audit_log_path()) if enabled else AuditLog(None)
        return AuthManager(self.store.config_dir, auth_cfg, self.clock, audit=audit)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Broker:
        """Start store services and the periodic consumer-offset flush (flushConsumerOffsetInterval)."""
        if self.read_only or self._started:
            return self
        self.store.start()
        self._flush_stop.clear()
        self._flush_thread = threading.Thread(target=self._flush_loop, name="ConsumerOffsetFlush", daemon=True)
        self._flush_thread.start()
        self._started = True
        return self

    def _flush_loop(self) -> None:
        interval = self.config.flush_consumer_offset_interval / 1000
        while not self._flush_stop.wait(interval):
            try:
                self.offset_manager.persist()
            except Exception:
                log.exception("consumer offset flush failed")

    def persist(self) -> None:
        """Write every changed config file now (atomic writes)."""
        if self.read_only:
            return
        self.offset_manager.persist()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._flush_stop.set()
        if self._flush_thread is not None:
            self._flush_thread.join(timeout=10)
        self.pull_hold_service.shutdown()
        try:
            self.persist()
        finally:
            self.auth_manager.close()
            self.store.shutdown()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- ACL ---------------------------------------------------------------------------------------
    def _authorize(self, auth: RequestContext | None, request: str, *, topic: str | None = None,
                   group: str | None = None, topics: Iterable[str] = ()) -> None:
        """Authenticate and authorize a remote caller; in-process callers (auth=None) are trusted."""
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
            self.auth_manager.authorize_request(subject, auth.source_ip, request,
                                                request_code=auth.request_code, channel_id=auth.channel_id,
                                                topic=topic, group=group, topics=topics)
        except AuthError as e:
            raise NoPermissionError(e.message, code=e.code) from e

    def _require_writable(self) -> None:
        if self.read_only:
            raise ServiceNotAvailableError("the broker is open read-only (inspection mode); nothing can change")

    # -- topics ------------------------------------------------------------------------------------
    def create_or_update_topic(self, topic: str, read_queue_nums: int | None = None,
                               write_queue_nums: int | None = None, perm: int = 6, order: bool = False,
                               attributes: str | dict[str, str] | None = None, topic_filter_type: str = "SINGLE_TAG",
                               topic_sys_flag: int = 0, auth: RequestContext | None = None) -> TopicConfig:
        self._authorize(auth, "UPDATE_AND_CREATE_TOPIC", topic=topic)
        self._require_writable()
        return self.topic_manager.create_or_update(topic, read_queue_nums, write_queue_nums, perm, order, attributes,
                                                   topic_filter_type, topic_sys_flag)

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
            existed |= self.topic_manager.delete(t, system=i > 0)
            self.offset_manager.clean_offset_by_topic(t)
        self.offset_manager.persist(force=True)
        return existed

    def get_topic(self, topic: str, auth: RequestContext | None = None) -> TopicConfig | None:
        self._authorize(auth, "GET_TOPIC_CONFIG", topic=topic)
        return self.topic_manager.get(topic)

    def list_topics(self, auth: RequestContext | None = None) -> list[TopicConfig]:
        self._authorize(auth, "GET_ALL_TOPIC_CONFIG")
        return self.topic_manager.list()

    # -- subscription groups -----------------------------------------------------------------------
    def create_or_update_subscription_group(self, group: str | SubscriptionGroupConfig,
                                            auth: RequestContext | None = None, **settings: object
                                            ) -> SubscriptionGroupConfig:
        self._authorize(auth, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP")
        self._require_writable()
        return self.group_manager.create_or_update(group, **settings)

    def delete_subscription_group(self, group: str, clean_offset: bool = False,
                                  auth: RequestContext | None = None) -> bool:
        self._authorize(auth, "DELETE_SUBSCRIPTIONGROUP", group=group)
        self._require_writable()
        existed = self.group_manager.delete(group)
        if clean_offset:
            self.offset_manager.remove_offset(group)
            self.offset_manager.persist(force=True)
        return existed

    def get_subscription_group(self, group: str, auth: RequestContext | None = None) -> SubscriptionGroupConfig | None:
        self._authorize(auth, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG")
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
                     auth: RequestContext | None = None) -> SendResult:
        self._authorize(auth, "SEND_MESSAGE", topic=topic, group=producer_group)
        self._require_writable()
        return self.sender.send_message(topic, body, properties, queue_id=queue_id, message_group=message_group,
                                        flag=flag, born_host=born_host, born_timestamp=born_timestamp,
                                        sys_flag=sys_flag, reconsume_times=reconsume_times,
                                        default_topic=default_topic,
                                        default_topic_queue_nums=default_topic_queue_nums)

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

    # -- consume (4.x pull) ------------------------------------------------------------------------
    def pull_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
                     expression_type: str | None = "TAG", subscription: str | None = "*",
                     suspend_timeout_ms: int = 0, commit_offset: int | None = None,
                     auth: RequestContext | None = None) -> PullResult:
        """PULL_MESSAGE; with ``suspend_timeout_ms`` it blocks (call from a worker thread)."""
        self._authorize(auth, "PULL_MESSAGE", topic=topic, group=group)
        if self.read_only:
            commit_offset = None
        return self.puller.pull_message(group, topic, queue_id, offset, max_msgs, expression_type, subscription,
                                        suspend_timeout_ms, commit_offset)

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
        self.group_manager.find(group)
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
                          offset: int | None = None, queue_id: int | None = None,
                          auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        self._authorize(auth, "INVOKE_BROKER_TO_RESET_OFFSET", topic=topic, group=group)
        return self.reset_service.plan(group, topic, timestamp, offset=offset, queue_id=queue_id)

    def apply_reset_offset(self, group: str, plan: list[ResetOffsetPlanEntry],
                           auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        for topic in sorted({e.topic for e in plan}):
            self._authorize(auth, "INVOKE_BROKER_TO_RESET_OFFSET", topic=topic, group=group)
        self._require_writable()
        return self.reset_service.apply(group, plan)

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

    def clone_group_offset(self, src_group: str, dst_group: str, topic: str,
                           auth: RequestContext | None = None) -> list[ResetOffsetPlanEntry]:
        self._authorize(auth, "UPDATE_CONSUMER_OFFSET", topic=topic, group=dst_group)
        self._require_writable()
        return self.reset_service.clone(src_group, dst_group, topic)

    def which_group_by_topic(self, topic: str) -> set[str]:
        """Groups holding offsets for ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO, stored part)."""
        return self.offset_manager.which_group_by_topic(topic)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return self.offset_manager.which_topic_by_consumer(group)

    # -- queue queries -----------------------------------------------------------------------------
    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_min_offset_in_queue(topic, queue_id)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_max_offset_in_queue(topic, queue_id)

    def search_offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int, boundary: str = "lower") -> int:
        return self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp, boundary.lower())

    def view_message(self, commit_log_offset: int) -> MessageExt | None:
        return self.store.look_message_by_offset(commit_log_offset)

    # -- stats -------------------------------------------------------------------------------------
    def topic_stats(self, topic: str, auth: RequestContext | None = None) -> list[QueueStats]:
        """GET_TOPIC_STATS_INFO: every queue of max(read, write) with offsets and last store time."""
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
        return out

    def consume_stats(self, group: str, topic: str | None = None,
                      auth: RequestContext | None = None) -> list[GroupQueueStats]:
        """GET_CONSUME_STATS: per read queue, broker vs consumer offset, lag, inflight, blocked."""
        topics = [topic] if topic else sorted(self.offset_manager.which_topic_by_consumer(group))
        self._authorize(auth, "GET_CONSUME_STATS", group=group, topics=topics)
        out = []
        for t in topics:
            tc = self.topic_manager.get(t)
            if tc is None:
                continue
            for qid in range(tc.read_queue_nums):
                broker_offset = self.store.get_max_offset_in_queue(t, qid)
                consumer = self.offset_manager.query_offset(group, t, qid)
                pulled = self.offset_manager.query_pull_offset(group, t, qid)
                base = max(consumer, 0)
                last = self.store.get_message_store_timestamp(t, qid, base - 1) if base > 0 else 0
                inflight = self.inflight_provider(group, t, qid) if self.inflight_provider else 0
                blocked = self.fifo_blocked_provider(group, t, qid) if self.fifo_blocked_provider else False
                out.append(GroupQueueStats(t, qid, broker_offset, consumer, max(pulled, consumer), max(0, broker_offset - base),
                                           inflight, bool(blocked), max(last, 0),
                                           self.offset_manager.last_commit_timestamp(group, t, qid)))
        return out

    def broker_runtime_info(self, auth: RequestContext | None = None) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the keys mqadmin brokerStatus / clusterList read (all strings)."""
        self._authorize(auth, "GET_BROKER_RUNTIME_INFO")
        st = self.stats
        put_y, put_t, put_now = st.put_totals.snapshot()
        get_y, get_t, get_now = st.get_totals.snapshot()
        store = self.store
        earliest = store.get_earliest_message_time()
        info = {
            "brokerVersionDesc": "V5_3_3", "brokerVersion": "479", "brokerActive": "true",
            "runtime": st.runtime(), "bootTimestamp": str(st.start_ms),
            "msgPutTotalYesterdayMorning": str(put_y), "msgPutTotalTodayMorning": str(put_t),
            "msgPutTotalTodayNow": str(put_now), "msgGetTotalYesterdayMorning": str(get_y),
            "msgGetTotalTodayMorning": str(get_t), "msgGetTotalTodayNow": str(get_now),
            "putTps": f"{st.put_tps.tps_last_second():.1f} {st.put_tps.tps_last_minute():.1f}",
            "getTransferredTps": f"{st.get_tps.tps_last_second():.1f} {st.get_tps.tps_last_minute():.1f}",
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
        return dict(sorted(info.items()))

    # -- helpers other features use ----------------------------------------------------------------
    def retry_topic_of(self, group: str) -> str:
        return retry_topic(group)

    def dlq_topic_of(self, group: str) -> str:
        return dlq_topic(group)

    @staticmethod
    def is_retry_topic(topic: str) -> bool:
        return is_retry_topic(topic)


__all__ = ["Broker", "BrokerError", "RequestContext"]
