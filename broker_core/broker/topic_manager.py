"""Topics: validation, system topics, create/update/delete, auto-creation on send (TopicConfigManager).

Why: every send, pull and admin call resolves its topic here, so the naming rules, the permission
bits and the ``queue.type`` rule are enforced once. Deleted topics are remembered with the commitlog
offset at deletion (``config/deletedTopics.json``) so their old records are never re-dispatched into
a consume queue when the store recovers — the topic stays deleted after a restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from broker_core.store.config_file import ConfigWriteError, write_config_json
from broker_core.store.deleted_topics import DELETED_TOPICS_FILE, deleted_before_cut, read_deleted_topics
from broker_core.store.message_store import MessageStore
from broker_core.store.topic_config import (
    BATCH_CQ,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    QUEUE_TYPE_KEY,
    TopicConfig,
)

from .broker_config import BrokerConfig
from .errors import (
    BrokerSystemError,
    InvalidParameterError,
    ServiceNotAvailableError,
    TopicNotExistError,
    config_written,
)
from .limits import JAVA_INT_MAX, JAVA_INT_MIN, MAX_TOPIC_QUEUE_NUMS
from .topic_attributes import QUEUE_TYPE, alter_attributes, parse_attribute_modifications
from .topic_validator import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    REPLY_TOPIC_POSTFIX,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SCHEDULE_TOPIC_QUEUE_NUM,
    SYNC_BROKER_MEMBER_GROUP_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TIMER_TOPIC,
    revive_topic,
    validate_topic,
)

TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def topic_fields_problem(read: int, write: int, perm: int, topic_filter_type: str, topic_sys_flag: int) -> str | None:
    """Why UPDATE_AND_CREATE_TOPIC refuses these queue numbers, perm, filter type or sys flag (None: it
    does not). One function, because mqadmin's updateTopicList judges a whole file with the broker's
    own rules before it sends any of it."""
    if read < 0 or write < 0 or (read == 0 and write == 0):
        return f"queue numbers must be >= 0 and not both 0 (read={read}, write={write})"
    if max(read, write) > MAX_TOPIC_QUEUE_NUMS:
        return f"queue numbers must be <= {MAX_TOPIC_QUEUE_NUMS} (read={read}, write={write})"
    if not JAVA_INT_MIN <= topic_sys_flag <= JAVA_INT_MAX:
        return f"topicSysFlag must fit a Java int, got {topic_sys_flag}"
    if not 0 <= perm <= 15:
        return f"perm must be a bit set of 8/4/2/1 (0..15), got {perm}"
    if topic_filter_type not in TOPIC_FILTER_TYPES:
        return f"topicFilterType must be SINGLE_TAG or MULTI_TAG, got {topic_filter_type!r}"
    return None


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    """PermName#perm2String: ``RW-`` style."""
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + \
        ("X" if perm & PERM_INHERIT else "-")


