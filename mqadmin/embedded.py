"""EmbeddedAdmin: the Admin interface over a local store directory, in-process.

Why this module exists: the default mode of every mqadmin command is a store directory on this
machine (DESIGN.md). Inspection opens the store READ-ONLY (no lock, no writes: safe beside a running
broker, even a Java one). State-changing calls take the store lock — through the Broker, which opens
the store writable — and when a running broker holds it, they fail with one line naming the ``-n``
address to use instead. Nothing here prints; commands render what these methods return.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from broker_core.auth.errors import AuthError
from broker_core.auth.evaluator import Explanation
from broker_core.auth.manager import AuthManager
from broker_core.auth.model import Acl, User
from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import BrokerError, ResponseCode
from broker_core.broker.filter.errors import FilterSyntaxError
from broker_core.broker.filter.factory import build_filter
from broker_core.config_loader import ConfigError
from broker_core.store.codec.message_id import decode_offset_msg_id
from broker_core.store.index_file import IndexFileError
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.store_lock import StoreLockedError, is_store_locked
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from broker_core.store.topic_config import TopicConfig
from mqadmin.admin import (
    BrokerIdentity,
    ConsumerProgressRow,
    DecodedMessageId,
    DeleteTopicPlan,
    GroupSummary,
    MessageRecord,
    OffsetChange,
    ProgressFn,
    QueueScan,
    QueueStatus,
    ResetPlan,
    SendResult,
    SubscriptionGroupInfo,
    TopicInfo,
)
from mqadmin.errors import AdminError, NotFoundError, StoreBusyError, WrongTargetError
from mqadmin.msgid import decode_message_id
from mqadmin.records import to_record
from mqadmin.timefmt import now_ms

MAX_OFFSET_TIMESTAMP = -1  # skipAccumulatedMessage: "reset to the max offset"
PULL_BATCH = 32
VERSION = "V5_3_2"  # the RocketMQ release whose formats and behaviour this build follows


class EmbeddedAdmin:
    """Admin over ``store_dir``; ``read_only`` decides whether the store lock may be taken."""

    def __init__(self, store_dir: str | Path, config_file: str | Path | None = None, read_only: bool = True,
                 clock: Callable[[], int] = now_ms) -> None:
        self.store_dir = Path(store_dir)
        self.read_only = read_only
        self.clock = clock
        try:
            self.config = BrokerConfig.load(config_file, self.store_dir)
        except (ConfigError, ValueError) as e:
            raise AdminError(str(e)) from None
        self._broker: Broker | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    def close(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            broker.shutdown()

    def __enter__(self) -> EmbeddedAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def broker(self) -> Broker:
        """The Broker over this store: read-only (no lock, no writes) or writable (holds the lock)."""
        if self._broker is None:
            if self.read_only:
                if not self.store_dir.is_dir():
                    raise NotFoundError(f"store directory {self.store_dir} does not exist "
                                        "(give --store DIR or set RMQ_STORE)")
            elif is_store_locked(self.store_dir):
                raise StoreBusyError(str(self.store_dir))
            try:
                self._broker = Broker(self.store_dir, dataclasses.replace(self.config), self.clock,
                                      read_only=self.read_only, audit_log_path=None)
            except StoreLockedError:
                raise StoreBusyError(str(self.store_dir)) from None
            except BrokerError as e:
                raise _admin_error(e) from None
            except AuthError as e:
                raise AdminError(e.message) from None
            except IndexFileError as e:
                raise AdminError(f"cannot open store {self.store_dir}: {e}; give --config with the store's "
                                 "maxHashSlotNum/maxIndexNum") from None
            except (OSError, ValueError) as e:
                raise AdminError(f"cannot open store {self.store_dir}: {e}") from None
        return self._broker

    def store(self) -> MessageStore:
        return self.broker().store

    def auth(self) -> AuthManager:
        return self.broker().auth_manager

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a Broker call, turning its errors into the CLI's (TOPIC_NOT_EXIST etc. -> not found)."""
        try:
            return fn(*args, **kwargs)
        except BrokerError as e:
            raise _admin_error(e) from None
        except AuthError as e:
            raise AdminError(e.message) from None

    # -- identity -------------------------------------------------------------------------------------
    def identity(self) -> BrokerIdentity:
        c = self.config
        return BrokerIdentity(c.broker_cluster_name, c.broker_name, c.broker_addr, c.broker_id)

    def check_target(self, cluster_name: str | None = None, broker_addr: str | None = None,
                     broker_name: str | None = None) -> list[BrokerIdentity]:
        """mqadmin's -c / -b / brokerName options, checked against the embedded broker's names."""
        me = self.identity()
        if cluster_name is not None and cluster_name.strip() != me.cluster_name:
            raise WrongTargetError(
                f"cluster {cluster_name.strip()!r} not found: this store's broker is in cluster "
                f"{me.cluster_name!r} (brokerClusterName in --config)")
        if broker_addr is not None and broker_addr.strip() != me.broker_addr:
            raise WrongTargetError(
                f"broker address {broker_addr.strip()!r} is not this store's broker ({me.broker_addr}); "
                "to reach another broker use -n <namesrv>")
        if broker_name is not None and broker_name.strip() != me.broker_name:
            raise WrongTargetError(
                f"broker {broker_name.strip()!r} not found: this store's broker is {me.broker_name!r} "
                "(brokerName in --config)")
        return [me]

    def get_broker_config(self) -> dict[str, str]:
        return self.config.to_properties()

    def broker_status(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of the embedded broker, plus what only the store directory can tell."""
        info = dict(self._call(self.broker().broker_runtime_info))
        usage = shutil.disk_usage(self.store_dir)
        info["brokerActive"] = str(is_store_locked(self.store_dir)).lower() if self.read_only else "true"
        info["commitLogDirCapacity"] = f"Total : {_gib(usage.total)}, Free : {_gib(usage.free)}."
        info["commitLogDiskRatio"] = f"{(usage.total - usage.free) / usage.total if usage.total else 0.0}"
        info["storePathRootDir"] = str(self.store_dir)
        info["topicCount"] = str(len(self.list_topics()))
        return dict(sorted(info.items()))

    def cluster_list(self) -> list[dict[str, Any]]:
        me = self.identity()
        info = self.broker_status()
        usage = shutil.disk_usage(self.store_dir)
        earliest = int(info.get("earliestMessageTimeStamp", "0") or 0)
        hours = (self.clock() - earliest) / 3_600_000 if earliest > 0 else 0.0
        tps_in = float((info.get("putTps") or "0").split()[0])
        tps_out = float((info.get("getTransferredTps") or "0").split()[0])

        def num(key: str) -> int:
            return int(info.get(key, "0") or 0)

        return [{
            "clusterName": me.cluster_name, "brokerName": me.broker_name, "brokerId": me.broker_id,
            "brokerAddr": me.broker_addr, "version": info.get("brokerVersionDesc", ""), "inTps": tps_in,
            "outTps": tps_out, "sendThreadPoolQueueSize": num("sendThreadPoolQueueSize"),
            "sendThreadPoolQueueHeadWaitTimeMills": num("sendThreadPoolQueueHeadWaitTimeMills"),
            "pullThreadPoolQueueSize": num("pullThreadPoolQueueSize"),
            "pullThreadPoolQueueHeadWaitTimeMills": num("pullThreadPoolQueueHeadWaitTimeMills"),
            "ackThreadPoolQueueSize": num("ackThreadPoolQueueSize"),
            "ackThreadPoolQueueHeadWaitTimeMills": num("ackThreadPoolQueueHeadWaitTimeMills"),
            "timerReadBehind": num("timerReadBehind"), "timerOffsetBehind": num("timerOffsetBehind"),
            "timerCongestNum": num("timerCongestNum"), "timerEnqueueTps": float(info.get("timerEnqueueTps", 0) or 0),
            "timerDequeueTps": float(info.get("timerDequeueTps", 0) or 0),
            "pageCacheLockTimeMills": num("pageCacheLockTimeMills"), "hours": hours,
            "space": (usage.total - usage.free) / usage.total if usage.total else 0.0,
            "activated": info.get("brokerActive") == "true",
            "inTotalYest": num("msgPutTotalTodayMorning") - num("msgPutTotalYesterdayMorning"),
            "outTotalYest": num("msgGetTotalTodayMorning") - num("msgGetTotalYesterdayMorning"),
            "inTotalToday": num("msgPutTotalTodayNow") - num("msgPutTotalTodayMorning"),
            "outTotalToday": num("msgGetTotalTodayNow") - num("msgGetTotalTodayMorning"),
        }]

    # -- topics ---------------------------------------------------------------------------------------
    def list_topics(self) -> list[str]:
        return sorted(tc.topic_name for tc in self._call(self.broker().list_topics))

    def topic_info(self, topic: str) -> TopicInfo:
        tc = self._call(self.broker().get_topic, topic)
        if tc is None:
            raise NotFoundError(f"topic [{topic}] not found in store {self.store_dir}")
        return _topic_info(tc)

    def _queue_ids(self, topic: str) -> list[int]:
        info = self.topic_info(topic)
        return list(range(max(info.read_queue_nums, info.write_queue_nums)))

    def topic_status(self, topic: str) -> list[QueueStatus]:
        stats = self._call(self.broker().topic_stats, topic)
        name = self.config.broker_name
        return [QueueStatus(name, q.queue_id, q.min_offset, q.max_offset, q.last_update_timestamp) for q in stats]

    def topic_route(self, topic: str) -> dict[str, Any]:
        info = self.topic_info(topic)
        me = self.identity()
        return {
            "brokerDatas": [{"brokerAddrs": {me.broker_id: me.broker_addr}, "brokerName": me.broker_name,
                             "cluster": me.cluster_name, "enableActingMaster": False}],
            "filterServerTable": {},
            "queueDatas": [{"brokerName": me.broker_name, "perm": info.perm, "readQueueNums": info.read_queue_nums,
                            "topicSysFlag": info.topic_sys_flag, "writeQueueNums": info.write_queue_nums}],
        }

    def update_topic(self, topic: TopicInfo) -> TopicInfo:
        """UPDATE_AND_CREATE_TOPIC; ``topic.attributes`` holds mqadmin's signed changes (+k=v / -k)."""
        tc = self._call(self.broker().create_or_update_topic, topic.topic_name, topic.read_queue_nums,
                        topic.write_queue_nums, topic.perm, topic.order, dict(topic.attributes),
                        topic.topic_filter_type, topic.topic_sys_flag)
        return _topic_info(tc)

    def delete_topic(self, topic: str, cluster_name: str, dry_run: bool = False) -> DeleteTopicPlan:
        self.check_target(cluster_name=cluster_name)
        broker = self.broker()
        tc = self._call(broker.get_topic, topic)
        queues = sorted(q for t, q in broker.store.consume_queues if t == topic)
        if tc is None and not queues:
            raise NotFoundError(f"topic [{topic}] not found in store {self.store_dir}")
        messages = sum(broker.get_max_offset(topic, q) - broker.get_min_offset(topic, q) for q in queues)
        groups = sorted(broker.which_group_by_topic(topic))
        plan = DeleteTopicPlan(topic, cluster_name, len(queues), messages, groups, applied=False)
        if not dry_run:
            self._call(broker.delete_topic, topic)
            plan.applied = True
        return plan

    # -- groups and offsets ---------------------------------------------------------------------------
    def list_groups(self) -> list[str]:
        broker = self.broker()
        groups = {g.group_name for g in self._call(broker.list_subscription_groups)}
        for topic in self.list_topics():
            groups.update(broker.which_group_by_topic(topic))
        return sorted(groups)

    def topic_groups(self, topic: str) -> list[str]:
        """Groups holding offsets on ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO, stored part)."""
        return sorted(self.broker().which_group_by_topic(topic))

    def update_sub_group(self, config: SubscriptionGroupInfo) -> SubscriptionGroupInfo:
        settings: dict[str, Any] = {
            "consume_enable": config.consume_enable, "consume_from_min_enable": config.consume_from_min_enable,
            "consume_broadcast_enable": config.consume_broadcast_enable,
            "consume_message_orderly": config.consume_message_orderly, "retry_queue_nums": config.retry_queue_nums,
            "retry_max_times": config.retry_max_times, "broker_id": config.broker_id,
            "which_broker_when_consume_slowly": config.which_broker_when_consume_slowly,
            "notify_consumer_ids_changed_enable": config.notify_consumer_ids_changed_enable,
        }
        if config.group_retry_policy:
            settings["group_retry_policy"] = json.loads(config.group_retry_policy)
        if config.attributes:
            current = self._call(self.broker().get_subscription_group, config.group_name)
            attrs = dict(current.attributes) if current is not None else {}
            for key, value in config.attributes.items():
                if key.startswith("-"):
                    attrs.pop(key[1:], None)
                else:
                    attrs[key.lstrip("+")] = value
            settings["attributes"] = attrs
        sgc = self._call(self.broker().create_or_update_subscription_group, config.group_name, **settings)
        return _group_info(sgc)

    def delete_sub_group(self, group: str, remove_offset: bool = False, delete_retry_topics: bool = False) -> None:
        broker = self.broker()
        existed = self._call(broker.delete_subscription_group, group, remove_offset)
        if delete_retry_topics:
            for topic in (broker.retry_topic_of(group), broker.dlq_topic_of(group)):
                if self._call(broker.get_topic, topic) is not None:
                    self._call(broker.delete_topic, topic)
        if not existed and not remove_offset:
            raise NotFoundError(f"subscription group [{group}] does not exist in store {self.store_dir}")

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ConsumerProgressRow]:
        """GET_CONSUME_STATS of the embedded broker (no connected clients, so no client ip)."""
        stats = self._call(self.broker().consume_stats, group, topic)
        if not stats:
            what = f"group [{group}]" + (f" on topic [{topic}]" if topic else "")
            raise NotFoundError(f"Not found the consumer group consume stats: {what} has no consume offsets "
                                f"in store {self.store_dir}")
        rows = []
        for s in stats:
            consumer = max(s.consumer_offset, 0)
            inflight = s.inflight or max(0, s.pull_offset - consumer)
            rows.append(ConsumerProgressRow(s.topic, self.config.broker_name, s.queue_id, s.broker_offset, consumer,
                                            inflight, s.last_timestamp))
        return rows

    def group_summaries(self) -> list[GroupSummary]:
        out = []
        for group in self.list_groups():
            stats = self._call(self.broker().consume_stats, group)
            diff = sum(max(0, s.broker_offset - max(s.consumer_offset, 0)) for s in stats)
            out.append(GroupSummary(group, 0, "OFFLINE", "", "", 0.0, diff))
        return out

    def _plan(self, group: str, topic: str, entries: list[Any], timestamp: int, force: bool,
              applied: bool) -> ResetPlan:
        broker = self.broker()
        changes = []
        for e in entries:
            ts_off = e.new_offset
            reset = ts_off if (force or e.old_offset < 0 or ts_off < e.old_offset) else e.old_offset
            changes.append(OffsetChange(self.config.broker_name, e.queue_id, broker.get_max_offset(topic, e.queue_id),
                                        e.old_offset, ts_off, reset))
        return ResetPlan(group, topic, timestamp, force, changes, applied)

    def reset_offset_by_time(self, group: str, topic: str, timestamp: int, force: bool = True,
                             queue_id: int | None = None, offset: int | None = None,
                             dry_run: bool = False) -> ResetPlan:
        """INVOKE_BROKER_TO_RESET_OFFSET (server-side reset): plan, then apply unless ``dry_run``."""
        broker = self.broker()
        if offset is not None:
            entries = self._call(broker.plan_reset_offset, group, topic, offset=offset, queue_id=queue_id)
        else:
            entries = self._call(broker.plan_reset_offset, group, topic, timestamp, queue_id=queue_id)
        plan = self._plan(group, topic, entries, timestamp, force, applied=False)
        if not dry_run:
            if not force:
                entries = [type(e)(e.topic, e.queue_id, e.old_offset, c.reset_offset)
                           for e, c in zip(entries, plan.changes, strict=True)]
            self._call(broker.apply_reset_offset, group, entries)
            plan.applied = True
        return plan

    def skip_accumulated_message(self, group: str, topic: str, force: bool = True,
                                 dry_run: bool = False) -> ResetPlan:
        return self.reset_offset_by_time(group, topic, MAX_OFFSET_TIMESTAMP, force, dry_run=dry_run)

    def clone_group_offset(self, src_group: str, dest_group: str, topic: str) -> ResetPlan:
        entries = self._call(self.broker().clone_group_offset, src_group, dest_group, topic)
        return self._plan(dest_group, topic, entries, 0, True, applied=True)

    # -- messages -------------------------------------------------------------------------------------
    def query_msg_by_id(self, topic: str, msg_id: str) -> list[MessageRecord]:
        """An offset msgId is read at its commitlog offset; anything else falls back to the unique key."""
        store = self.store()
        try:
            decoded = decode_offset_msg_id(msg_id)
        except ValueError:
            decoded = None
        if decoded is not None and 0 <= decoded.commit_log_offset < store.get_max_phy_offset():
            m = store.look_message_by_offset(decoded.commit_log_offset)
            if m is not None and m.commit_log_offset == decoded.commit_log_offset \
                    and m.msg_id.upper() == msg_id.strip().upper():
                return [to_record(m)]
        return self.query_msg_by_unique_key(topic, msg_id.strip(), 32)

    def query_msg_by_key(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                         end: int = 2**63 - 1) -> list[MessageRecord]:
        """QUERY_MESSAGE by key, then mqadmin's client-side filter: a KEYS token must equal ``key``."""
        self.topic_info(topic)
        found = self.store().query_message(topic, key, max_num, begin, end, exact=False)
        return [to_record(m) for m in found if m.topic == topic and key in (m.keys or "").split(" ")]

    def query_msg_by_unique_key(self, topic: str, key: str, max_num: int = 32) -> list[MessageRecord]:
        self.topic_info(topic)
        found = self.store().query_message(topic, key, max_num, exact=False)
        records = [to_record(m) for m in found if m.topic == topic and m.uniq_key == key]
        return sorted(records, key=lambda r: r.store_timestamp)

    def query_msg_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageRecord:
        self.check_target(broker_name=broker_name)
        self.topic_info(topic)
        result = self.store().get_messages(topic, queue_id, offset, 1)
        if result.status is not GetMessageStatus.FOUND or not result.messages:
            raise NotFoundError(f"no message at offset {offset} of {topic}/{queue_id} on {broker_name}: "
                                f"{result.status.value} (queue holds [{result.min_offset}, {result.max_offset}))")
        return to_record(result.messages[0])

    def _filter(self, sub_expression: str | None):  # noqa: ANN202 - MessageFilter
        try:
            return build_filter("TAG", sub_expression or "*")
        except FilterSyntaxError as e:
            raise AdminError(f"invalid subExpression {sub_expression!r}: {e}") from None

    def _scan_queue(self, topic: str, qid: int, begin: int, end: int, message_filter: Any,
                    progress: ProgressFn | None, max_num: int | None = None) -> QueueScan:
        store = self.store()
        scan = QueueScan(self.config.broker_name, topic, qid, store.get_min_offset_in_queue(topic, qid),
                         store.get_max_offset_in_queue(topic, qid), begin, end)
        offset = begin
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        while offset < end and (max_num is None or len(scan.messages) < max_num):
            want = PULL_BATCH if max_num is None else min(PULL_BATCH, max_num - len(scan.messages))
            result = store.get_messages(topic, qid, offset, want, message_filter)
            status = result.status
            for m in result.messages:
                if m.queue_offset >= end:
                    break
                scan.messages.append(to_record(m))
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
            if progress is not None:
                progress(min(offset, end) - begin, max(end - begin, 1))
            if status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                              GetMessageStatus.OFFSET_FOUND_NULL):
                break
        scan.status = status.value
        return scan

    def _range(self, topic: str, qid: int, begin_ts: int | None, end_ts: int | None) -> tuple[int, int]:
        store = self.store()
        lo = store.get_min_offset_in_queue(topic, qid)
        hi = store.get_max_offset_in_queue(topic, qid)
        if begin_ts is not None:
            lo = max(lo, store.get_offset_in_queue_by_time(topic, qid, begin_ts))
        if end_ts is not None:
            hi = min(hi, store.get_offset_in_queue_by_time(topic, qid, end_ts))
        return lo, hi

    def print_msg_by_queue(self, topic: str, broker_name: str, queue_id: int, sub_expression: str = "*",
                           begin_timestamp: int | None = None, end_timestamp: int | None = None,
                           progress: ProgressFn | None = None) -> QueueScan:
        self.check_target(broker_name=broker_name)
        self.topic_info(topic)
        if queue_id not in self._queue_ids(topic):
            raise NotFoundError(f"queue {queue_id} of topic [{topic}] does not exist")
        lo, hi = self._range(topic, queue_id, begin_timestamp, end_timestamp)
        return self._scan_queue(topic, queue_id, lo, hi, self._filter(sub_expression), progress)

    def iter_print_msg(self, topic: str, sub_expression: str = "*", begin_timestamp: int | None = None,
                       end_timestamp: int | None = None, progress: ProgressFn | None = None) -> Iterator[QueueScan]:
        self.topic_info(topic)
        message_filter = self._filter(sub_expression)
        for qid in self._queue_ids(topic):
            lo, hi = self._range(topic, qid, begin_timestamp, end_timestamp)
            yield self._scan_queue(topic, qid, lo, hi, message_filter, progress)

    def send_message(self, topic: str, body: bytes, keys: str | None = None, tags: str | None = None,
                     broker_name: str | None = None, queue_id: int | None = None) -> SendResult:
        """SEND_MESSAGE_V2 through the embedded broker (it adds UNIQ_KEY and picks the queue)."""
        if broker_name is not None:
            self.check_target(broker_name=broker_name)
        props: dict[str, str] = {}
        if keys:
            props["KEYS"] = keys
        if tags:
            props["TAGS"] = tags
        props["WAIT"] = "true"
        r = self._call(self.broker().send_message, topic, body, props, queue_id=queue_id,
                       producer_group=str(self.clock()))
        return SendResult(self.config.broker_name, r.queue_id, str(r.status), r.uniq_key, r.msg_id, r.queue_offset)

    def consume_message(self, topic: str, group: str, broker_name: str | None = None,
                        queue_id: int | None = None, offset: int | None = None,
                        begin_timestamp: int | None = None, end_timestamp: int | None = None,
                        max_num: int = 128) -> list[QueueScan]:
        """A pull consumer's read (mqadmin consumeMessage): nothing is committed."""
        self.topic_info(topic)
        if broker_name is not None:
            self.check_target(broker_name=broker_name)
        now = self.clock()
        for name, ts in (("beginTimestamp", begin_timestamp), ("endTimestamp", end_timestamp)):
            if ts is not None and ts > now:
                raise AdminError(f"{name} {ts} is in the future (now is {now})")
        qids = self._queue_ids(topic)
        if queue_id is not None:
            if queue_id not in qids:
                raise NotFoundError(f"queue {queue_id} of topic [{topic}] does not exist")
            qids = [queue_id]
        scans = []
        remaining = max_num
        for qid in qids:
            if remaining <= 0:
                break
            lo, hi = self._range(topic, qid, begin_timestamp, end_timestamp)
            if offset is not None:
                lo = offset
            scan = self._scan_queue(topic, qid, lo, hi, None, None, remaining)
            remaining -= len(scan.messages)
            scans.append(scan)
        return scans

    def decode_message_id(self, msg_id: str) -> DecodedMessageId:
        return decode_message_id(msg_id, self.clock)

    def message_tracks(self, record: MessageRecord) -> list[dict[str, Any]]:
        """Which groups consumed the message, judged by their committed offsets on its queue."""
        broker = self.broker()
        tracks = []
        for group in self.topic_groups(record.topic):
            committed = broker.query_offset(group, record.topic, record.queue_id)
            consumed = committed > record.queue_offset
            tracks.append({"consumerGroup": group,
                           "trackType": "SUBSCRIBED_AND_CONSUMED" if consumed else "NOT_CONSUME_YET",
                           "exceptionDesc": None})
        return tracks

    # -- ACL 2.0 --------------------------------------------------------------------------------------
    def _auth_call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AuthError as e:
            raise AdminError(e.message) from None

    def create_user(self, username: str, password: str, user_type: str | None = None) -> User:
        return self._auth_call(self.auth().create_user, username, password, user_type)

    def update_user(self, username: str, password: str | None = None, user_type: str | None = None,
                    user_status: str | None = None) -> User:
        return self._auth_call(self.auth().update_user, username, password, user_type, user_status)

    def delete_user(self, username: str) -> None:
        self._auth_call(self.auth().delete_user, username)

    def get_user(self, username: str) -> User | None:
        return self._auth_call(self.auth().get_user, username)

    def list_users(self, filter_text: str | None = None) -> list[User]:
        return self._auth_call(self.auth().list_users, filter_text)

    def create_acl(self, acl: Acl) -> Acl:
        return self._auth_call(self.auth().create_acl, acl)

    def update_acl(self, acl: Acl) -> Acl:
        return self._auth_call(self.auth().update_acl, acl)

    def delete_acl(self, subject: str, resource: str | None = None) -> None:
        self._auth_call(self.auth().delete_acl, subject, resource)

    def get_acl(self, subject: str) -> Acl | None:
        return self._auth_call(self.auth().get_acl, subject)

    def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None) -> list[Acl]:
        return self._auth_call(self.auth().list_acls, subject_filter, resource_filter)

    def copy_users_to(self, target: EmbeddedAdmin, usernames: list[str] | None = None) -> list[str]:
        return self._auth_call(self.auth().copy_users_to, target.auth(), usernames)

    def copy_acls_to(self, target: EmbeddedAdmin, subjects: list[str] | None = None,
                     progress: ProgressFn | None = None) -> list[str]:
        source = self.auth()
        dest = target.auth()
        wanted = subjects if subjects is not None else [a.subject.key for a in self._auth_call(source.list_acls)]
        copied = []
        for i, subject in enumerate(wanted, 1):
            copied.extend(self._auth_call(source.copy_acls_to, dest, [subject]))
            if progress is not None:
                progress(i, len(wanted))
        return copied

    def explain_acl(self, subject: str, resource: str, actions: list[str], source_ip: str | None) -> Explanation:
        return self._auth_call(self.auth().explain, subject, resource, actions, source_ip)

    # -- store maintenance ----------------------------------------------------------------------------
    def verify_store(self, progress: ProgressFn | None = None) -> Any:
        from broker_core.store.verify import verify_store

        return verify_store(self.store(), progress)

    def rebuild_store(self, parts: list[str], master: str, verify: bool, config_file: str | None = None,
                      progress: Callable[[str, int, int], None] | None = None) -> Any:
        if not self.store_dir.is_dir():
            raise NotFoundError(f"store directory {self.store_dir} does not exist")
        if not verify and is_store_locked(self.store_dir):
            raise StoreBusyError(str(self.store_dir))
        try:
            from spark.rebuild import RebuildError, run_rebuild
        except ImportError as e:
            raise AdminError(f"rebuildStore needs PySpark and the spark/ jobs: {e}") from None
        try:
            return run_rebuild(self.store_dir, config_file, parts, master, verify, progress)
        except RebuildError as e:
            if "locked" in str(e) or "held" in str(e):
                raise StoreBusyError(str(self.store_dir)) from None
            raise AdminError(str(e)) from None


def _admin_error(e: BrokerError) -> AdminError:
    if e.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                  ResponseCode.QUERY_NOT_FOUND, ResponseCode.NO_MESSAGE):
        return NotFoundError(e.message)
    return AdminError(e.message)


def _topic_info(tc: TopicConfig) -> TopicInfo:
    return TopicInfo(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type,
                     tc.topic_sys_flag, tc.order, dict(tc.attributes))


def _group_info(g: SubscriptionGroupConfig) -> SubscriptionGroupInfo:
    return SubscriptionGroupInfo(
        g.group_name, g.consume_enable, g.consume_from_min_enable, g.consume_broadcast_enable,
        g.consume_message_orderly, g.retry_queue_nums, g.retry_max_times,
        json.dumps(g.group_retry_policy, separators=(",", ":")) if g.group_retry_policy else None, g.broker_id,
        g.which_broker_when_consume_slowly, g.notify_consumer_ids_changed_enable, dict(g.attributes))


def _gib(n: int) -> str:
    return f"{n / 1024 ** 3:.2f} GiB"


def store_dir_from(value: str | None) -> Path:
    """``--store``, else $RMQ_STORE, else ./store (DESIGN.md defaults)."""
    return Path(value or os.environ.get("RMQ_STORE") or "./store")
