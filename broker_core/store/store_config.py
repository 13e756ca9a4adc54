"""MessageStoreConfig: the store's settings with RocketMQ's key names and defaults (spec §12)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..config_loader import (
    ConfigError,
    JavaLong,
    apply_properties,
    check_java_range,
    java_integer_fields,
    read_properties_file,
    snake_to_camel,
    values_of,
)
from .store_dir import MULTI_PATH_SPLITTER, commit_log_dir, expand_store_path, rebased_commit_log

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
# The least value of the keys the store cannot run below (their most is their Java type's).
MINIMUM = {"mapped_file_size_commit_log": 64, "mapped_file_size_consume_queue": 20,
           "mapper_file_size_batch_consume_queue": 46, "mapped_file_size_timer_log": 64,
           "mapped_file_size_consume_queue_ext": 64, "max_hash_slot_num": 1, "max_index_num": 2,
           "max_msgs_num_batch": 1, "max_message_size": 1, "sync_flush_timeout": 1, "flush_interval_commit_log": 1,
           "flush_interval_consume_queue": 1, "commit_interval_commit_log": 1, "clean_resource_interval": 1,
           "delete_file_batch_max": 1, "timer_precision_ms": 1, "file_reserved_time": 0,
           "flush_commit_log_least_pages": 0, "flush_consume_queue_least_pages": 0,
           "batch_dispatch_request_thread_pool_nums": 1, "max_transfer_bytes_on_message_in_memory": 1,
           "max_transfer_count_on_message_in_memory": 1, "max_transfer_bytes_on_message_in_disk": 1,
           "max_transfer_count_on_message_in_disk": 1}


@dataclass
class StoreConfig:
    """MessageStoreConfig's keys: an ``int`` field is a Java ``int``, a ``JavaLong`` one a Java ``long``
    (their ranges bound what a config file or updateBrokerConfig may set)."""

    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str = ""
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    mapper_file_size_batch_consume_queue: int = 300_000 * 46
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    message_index_enable: bool = True
    message_index_safe: bool = False
    flush_disk_type: str = ASYNC_FLUSH
    sync_flush_timeout: int = 5000
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    # transientStorePoolEnable: BatchCQ inner-batch records go into a write buffer and reach the
    # commitlog file in large writes (CommitLog.commit), every commitIntervalCommitLog ms at the latest
    # in a started store; readers and dispatch see only committed records. See ``write_buffer_enabled``.
    transient_store_pool_enable: bool = False
    commit_interval_commit_log: int = 200
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    # Past diskSpaceCleanForciblyRatio, delete commitlog files whether expired or not (Apache's cleanAtOnce
    # = isCleanFileForciblyEnable() && cleanImmediately). false: only expired files ever go, however full
    # the disk; the write guard at diskMaxUsedSpaceRatio still refuses new messages on a full disk.
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000
    delete_file_batch_max: int = 10
    max_message_size: int = 1024 * 1024 * 4
    # How much one read of a queue (a pull, a pop, mqadmin's reads) hands out, as DefaultMessageStore's
    # isTheBatchFull: a batch ends before the unit that would take it past these bytes or once it holds
    # this many messages, the first message always going out alone. "In memory": the unit lies within
    # accessMessageInMemoryMaxRatio percent of the machine's memory of the commitlog's end (the page
    # cache likely holds it); older units are read from disk and batched by the smaller disk limits.
    # Without these a pull of 32 messages of 512 KiB made a 16.7 MB answer, past every client's 16 MiB
    # frame limit, and the consumer's connection was closed at each pull: the queue was never read.
    max_transfer_bytes_on_message_in_memory: int = 1024 * 256
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 1024 * 64
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    # Apache's key spells CRC in capitals (camel_to_snake reads both spellings; only this one is listed)
    check_crc_on_recover: bool = field(default=True, metadata={"key": "checkCRCOnRecover"})
    auto_message_version_on_topic_len: bool = True
    # ConsumeQueueExt (consumequeue_ext/): tags hash, store time and the SQL92 filter bitmap per unit.
    # bitMapLengthConsumeQueueExt is the bitmap's bit count; the broker sets it to its bloom filter's m.
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64
    # ConcurrentReputMessageService: parse big commitlog blocks in parallel, dispatch in order
    enable_build_consume_queue_concurrently: bool = False
    batch_dispatch_request_thread_pool_nums: int = 16
    duplication_enable: bool = False
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    flush_delay_offset_interval: JavaLong = 10_000
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_roll_window_slot: int = 3600 * 24 * 2
    timer_max_delay_sec: int = 3600 * 24 * 3
    timer_flush_interval_ms: int = 1000
    timer_congest_num_each_slot: int = 2**31 - 1
    broker_role: str = "ASYNC_MASTER"
    # Only Apache's file layout: consume queues in files (storeType=default), one plain commitlog. RocksDB
    # consume queues (defaultRocksDB) and the DLedger commitlog are refused, not silently replaced by it.
    store_type: str = "default"
    enable_d_leger_commit_log: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Refuse values the store cannot run with, naming the key (ConfigError is a ValueError).

        Why: ``mappedFileSizeConsumeQueue=0`` used to surface as a ZeroDivisionError deep in a queue,
        and ``flushDiskType=WHATEVER`` silently meant ASYNC.
        """
        if MULTI_PATH_SPLITTER in self.store_path_commit_log:  # Apache 5.x's MultiPathMappedFileQueue
            raise ConfigError(f"storePathCommitLog={self.store_path_commit_log!r}: multi-path commitlogs "
                              f"('{MULTI_PATH_SPLITTER}'-separated directories) are not supported; name one directory")
        if self.store_type.strip().lower() != "default":
            raise ConfigError(f"storeType={self.store_type} is not supported: this broker keeps consume queues in "
                              "files (storeType=default)")
        if self.enable_d_leger_commit_log:
            raise ConfigError("enableDLegerCommitLog=true: DLedger commitlog is not supported")
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ConfigError(f"flushDiskType={self.flush_disk_type!r}: expected {ASYNC_FLUSH} or {SYNC_FLUSH}")
        percentages = ("disk_max_used_space_ratio", "disk_space_clean_forcibly_ratio", "disk_space_warning_level_ratio")
        for name in percentages:
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= 100:
                raise ConfigError(f"{snake_to_camel(name)}={value!r}: must be a percentage in [1, 100]")
        ratio = self.access_message_in_memory_max_ratio  # 0: every unit counts as on disk
        if not isinstance(ratio, int) or isinstance(ratio, bool) or not 0 <= ratio <= 100:
            raise ConfigError(f"accessMessageInMemoryMaxRatio={ratio!r}: must be a percentage in [0, 100]")
        # Every integer key within its Java type's range (int or long, from the field's type), and the
        # keys above within their own lower bounds too: 10^22 reached struct.pack and time.sleep.
        for name, java in java_integer_fields(StoreConfig).items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{snake_to_camel(name)}={value!r}: must be an integer")
            check_java_range(snake_to_camel(name), value, java, lo=MINIMUM.get(name))
        try:
            levels = parse_delay_levels(self.message_delay_level)
        except ValueError as e:
            raise ConfigError(f"messageDelayLevel={self.message_delay_level!r}: {e}") from None
        if not levels:  # Java's parseDelayLevel fails on "" too; refused here, before a store is opened
            raise ConfigError(f"messageDelayLevel={self.message_delay_level!r}: defines no level")

    @property
    def write_buffer_enabled(self) -> bool:
        """RocketMQ's ``isTransientStorePoolEnable``: the write buffer only under ASYNC_FLUSH on a master
        (a SYNC_FLUSH put waits for its bytes on disk, so they must be in the file at once)."""
        return self.transient_store_pool_enable and self.flush_disk_type == ASYNC_FLUSH and self.broker_role != "SLAVE"

    @property
    def root(self) -> Path:
        return expand_store_path(self.store_path_root_dir)

    @property
    def commit_log_dir(self) -> Path:
        return commit_log_dir(self.store_path_commit_log, self.root)

    @property
    def consume_queue_file_size(self) -> int:
        """Java rounds the configured CQ size up to a whole number of 20-byte units."""
        return -(-self.mapped_file_size_consume_queue // 20) * 20

    @property
    def batch_consume_queue_file_size(self) -> int:
        return -(-self.mapper_file_size_batch_consume_queue // 46) * 46

    @classmethod
    def from_properties(cls, props: dict[str, str], root: str | Path | None = None) -> StoreConfig:
        """The store's settings from RocketMQ keys; ``root`` (the store in force: --store, $RMQ_STORE, else
        the file's storePathRootDir) replaces storePathRootDir, and a storePathCommitLog inside the file's
        storePathRootDir moves with it (store_dir.rebased_commit_log)."""
        cfg = apply_properties(cls, props, minimum=MINIMUM)
        if root is not None:
            cfg.store_path_commit_log = rebased_commit_log(cfg.store_path_commit_log, props.get("storePathRootDir"),
                                                           root)
            cfg.store_path_root_dir = str(root)
        return cfg

    @classmethod
    def load(cls, config_file: str | Path | None = None, root: str | Path | None = None) -> StoreConfig:
        props = read_properties_file(config_file) if config_file else {}
        with values_of(config_file):
            return cls.from_properties(props, root)


# The longest delay a level may have, in ms. A delayed message's due time (its store time + the delay)
# is its consume-queue unit's 8-byte signed tagsCode, so the sum must fit a Java long for any store time
# a real clock gives: 2**45 ms is the year 3084. Java refuses only what Long.parseLong cannot read and
# then overflows silently; a bigger level here used to be accepted and then stop dispatch for good.
MAX_DELAY_LEVEL_MS = 2**63 - 1 - 2**45


def parse_delay_levels(spec: str) -> list[int]:
    """``messageDelayLevel`` ("1s 5s ... 2h") as milliseconds per level (index 0 = level 1)."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    levels = []
    for level, token in enumerate(spec.split(), start=1):
        unit = units.get(token[-1])
        if unit is None or not token[:-1].isdigit():
            raise ValueError(f"bad messageDelayLevel token {token!r}")
        delay_ms = int(token[:-1]) * unit
        if delay_ms > MAX_DELAY_LEVEL_MS:
            raise ValueError(f"level {level} ({token}) is longer than the longest delay, {MAX_DELAY_LEVEL_MS} ms")
        levels.append(delay_ms)
    return levels
