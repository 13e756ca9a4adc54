"""LocalBrokerClient: the BrokerClient transport over a store directory, calling a Broker in process.

Why: the default target of every mqadmin command is a store directory on this machine (DESIGN.md).
Inspection opens the Broker READ-ONLY (no lock, no writes: safe beside a running broker, even a Java
one); a client opened for writes takes the store lock through a writable Broker, and when a running
broker holds it every request fails with one line naming the ``-n`` address to use instead. The
Broker is opened on the first request that needs it, so config-only answers (cluster info, broker
config) work on a directory that is not a store. Broker and auth errors become ``mqadmin.errors``
exactly as the remoting transport maps response codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from broker_core.auth.errors import AuthError
from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.cluster_info import BrokerData, ClusterInfo
from broker_core.broker.errors import BrokerError
from broker_core.common.response_code import ResponseCode
from broker_core.config_loader import ConfigError
from broker_core.store import store_lock
from broker_core.store.errors import CorruptDataError
from broker_core.store.index_file import IndexFileError
from broker_core.store.store_dir import discard_new_store, first_missing_dir, is_store_dir, not_a_store_reason
from broker_core.store.store_lock import (
    SharedDirectoryLockedError,
    StoreLockedError,
    describe_holder,
    holder_namesrv,
    is_store_locked,
)
from broker_core.store.topic_config import TopicConfig
from mqadmin.errors import (
    AdminError,
    NotAStoreError,
    NotFoundError,
    StoreBusyError,
    UsageProblem,
    WrongTargetError,
    refusal,
)
from mqadmin.records import to_record
from mqadmin.timefmt import now_ms
from mqadmin.transport.base import MessageRecord, ProgressFn, TopicInfo

if TYPE_CHECKING:
    from broker_core.auth.manager import AuthManager
    from broker_core.auth.model import Acl, User
    from broker_core.broker.route_info import TopicRouteData
    from broker_core.broker.stats import StatsWindow
    from broker_core.remoting.bodies import ConsumeMessageDirectlyResult, ConsumerRunningInfo
    from broker_core.store.subscription_group_config import SubscriptionGroupConfig
    from broker_core.store.verify import LostRecord, VerifyReport
    from mqadmin.transport.values import (
        BrokerConsumeStatsView,
        ClientConnection,
        ConsumeQueueStats,
        ConsumeQueueView,
        ConsumerConnection,
        QueueRead,
        SendResult,
        SubscriptionGroupInfo,
        TopicStatus,
    )
    from spark.rebuild import RebuildSummary

P = ParamSpec("P")
R = TypeVar("R")
_NOT_FOUND = (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
              ResponseCode.QUERY_NOT_FOUND, ResponseCode.NO_MESSAGE)


def admin_error(e: BrokerError) -> AdminError:
    """A Broker refusal as the CLI's error, mapped exactly as the remoting transport maps the same
    answer: the not-found codes exit 3, and so does any other refusal whose remark says the thing
    "is not exist" (RocketMQ answers e.g. queryCq's "0@T is not exist!" with SYSTEM_ERROR); the
    rest exit 1. Mapping by code alone made a store directory exit 1 where -n exits 3."""
    return NotFoundError(e.message) if e.code in _NOT_FOUND else refusal(e.message,
                                                                           e.code == ResponseCode.NO_PERMISSION)


class LocalBrokerClient:
    """BrokerClient over ``store_dir``; ``read_only`` decides whether the store lock may be taken."""

    def __init__(self, store_dir: str | Path, config_file: str | Path | None = None, read_only: bool = True,
                 clock: Callable[[], int] = now_ms, create: bool = False) -> None:
        self.store_dir = Path(store_dir)
        self.create = create  # a writable client may build a new store only when asked (mqadmin --create)
        self.config_file = config_file
        self.read_only = read_only
        self.clock = clock
        try:
            self.config = BrokerConfig.load(config_file, self.store_dir)
        except (ConfigError, ValueError) as e:
            raise AdminError(str(e)) from None
        if config_file:  # getBrokerConfig names it (brokerConfigPath), as of a broker started with -c
            self.config.started_with(config_file)
        self._broker: Broker | None = None
        self._made: Path | None = None
        """The directory this client created for a new store (``--create``), outermost first."""

    @property
    def target(self) -> str:
        return f"store {self.store_dir}"

    def close(self, failed: bool = False) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            broker.shutdown()
        if failed and self._made is not None:
            discard_new_store(self._made, self.store_dir)
        self._made = None

    # -- the one Broker ------------------------------------------------------------------------------
    def _open(self) -> Broker:
        """The Broker over this store: read-only (no lock, no writes) or writable (holds the lock)."""
        if self._broker is None:
            if not is_store_dir(self.store_dir) and (self.read_only or not self.create
                                                      or self.store_dir.is_file()):
                hint = "" if self.read_only or self.store_dir.is_file() else " (give --create to make a new store there)"
                raise NotAStoreError(not_a_store_reason(self.store_dir) + hint)
            if not self.read_only and is_store_locked(self.store_dir):
                raise self._busy()
            if not self.read_only:
                store_lock.PROCESS_ROLE = "mqadmin"  # written beside the lock: who holds it
                self._made = first_missing_dir(self.store_dir)
            try:
                self._broker = Broker(self.store_dir, dataclasses.replace(self.config), self.clock,
                                      read_only=self.read_only, audit_log_path=None)
            except SharedDirectoryLockedError as e:  # its own holder file may be a copied one: not the cause
                raise AdminError(str(e)) from None
            except StoreLockedError:
                raise self._busy() from None
            except BrokerError as e:
                raise admin_error(e) from None
            except AuthError as e:
                raise AdminError(e.message) from None
            except IndexFileError as e:
                raise AdminError(f"cannot open store {self.store_dir}: {e}; give --config with the store's "
                                 "maxHashSlotNum/maxIndexNum") from None
            except (OSError, ValueError) as e:
                raise AdminError(f"cannot open store {self.store_dir}: {e}") from None
        return self._broker

    def _busy(self, remedy: str | None = None) -> StoreBusyError:
        """The store is held: by whom, and the name server its broker said it registers with (or
        ``remedy``, for a command -n cannot serve)."""
        return StoreBusyError(str(self.store_dir), holder_namesrv(self.store_dir), describe_holder(self.store_dir),
                              remedy)

    def _call(self, broker_addr: str | None, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run one Broker call for ``broker_addr``, its refusals turned into the CLI's errors."""
        if broker_addr is not None and broker_addr.strip() != self.config.broker_addr:
            raise WrongTargetError(f"broker address {broker_addr.strip()!r} is not this store's broker "
                                   f"({self.config.broker_addr}); to reach another broker use -n <namesrv>")
        try:
            return fn(*args, **kwargs)
        except BrokerError as e:
            raise admin_error(e) from None
        except AuthError as e:
            raise refusal(e.message) from None
        except CorruptDataError as e:  # damage on disk is the store's state, not a failure of mqadmin
            raise AdminError(f"{e} (mqadmin verifyStore lists the damage)") from None
        except OSError as e:  # the file and the OS's reason, not "[Errno N]"
            raise AdminError(f"{e.filename or self.store_dir}: {e.strerror or e}") from None

    def _broker_for(self, broker_addr: str) -> Broker:
        return self._call(broker_addr, self._open)

    def _auth_manager(self, broker_addr: str) -> AuthManager:
        """The broker's ACL 2.0 manager; it reads users.json and acls.json when first asked for, so a
        damaged one is the command's one-line failure, not an "unexpected failure"."""
        broker = self._broker_for(broker_addr)
        return self._call(broker_addr, lambda: broker.auth_manager)

    # -- name server (answered from this broker's own registration) ----------------------------------
    def cluster_info(self) -> ClusterInfo:
        self._broker_for(self.config.broker_addr)  # a path that is not a store has no broker to list
        c = self.config
        data = BrokerData(c.broker_cluster_name, c.broker_name, {c.broker_id: c.broker_addr})
        return ClusterInfo({c.broker_name: data}, {c.broker_cluster_name: [c.broker_name]})

    def topic_route(self, topic: str) -> TopicRouteData | None:
        """The route a name server would hand out after this broker's REGISTER_BROKER."""
        from broker_core.broker.route_info import RouteInfoManager

        broker = self._broker_for(self.config.broker_addr)
        routes = RouteInfoManager(self.clock)
        routes.register_broker(broker.registration())
        return routes.pick_topic_route(topic)

    def all_topic_list(self) -> list[str]:
        """The broker's topics: what its registration would give a name server."""
        broker = self._broker_for(self.config.broker_addr)
        return sorted({t.topic_name for t in broker.registration().topics})

    def delete_topic_in_namesrv(self, topic: str, cluster_name: str) -> None:
        """No name server in process: the route is derived from the broker's topics, already gone."""

    def _no_namesrv(self, what: str) -> AdminError:
        return AdminError(f"{what} is name server data: a store directory has no name server; use -n <namesrv>")

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        raise self._no_namesrv("a KV config")

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        raise self._no_namesrv("a KV config")

    def delete_kv_config(self, namespace: str, key: str) -> None:
        raise self._no_namesrv("a KV config")

    def namesrv_addrs(self) -> list[str]:
        return []

    def operate_write_perm_of_broker(self, namesrv_addr: str, broker_name: str, wipe: bool) -> int:
        raise self._no_namesrv("a broker's write permission in the routes")

    def get_namesrv_config(self, namesrv_addr: str) -> dict[str, str]:
        raise self._no_namesrv("the name server's config")

    def update_namesrv_config(self, namesrv_addr: str, properties: dict[str, str]) -> None:
        raise self._no_namesrv("the name server's config")

    # -- topics --------------------------------------------------------------------------------------
    def get_all_topic_config(self, broker_addr: str) -> list[TopicInfo]:
        b = self._broker_for(broker_addr)
        return [_topic_info(tc) for tc in self._call(broker_addr, b.list_topics)]

    def get_topic_config(self, broker_addr: str, topic: str) -> TopicInfo | None:
        b = self._broker_for(broker_addr)
        tc = self._call(broker_addr, b.get_topic, topic)
        return None if tc is None else _topic_info(tc)

    def update_and_create_topic(self, broker_addr: str, topic: TopicInfo) -> TopicInfo:
        b = self._broker_for(broker_addr)
        tc = self._call(broker_addr, b.create_or_update_topic, topic.topic_name, topic.read_queue_nums,
                        topic.write_queue_nums, topic.perm, topic.order, dict(topic.attributes),
                        topic.topic_filter_type, topic.topic_sys_flag)
        return _topic_info(tc)

    def update_and_create_topic_list(self, broker_addr: str, topics: Sequence[TopicInfo]) -> None:
        """The Broker call UPDATE_AND_CREATE_TOPIC_LIST makes: every topic or none."""
        b = self._broker_for(broker_addr)
        configs = [TopicConfig(t.topic_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_filter_type,
                               t.topic_sys_flag, t.order, dict(t.attributes)) for t in topics]
        self._call(broker_addr, b.create_or_update_topic_list, configs)

    def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        b = self._broker_for(broker_addr)
        self._call(broker_addr, b.delete_topic, topic)

    def topic_stats(self, broker_addr: str, topic: str) -> TopicStatus:
        from mqadmin.transport.values import QueueStatus, TopicStatus

        b = self._broker_for(broker_addr)
        name = self.config.broker_name
        stats = self._call(broker_addr, b.topic_stats, topic)
        return TopicStatus([QueueStatus(name, q.queue_id, q.min_offset, q.max_offset, q.last_update_timestamp)
                            for q in stats.rows], stats.put_tps)

    def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int, index: int,
                            count: int) -> ConsumeQueueView:
        from mqadmin.transport.values import ConsumeQueueView, CqEntry

        b = self._broker_for(broker_addr)
        lo, hi, units = self._call(broker_addr, b.query_consume_queue, topic, queue_id, index, count)
        return ConsumeQueueView(lo, hi, [CqEntry(u.phy_offset, u.size, u.tags_code) for u in units])

    def query_topic_consume_by_who(self, broker_addr: str, topic: str) -> list[str]:
        b = self._broker_for(broker_addr)
        return sorted(self._call(broker_addr, b.which_group_by_topic, topic))

    # -- subscription groups -------------------------------------------------------------------------
    def get_all_subscription_group(self, broker_addr: str) -> list[SubscriptionGroupInfo]:
        b = self._broker_for(broker_addr)
        return [_group_info(g) for g in self._call(broker_addr, b.list_subscription_groups)]

    def get_subscription_group(self, broker_addr: str, group: str) -> SubscriptionGroupInfo | None:
        b = self._broker_for(broker_addr)
        g = self._call(broker_addr, b.get_subscription_group, group)
        return None if g is None else _group_info(g)

    def update_and_create_subscription_group(self, broker_addr: str, config: SubscriptionGroupInfo) -> None:
        """The whole config, as UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body carries it over the wire: the
        broker takes the same path (its attribute merge included) for a store directory as for -n."""
        b = self._broker_for(broker_addr)
        self._call(broker_addr, b.create_or_update_subscription_group, config.to_config())

    def update_and_create_subscription_group_list(self, broker_addr: str,
                                                  configs: Sequence[SubscriptionGroupInfo]) -> None:
        """Whole configs, as over the wire (see update_and_create_subscription_group): every one or none."""
        b = self._broker_for(broker_addr)
        self._call(broker_addr, b.create_or_update_subscription_group_list, [c.to_config() for c in configs])

    def delete_subscription_group(self, broker_addr: str, group: str, clean_offset: bool) -> bool:
        """True when the group, or with ``clean_offset`` its offsets, were there to delete (the answer
        the remoting handler gives)."""
        b = self._broker_for(broker_addr)
        had_offsets = clean_offset and bool(b.offset_manager.which_topic_by_consumer(group))
        existed = self._call(broker_addr, b.delete_subscription_group, group, clean_offset)
        return bool(existed) or had_offsets

    def consume_stats(self, broker_addr: str, group: str, topic: str | None = None) -> list[ConsumeQueueStats]:
        from mqadmin.transport.values import ConsumeQueueStats, ConsumeStatsView

        b = self._broker_for(broker_addr)
        name = self.config.broker_name
        stats = self._call(broker_addr, b.consume_stats, group, topic)
        return ConsumeStatsView([ConsumeQueueStats(s.topic, name, s.queue_id, s.broker_offset, s.consumer_offset,
                                                   s.pull_offset, s.inflight, s.last_timestamp, s.blocked)
                                 for s in stats.rows], stats.consume_tps)

    def broker_consume_stats(self, broker_addr: str, is_order: bool,
                             timeout: float | None = None) -> BrokerConsumeStatsView:
        """Consumer offsets as the wire gives them: 0 for a queue never committed on."""
        from mqadmin.transport.values import BrokerConsumeStatsView, ConsumeQueueStats, ConsumeStatsView

        b = self._broker_for(broker_addr)
        name = self.config.broker_name
        stats = self._call(broker_addr, b.broker_consume_stats, is_order)
        return BrokerConsumeStatsView(
            [(group, [ConsumeStatsView([ConsumeQueueStats(s.topic, name, s.queue_id, s.broker_offset, s.consumer_offset,
                                                          s.pull_offset, s.inflight, s.last_timestamp, s.blocked)
                                        for s in per.rows], per.consume_tps) for per in per_topic])
             for group, per_topic in stats.groups],
            stats.total_diff, stats.total_inflight_diff)

    def consumer_connection(self, broker_addr: str, group: str) -> ConsumerConnection | None:
        from mqadmin.transport.values import ClientConnection, ConsumerConnection, SubscriptionEntry

        b = self._broker_for(broker_addr)
        g = self._call(broker_addr, b.consumer_connection, group)
        if g is None:
            return None
        return ConsumerConnection(
            g.group_name, g.consume_type, g.message_model, g.consume_from_where,
            [ClientConnection(c.client_id, c.remote_addr, c.language, c.version)
             for c in sorted(g.channels.values(), key=lambda c: c.client_id)],
            [SubscriptionEntry(s.topic, s.sub_string, s.expression_type) for _, s in sorted(g.subscriptions.items())])

    def producer_connection(self, broker_addr: str, group: str) -> list[ClientConnection]:
        """Producers register by heartbeat with a running broker; a store directory has none online."""
        from mqadmin.transport.values import ClientConnection

        b = self._broker_for(broker_addr)
        return [ClientConnection(c.client_id, c.remote_addr, c.language, c.version)
                for c in self._call(broker_addr, b.client_registry.producer_clients, group)]

    # -- offsets -------------------------------------------------------------------------------------
    def query_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int) -> int:
        b = self._broker_for(broker_addr)
        return self._call(broker_addr, b.query_offset, group, topic, queue_id)

    def get_min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        b = self._broker_for(broker_addr)
        return self._call(broker_addr, b.get_min_offset, topic, queue_id)

    def get_max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        b = self._broker_for(broker_addr)
        return self._call(broker_addr, b.get_max_offset, topic, queue_id)

    def search_offset(self, broker_addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        b = self._broker_for(broker_addr)
        return self._call(broker_addr, b.search_offset_by_timestamp, topic, queue_id, timestamp)

    def reset_offset(self, broker_addr: str, group: str, topic: str, timestamp: int, force: bool,
                     queue_id: int = -1, offset: int | None = None) -> dict[int, int] | None:
        """No consumer can be online on a store mqadmin holds: the offsets are stored at once (as
        server-side resets, or committed when the store's broker is in client mode)."""
        b = self._broker_for(broker_addr)
        one = queue_id if queue_id >= 0 else None
        if one is not None and offset is not None and offset != -1:
            plan = self._call(broker_addr, b.plan_reset_offset, group, topic, None, offset=offset, queue_id=one)
        else:
            plan = self._call(broker_addr, b.plan_reset_offset, group, topic, timestamp, queue_id=one)
        done = self._call(broker_addr, b.apply_reset_offset, group, plan)
        return {e.queue_id: e.new_offset for e in done}

    def commit_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        b = self._broker_for(broker_addr)
        self._call(broker_addr, b.commit_offset, group, topic, queue_id, offset)

    def clone_group_offset(self, broker_addr: str, src_group: str, dest_group: str, topic: str) -> None:
        b = self._broker_for(broker_addr)
        self._call(broker_addr, b.clone_group_offset, src_group, dest_group, topic)

    # -- messages ------------------------------------------------------------------------------------
    def query_message(self, broker_addr: str, topic: str, key: str, max_num: int, begin_timestamp: int,
                      end_timestamp: int, unique_key: bool = False) -> list[MessageRecord]:
        b = self._broker_for(broker_addr)
        found = self._call(broker_addr, b.query_message, topic, key, max_num, begin_timestamp, end_timestamp,
                           unique_key=unique_key)
        return [to_record(m) for m in found]

    def view_message(self, broker_addr: str, commit_log_offset: int) -> MessageRecord | None:
        b = self._broker_for(broker_addr)
        m = self._call(broker_addr, b.view_message, commit_log_offset)
        return None if m is None else to_record(m)

    def read_queue(self, broker_addr: str, topic: str, queue_id: int, offset: int, max_num: int,
                   sub_expression: str = "*") -> QueueRead:
        from mqadmin.transport.values import QueueRead

        b = self._broker_for(broker_addr)
        if offset < 0:  # the pull's check, as a broker answers it over -n (Broker.read_queue reads from 0)
            raise AdminError(f"queueOffset must be >= 0, got {offset}")
        got = self._call(broker_addr, b.read_queue, topic, queue_id, offset, max_num, "TAG", sub_expression)
        return QueueRead(got.status.value, got.next_begin_offset, got.min_offset, got.max_offset,
                         [to_record(m) for m in got.messages])

    def consumer_running_info(self, broker_addr: str, group: str, client_id: str,
                              jstack: bool = False) -> ConsumerRunningInfo:
        self._broker_for(broker_addr)
        raise NotFoundError(f"The Consumer <{group}> <{client_id}> not online: a store directory has no "
                            "connected clients; use -n <namesrv>")

    def consumer_status(self, broker_addr: str, group: str, topic: str,
                        client_id: str | None = None) -> dict[str, dict[tuple[str, int], int]]:
        self._broker_for(broker_addr)
        raise NotFoundError(f"No Any Consumer online in the consumer group: [{group}] (a store directory has "
                            "no connected clients; use -n <namesrv>)")

    def consume_message_directly(self, broker_addr: str, group: str, client_id: str, topic: str,
                                 offset_msg_id: str) -> ConsumeMessageDirectlyResult:
        self._broker_for(broker_addr)
        raise NotFoundError(f"The Consumer <{group}> <{client_id}> not online: a store directory has no "
                            "connected clients; use -n <namesrv>")

    def send_message(self, topic: str, body: bytes, properties: dict[str, str], broker_name: str | None = None,
                     queue_id: int | None = None, producer_group: str | None = None,
                     unit_name: str | None = None, msg_trace: bool = False) -> SendResult:
        from broker_core.client.producer import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS
        from mqadmin.transport.values import SendResult

        # in process there is no producer client: its group and unit name name nothing here
        if broker_name is not None and broker_name.strip() != self.config.broker_name:
            raise WrongTargetError(f"broker {broker_name.strip()!r} not found: this store's broker is "
                                   f"{self.config.broker_name!r} (brokerName in --config)")
        b = self._broker_for(self.config.broker_addr)
        started = now_ms()
        # a topic that does not exist is made as the remoting client's producer asks (-n): with the
        # queue count it sends, not the broker's defaultTopicQueueNums, so both modes make the same topic
        r = self._call(None, b.send_message, topic, body, dict(properties), queue_id=queue_id,
                       default_topic=DEFAULT_TOPIC, default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS)
        if msg_trace:  # the Pub trace a traced producer would write, stored through the same Broker
            from broker_core.store.codec.trace_data import TraceBean, TraceContext, TraceType, encode_context

            bean = TraceBean(topic=topic, msg_id=r.uniq_key or "", offset_msg_id=r.msg_id,
                             tags=properties.get("TAGS"), keys=properties.get("KEYS"),
                             store_host=self.config.broker_addr, body_length=len(body))
            text, keys = encode_context(TraceContext(TraceType.Pub, started, "DefaultRegion",
                                                     producer_group or "mqadmin_send_group",
                                                     cost_time=now_ms() - started, beans=[bean]))
            self._call(None, b.send_message, self.config.msg_trace_topic_name, text.encode("utf-8"),
                       {"KEYS": " ".join(keys), "WAIT": "true"})
        return SendResult(self.config.broker_name, r.queue_id, str(r.status), r.uniq_key, r.msg_id, r.queue_offset)

    def set_message_request_mode(self, broker_addr: str, topic: str, group: str, mode: str,
                                 pop_share_queue_num: int) -> None:
        b = self._broker_for(broker_addr)
        self._call(broker_addr, b.set_message_request_mode, topic, group, mode, pop_share_queue_num)

    def view_broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str
                               ) -> tuple[StatsWindow, StatsWindow, StatsWindow] | None:
        """Refused: TOPIC_PUT_NUMS and GROUP_GET_NUMS are counters a running broker keeps in memory from
        its start (per minute, hour and day), and a store directory holds none of them. Answering this
        process's own counters (a store opened by mqadmin has counted nothing) made statsAll print zero
        traffic for a store that had just taken messages, so the command says where the figures are."""
        self._broker_for(broker_addr)  # -b must name this store's broker; a path that is not a store: exit 3
        raise AdminError(f"traffic figures ({stats_name}: TPS, 24-hour counts) are counters a running broker "
                         "keeps in memory since it started; a store directory holds none: use -n <namesrv>")

    # -- store maintenance ---------------------------------------------------------------------------
    def clean_expired_consume_queue(self, broker_addr: str) -> str:
        from broker_core.broker.maintenance import expired_queues_summary

        b = self._broker_for(broker_addr)
        return expired_queues_summary(self._call(broker_addr, b.clean_expired_consume_queues))

    def delete_expired_commit_log(self, broker_addr: str) -> str:
        from broker_core.broker.maintenance import commit_log_summary

        b = self._broker_for(broker_addr)
        return commit_log_summary(self._call(broker_addr, b.delete_expired_commit_log))

    def clean_unused_topic(self, broker_addr: str) -> str:
        from broker_core.broker.maintenance import unused_topics_summary

        b = self._broker_for(broker_addr)
        return unused_topics_summary(self._call(broker_addr, b.clean_unused_topics))

    # -- broker runtime ------------------------------------------------------------------------------
    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO plus what only the store directory can tell (whether a broker holds it, its path)."""
        b = self._broker_for(broker_addr)
        info = dict(self._call(broker_addr, b.broker_runtime_info))
        info["brokerActive"] = str(is_store_locked(self.store_dir)).lower() if self.read_only else "true"
        info["storePathRootDir"] = str(self.store_dir)
        info["topicCount"] = str(len(self._call(broker_addr, b.list_topics)))
        return dict(sorted(info.items()))

    def broker_config(self, broker_addr: str, next_start: bool = False) -> dict[str, str]:
        """GET_BROKER_CONFIG as the broker answers it: the values it runs with (the filter bitmap length
        follows its bloom filter), credentials masked, not the --config file's text; ``next_start``: the
        keys an update wrote to --config for the next start as written."""
        b = self._broker_for(broker_addr)
        return self._call(broker_addr, b.broker_config_properties, next_start=next_start)

    def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> None:
        """Persisted to --config, the file this store's broker is started with (RocketMQ's brokerConfigPath)."""
        broker = self._broker_for(broker_addr)  # -b/-c must name this store's broker (not found: exit 3)
        if self.config_file is None:
            raise AdminError("updating broker config on a store directory needs the broker's config file "
                             "(--config FILE, or config: on a playbook target), where the change is persisted; "
                             "to change a running broker use -n <namesrv>")
        self._call(broker_addr, broker.update_broker_config, dict(properties), persist_to=Path(self.config_file))
        self.config = dataclasses.replace(broker.config)

    # -- ACL 2.0 ---------------------------------------------------------------------------------------
    def create_user(self, broker_addr: str, user: User) -> None:
        auth = self._auth_manager(broker_addr)
        self._call(broker_addr, auth.create_user, user.username, user.password, user.user_type, user.user_status)

    def update_user(self, broker_addr: str, username: str, password: str | None, user_type: str | None,
                    user_status: str | None) -> None:
        auth = self._auth_manager(broker_addr)
        self._call(broker_addr, auth.update_user, username, password, user_type, user_status)

    def delete_user(self, broker_addr: str, username: str) -> None:
        auth = self._auth_manager(broker_addr)
        self._call(broker_addr, auth.delete_user, username)

    def get_user(self, broker_addr: str, username: str) -> User | None:
        auth = self._auth_manager(broker_addr)
        return self._call(broker_addr, auth.get_user, username)

    def list_users(self, broker_addr: str, filter_text: str | None = None) -> list[User]:
        auth = self._auth_manager(broker_addr)
        return self._call(broker_addr, auth.list_users, filter_text)

    def create_acl(self, broker_addr: str, acl: Acl) -> None:
        auth = self._auth_manager(broker_addr)
        self._call(broker_addr, auth.create_acl, acl)

    def update_acl(self, broker_addr: str, acl: Acl) -> None:
        auth = self._auth_manager(broker_addr)
        self._call(broker_addr, auth.update_acl, acl)

    def delete_acl(self, broker_addr: str, subject: str, resource: str | None = None) -> None:
        auth = self._auth_manager(broker_addr)
        self._call(broker_addr, auth.delete_acl, subject, resource)

    def get_acl(self, broker_addr: str, subject: str) -> Acl | None:
        auth = self._auth_manager(broker_addr)
        return self._call(broker_addr, auth.get_acl, subject)

    def list_acls(self, broker_addr: str, subject_filter: str | None = None,
                  resource_filter: str | None = None) -> list[Acl]:
        auth = self._auth_manager(broker_addr)
        return self._call(broker_addr, auth.list_acls, subject_filter, resource_filter)

    # -- store maintenance (StoreMaintenance: local targets only) --------------------------------------
    def verify_store(self, progress: ProgressFn | None = None) -> VerifyReport:
        b = self._broker_for(self.config.broker_addr)
        return self._call(None, b.verify_store, progress)

    def lost_found_records(self) -> list[LostRecord]:
        b = self._broker_for(self.config.broker_addr)
        return self._call(None, b.lost_found_records)

    def rebuild_store(self, parts: list[str], master: str, verify: bool, config_file: str | None = None,
                      progress: Callable[[str, int, int], None] | None = None, force: bool = False
                      ) -> RebuildSummary:
        """Spark rebuild over the store's files; refused while a broker holds the store (unless verify)."""
        if not is_store_dir(self.store_dir):
            raise NotAStoreError(not_a_store_reason(self.store_dir))
        if not verify and is_store_locked(self.store_dir):
            # not "use -n": a rebuild rewrites the store's files, which only a stopped broker leaves alone
            raise self._busy("stop the broker first to rebuild its files (rebuildStore --verify checks them "
                             "beside it)")
        from spark.master_url import MasterUrlError, MasterUrlUsageError, check_master

        try:
            check_master(master)  # seconds, one line — before Spark retries for minutes
        except MasterUrlUsageError as e:  # the URL itself: a usage error (exit 2)
            raise UsageProblem(str(e)) from None
        except MasterUrlError as e:
            raise AdminError(str(e)) from None
        try:
            from spark.rebuild import (
                RebuildError,
                RebuildInterrupted,
                RebuildRefusedError,
                RebuildSparkError,
                run_rebuild,
            )
        except ImportError as e:
            raise AdminError(f"rebuildStore needs PySpark and the spark/ jobs: {e}") from None
        try:
            return run_rebuild(self.store_dir, config_file, parts, master, verify, progress, force=force)
        except RebuildInterrupted as e:  # Ctrl-C: an interrupt that says what was written
            raise RebuildInterruptedError(_first_line(str(e))) from None
        except (RebuildSparkError, RebuildRefusedError) as e:
            raise AdminError(_first_line(str(e))) from None
        except RebuildError as e:
            if "locked" in str(e) or "held" in str(e):
                raise self._busy() from None
            raise AdminError(_first_line(str(e))) from e
        except OSError as e:  # the driver's own writes (its staging directory, the swap): not Spark's
            raise AdminError(f"cannot write {e.filename or self.store_dir}: {e.strerror or e}") from e
        except Exception as e:  # noqa: BLE001 - a Py4J/Spark failure: its cause (--verbose: all of it)
            from spark.failure import failure_cause

            raise AdminError(f"Spark failed: {failure_cause(e)}") from e


def _topic_info(tc: TopicConfig) -> TopicInfo:
    return TopicInfo(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type,
                     tc.topic_sys_flag, tc.order, dict(tc.attributes))


def _group_info(g: SubscriptionGroupConfig) -> SubscriptionGroupInfo:
    from mqadmin.transport.values import SubscriptionGroupInfo  # not at start-up (test_cli_startup)

    return SubscriptionGroupInfo.of_config(g)


class RebuildInterruptedError(KeyboardInterrupt):
    """Ctrl-C stopped a Spark rebuild. Still a KeyboardInterrupt for callers that stop on one (a playbook
    reports the run as interrupted); ``message`` says what the store holds now (mqadmin prints it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _first_line(text: str) -> str:
    """The first non-blank line of a (Java) error text; the rest is for --verbose."""
    return next((line.strip() for line in text.splitlines() if line.strip()), text)[:500]