class TopicManager:
    def __init__(self, store: MessageStore, config: BrokerConfig, clock: Callable[[], int],
                 read_only: bool = False) -> None:
        self.store = store
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.table = store.topic_table
        self.system_topics: set[str] = set(SYSTEM_TOPICS)
        self.deleted_topics: dict[str, int] = {}  # topic -> commitlog max offset when deleted
        self._lock = threading.RLock()
        self.change_listeners: list[Callable[[str, TopicConfig | None], None]] = []

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def _deleted_path(self) -> Path:
        return self.store.config_dir / DELETED_TOPICS_FILE

    def load_deleted_topics(self) -> None:
        """Read tombstones before the store opens so recovery can skip a deleted topic's records."""
        self.deleted_topics = read_deleted_topics(self.store.config_dir)

    def dispatch_filter(self, topic: str, commit_log_offset: int) -> bool:
        """False for a record of a deleted topic written before the deletion (the store's RecordFilter)."""
        return not deleted_before_cut(self.deleted_topics, topic, commit_log_offset)

    def _tombstone(self, topics: list[str], cut: int) -> None:
        """Remember, on disk before their queues go, that the records of ``topics`` below ``cut`` are
        deleted (recovery must not dispatch them into a queue of the same name made later)."""
        before = {t: self.deleted_topics.get(t) for t in topics}
        for t in topics:
            self.deleted_topics[t] = cut
        try:
            self._persist_deleted()
        except ConfigWriteError as e:  # not on disk: the deletion does not happen
            for t, old in before.items():
                if old is None:
                    self.deleted_topics.pop(t, None)
                else:
                    self.deleted_topics[t] = old
            raise BrokerSystemError(f"{e}; topic {', '.join(topics)} was not deleted") from e

    def _persist_deleted(self) -> None:
        write_config_json(self._deleted_path, {"deletedTopicTable": dict(self.deleted_topics)})

    def init(self) -> None:
        """System topics as RocketMQ's TopicConfigManager#init; on a store without topics.json, also the
        topics known only by their queues (see ``_infer_from_queues``)."""
        before = {n: t.to_json() for n, t in self.table.topics.items()}
        cfg = self.config
        self._system(RMQ_SYS_SELF_TEST_TOPIC, 1, 1)
        if cfg.auto_create_topic_enable:
            self._system(AUTO_CREATE_TOPIC_KEY_TOPIC, cfg.default_topic_queue_nums, cfg.default_topic_queue_nums,
                         PERM_INHERIT | PERM_READ | PERM_WRITE)
        self._system(RMQ_SYS_BENCHMARK_TOPIC, 1024, 1024)
        self._system(cfg.broker_cluster_name, 16, 16,
                     PERM_INHERIT | (PERM_READ | PERM_WRITE if cfg.cluster_topic_enable else 0))
        self._system(cfg.broker_name, 1, 1,
                     PERM_INHERIT | (PERM_READ | PERM_WRITE if cfg.broker_topic_enable else 0))
        self._system(RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1)
        self._system(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, SCHEDULE_TOPIC_QUEUE_NUM)
        if cfg.trace_topic_enable:
            self._system(cfg.msg_trace_topic_name, 1, 1)
        self._system(f"{cfg.broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1, 1)
        self._system(revive_topic(cfg.broker_cluster_name), cfg.revive_queue_num, cfg.revive_queue_num)
        self._system(SYNC_BROKER_MEMBER_GROUP_PREFIX + cfg.broker_name, 1, 1, PERM_INHERIT)
        self._system(RMQ_SYS_TRANS_HALF_TOPIC, 1, 1)
        self._system(RMQ_SYS_TRANS_OP_HALF_TOPIC, 1, 1)
        if cfg.store.timer_wheel_enable:
            self._system(TIMER_TOPIC, 1, 1)
        if not self.table.on_disk:
            self._infer_from_queues()
        after = {n: t.to_json() for n, t in self.table.topics.items()}
        if after != before and not self.read_only:
            self.table.data_version.next_version(self.clock())
            self.table.persist()

    def _system(self, name: str, read: int, write: int, perm: int = PERM_READ | PERM_WRITE) -> None:
        self.system_topics.add(name)
        # Java rebuilds system topic configs at every start, then lets topics.json override them.
        if name not in self.table.topics:
            self.table.topics[name] = TopicConfig(name, read, write, perm)

    def _infer_from_queues(self) -> None:
        """A store written without topics.json (e.g. a golden store): its queues define its topics.

        Only then: where topics.json exists it is the topic table, as RocketMQ's TopicConfigManager
        loads it. A queue directory without a config there is an unused topic (an operator retired it
        by removing its config, or a deletion's queues came back): adopting it brought the topic back
        into topicList and topics.json, and cleanUnusedTopic, which removes exactly those queues,
        found nothing to remove."""
        queues: dict[str, int] = {}
        for topic in self.store.topics():
            ids = self.store.queue_ids(topic)
            if ids:
                queues[topic] = ids[-1] + 1
        for topic, n in queues.items():
            if topic in self.table.topics:
                continue
            attrs = {QUEUE_TYPE_KEY: BATCH_CQ} if self.store.queue_type_of(topic) == BATCH_CQ else {}
            self.table.topics[topic] = TopicConfig(topic, n, n, PERM_READ | PERM_WRITE, attributes=attrs)

    # -- queries ---------------------------------------------------------------------------------
    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def require(self, topic: str) -> TopicConfig:
        tc = self.table.get(topic)
        if tc is None:
            raise TopicNotExistError(f"No topic in this broker. topic: {topic}")
        return tc

    def list(self) -> list[TopicConfig]:
        return [self.table.topics[n] for n in sorted(self.table.topics)]

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    # -- changes ---------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self.read_only:
            raise ServiceNotAvailableError("the broker is open read-only; topic configs cannot change")

    def create_or_update(self, topic: str, read_queue_nums: int | None = None, write_queue_nums: int | None = None,
                         perm: int = PERM_READ | PERM_WRITE, order: bool = False,
                         attributes: str | Mapping[str, str] | None = None, topic_filter_type: str = "SINGLE_TAG",
                         topic_sys_flag: int = 0, system: bool = False) -> TopicConfig:
        """UPDATE_AND_CREATE_TOPIC. ``system=True`` is for the broker's own topics (retry, DLQ, ...)."""
        self._check_writable()
        request = self._checked_request(topic, read_queue_nums, write_queue_nums, perm, order, attributes,
                                        topic_filter_type, topic_sys_flag, system)
        with self._lock:
            old = self.table.get(topic)
            tc = self._next_config(old, *request)
            if old is not None and old.to_json() == tc.to_json():
                return old
            with config_written(f"topic {topic} was not {'updated' if old else 'created'}"), self.table.change():
                self._put(old, tc)
        self._notify(topic, tc)
        return tc

    def create_or_update_list(self, configs: Sequence[TopicConfig]) -> list[TopicConfig]:
        """UPDATE_AND_CREATE_TOPIC_LIST: every config, or none. ``attributes`` are signed changes
        (``+k``: v, ``-k``: ""), as the list's TopicConfig JSON carries them in Apache.

        Why all or nothing: Apache's AdminBrokerProcessor checks the whole list (name, system topic,
        MIXED) before it writes any; here every check create_or_update makes (queue numbers, perm,
        attributes, a queue.type change of a topic with messages) is made for every entry first, and
        the changes go into topics.json as one write, so a refused entry or a failed write changes no
        topic. A name given twice is planned in order, the later entry over the earlier one. Returns
        the configs as stored, in the list's order."""
        self._check_writable()
        requests = [self._checked_request(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm, c.order,
                                          c.attributes, c.topic_filter_type, c.topic_sys_flag, False)
                    for c in configs]
        with self._lock:
            planned: dict[str, TopicConfig] = {}
            stored: list[TopicConfig] = []
            for request in requests:
                name = request[0]
                old = planned.get(name) or self.table.get(name)
                tc = self._next_config(old, *request)
                if old is not None and old.to_json() == tc.to_json():
                    tc = old
                else:
                    planned[name] = tc
                stored.append(tc)
            changed = [(self.table.get(n), tc) for n, tc in planned.items()]
            if changed:
                names = ", ".join(planned)
                with config_written(f"none of the topics {names} was created or updated"), self.table.change():
                    for old, tc in changed:
                        self._put(old, tc)
        for _, tc in changed:
            self._notify(tc.topic_name, tc)
        return stored

    def _checked_request(self, topic: str, read_queue_nums: int | None, write_queue_nums: int | None, perm: int,
                         order: bool, attributes: str | Mapping[str, str] | None, topic_filter_type: str,
                         topic_sys_flag: int, system: bool
                         ) -> tuple[str, int, int, int, bool, dict[str, str], str, int]:
        """The request's checks that need no stored state (name, system topic, numbers, MIXED, the
        attribute syntax), raising InvalidParameterError/BrokerSystemError with RocketMQ's remarks; the
        request with defaults filled in and its attributes parsed into signed changes."""
        bad = validate_topic(topic)
        if bad:
            raise InvalidParameterError(bad)
        if not system and self.config.validate_system_topic_when_update_topic and self.is_system_topic(topic):
            raise InvalidParameterError(f"The topic[{topic}] is conflict with system topic.")
        n_default = self.config.default_topic_queue_nums
        read = n_default if read_queue_nums is None else int(read_queue_nums)
        write = n_default if write_queue_nums is None else int(write_queue_nums)
        bad = topic_fields_problem(read, write, perm, topic_filter_type, topic_sys_flag)
        if bad:
            raise InvalidParameterError(bad)
        mods = parse_attribute_modifications(attributes)
        if not self.config.enable_mixed_message_type and mods.get("+message.type") == "MIXED":
            raise InvalidParameterError("MIXED message type is not supported.")
        return topic, read, write, perm, bool(order), mods, topic_filter_type, topic_sys_flag

    def _next_config(self, old: TopicConfig | None, topic: str, read: int, write: int, perm: int, order: bool,
                     mods: dict[str, str], topic_filter_type: str, topic_sys_flag: int) -> TopicConfig:
        """The topic's config after the request, judged against ``old`` (the attribute changes, and
        queue.type, which only a topic without messages may change). Under ``_lock``; changes nothing."""
        has_data = old is not None and self.store.has_data(topic)
        new_attrs = alter_attributes(old is None, old.attributes if old else {}, mods,
                                     frozenset() if has_data else frozenset({QUEUE_TYPE.name}))
        if old is not None and has_data and old.queue_type != (new_attrs.get(QUEUE_TYPE_KEY) or "SimpleCQ"):
            raise _queue_type_unchangeable(topic, old.queue_type)
        return TopicConfig(topic, read, write, perm, topic_filter_type, topic_sys_flag, order, new_attrs)

    def _put(self, old: TopicConfig | None, tc: TopicConfig) -> None:
        """Store ``tc`` in the table (inside the caller's ``table.change()``)."""
        if old is not None and old.queue_type != tc.queue_type:
            # No data: drop the empty queues of the old type so the next dispatch builds the new
            # one (judged again with puts held: a message not yet dispatched is data too).
            if not self.store.drop_empty_queues(tc.topic_name, then=lambda: self.table.put(tc, self.clock())):
                raise _queue_type_unchangeable(tc.topic_name, old.queue_type)
        else:
            self.table.put(tc, self.clock())

    def create_if_absent(self, tc: TopicConfig) -> TopicConfig:
        """For the broker's own topics (retry/DLQ/POP retry): no name policing beyond the charset."""
        with self._lock:
            old = self.table.get(tc.topic_name)
            if old is not None:
                return old
            self._check_writable()
            with config_written(f"topic {tc.topic_name} was not created"), self.table.change():
                self.table.put(tc, self.clock())
        self._notify(tc.topic_name, tc)
        return tc

    def create_in_send(self, topic: str, default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
                       client_default_queue_nums: int | None = None, topic_sys_flag: int = 0) -> TopicConfig | None:
        """createTopicInSendMessageMethod: inherit from ``default_topic`` when its perm allows it."""
        with self._lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            default = self.table.get(default_topic)
            if default is None:
                return None
            perm = default.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.auto_create_topic_enable:
                perm = PERM_READ | PERM_WRITE
            if not is_inherited(perm):
                return None
            self._check_writable()
            want = self.config.default_topic_queue_nums if client_default_queue_nums is None \
                else client_default_queue_nums
            n = max(0, min(want, default.write_queue_nums))
            tc = TopicConfig(topic, n, n, perm & ~PERM_INHERIT, default.topic_filter_type, topic_sys_flag)
            with config_written(f"topic {topic} was not created"), self.table.change():
                self.table.put(tc, self.clock())
        self._notify(topic, tc)
        return tc

    def delete(self, topic: str, system: bool = False) -> bool:
        """DELETE_TOPIC_IN_BROKER: config, consume queues; offsets are cleaned by the caller."""
        self._check_writable()
        if topic is None or not topic.strip():
            raise InvalidParameterError("The specified topic is blank.")
        if not system and self.config.validate_system_topic_when_update_topic and self.is_system_topic(topic):
            raise InvalidParameterError(f"The topic[{topic}] is conflict with system topic.")
        unwritten: ConfigWriteError | None = None
        with self._lock:
            version = replace(self.table.data_version)
            old = self.table.remove(topic, self.clock())  # first: a send resolving it now finds none
            had_queues = bool(self.store.queue_ids(topic))
            if old is None and not had_queues:
                return False
            # The tombstone on disk is the deletion's commit point: when it cannot be written nothing
            # has changed; once it is, the queues go and the deletion stands, whatever comes next.
            try:
                self.store.delete_topics([topic], on_cut=lambda cut: self._tombstone([topic], cut))
            except BaseException:
                if old is not None:
                    self.table.topics[topic] = old
                    self.table.data_version = version
                raise
            try:
                self.table.persist()
            except ConfigWriteError as e:  # memory keeps the deletion: the next write of the table has it
                unwritten = e
        self._notify(topic, None)
        if unwritten is not None:
            raise BrokerSystemError(
                f"topic {topic} was deleted (its queues are gone and its messages will not be delivered), but "
                f"{unwritten}: until a later topic change writes that file, a restart lists the topic again, "
                "with no messages")
        return True

    def unused(self) -> list[str]:
        """Topics with consume queues but no config, system topics aside: what ``clean_unused`` removes."""
        with self._lock:
            return self.store.unused_topics(set(self.table.topics), keep=self.is_system_topic)

    def clean_unused(self) -> list[str]:
        """CLEAN_UNUSED_TOPIC: the queues of topics with no config in topics.json go, as RocketMQ's
        DefaultMessageStore#cleanUnusedTopic (system topics and LMQ queues stay). Each is tombstoned
        as deleteTopic does: without it the next start re-dispatched its newest records and its
        queue directory came back. Returns the topics whose queues were removed."""
        self._check_writable()
        with self._lock:  # a topic created meanwhile is retained, not cleaned
            return self.store.clean_unused_topics(set(self.table.topics), keep=self.is_system_topic,
                                                  on_cut=self._tombstone)

    def bump_data_version(self) -> None:
        """A new DataVersion without a topic change (what the routes advertise changed, e.g. the
        broker's permission), so the name server replaces the broker's queue data."""
        with self._lock:
            if self.read_only:
                self.table.data_version.next_version(self.clock())
                return
            with config_written("the routes' data version did not change"), self.table.change():
                self.table.data_version.next_version(self.clock())

    def replace(self, tc: TopicConfig) -> None:
        """Store a config as given (tools that copy configs between brokers)."""
        self._check_writable()
        with self._lock, config_written(f"topic {tc.topic_name} was not changed"), self.table.change():
            self.table.put(replace(tc, attributes=dict(tc.attributes)), self.clock())
        self._notify(tc.topic_name, tc)

    def _notify(self, topic: str, tc: TopicConfig | None) -> None:
        for listener in list(self.change_listeners):
            listener(topic, tc)


def _queue_type_unchangeable(topic: str, queue_type: str) -> BrokerSystemError:
    return BrokerSystemError(
        f"attempt to update an unchangeable attribute. key: queue.type (topic {topic} already has "
        f"messages in a {queue_type} queue; delete the topic first to change its queue type)")
