"""How much one read of a queue hands out: DefaultMessageStore.isTheBatchFull's byte and count limits.

Why: a pull answer had no byte limit. 32 messages of 512 KiB made a 16.7 MB answer, past the 16 MiB
frame every client reads, so the consumer's connection was closed at each pull and the queue was never
read; pipelined pulls of such answers also held hundreds of megabytes in the broker. A read now ends
before the unit that would take it past maxTransferBytesOnMessageInMemory (256 KiB) or once it holds
maxTransferCountOnMessageInMemory (32) messages (64 KiB / 8 for units read from disk), the first
message always going out, however large; the next offset is that unit's, so nothing is skipped.
Every read answering a client asks for the limits (``transfer_limits=True``: pull, pop, read_queue).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config

from broker_core.broker.broker_config import BrokerConfig
from broker_core.config_loader import ConfigError
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.topic_config import TopicConfig

KIB = 1024


def open_store(root: Path, **over: object) -> MessageStore:
    """A store whose commitlog files hold several large messages each."""
    over.setdefault("mapped_file_size_commit_log", 8 * 1024 * KIB)
    return MessageStore(root, small_config(**over), clock=FakeClock(step=1)).open()


class TagFilter:
    """Matches one tag, as a TAG subscription does (by the consume queue's tags code, then the record)."""

    def __init__(self, tag: str) -> None:
        from broker_core.store.codec.hotpath import tags_code

        self.code = tags_code(tag)
        self.tag = tag

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return tags_code == self.code

    def is_matched_by_commit_log(self, properties: dict[str, str]) -> bool:
        return properties.get("TAGS") == self.tag


def read_all(store: MessageStore, topic: str, max_num: int = 32, message_filter: TagFilter | None = None
             ) -> tuple[list[list[int]], int]:
    """Every read a consumer makes from offset 0 to the end: the queue offsets of each, and the last
    next offset."""
    reads, offset = [], 0
    while offset < store.get_max_offset_in_queue(topic, 0):
        got = store.get_messages(topic, 0, offset, max_num, message_filter, transfer_limits=True)
        assert got.next_begin_offset > offset, (offset, got)
        reads.append([m.queue_offset for m in got.messages])
        offset = got.next_begin_offset
    return reads, offset


def test_big_messages_come_in_reads_within_the_byte_limit_and_none_is_skipped(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        for i in range(12):
            assert store.put_message(make_msg("Big", 0, bytes([i]) * (100 * KIB))).ok
        got = store.get_messages("Big", 0, 0, 32, transfer_limits=True)
        # two units of ~100 KiB fit in 256 KiB, a third would not: the read ends before it
        assert got.status is GetMessageStatus.FOUND
        assert [m.queue_offset for m in got.messages] == [0, 1] and got.next_begin_offset == 2
        assert 200 * KIB < got.buffer_total_size <= 256 * KIB
        reads, end = read_all(store, "Big")
        assert reads == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]] and end == 12
    finally:
        store.shutdown()


def test_a_message_larger_than_the_limit_goes_out_alone(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        for size in (10, 600 * KIB, 10, 10, 520 * KIB, 520 * KIB):
            assert store.put_message(make_msg("Huge", 0, b"h" * size)).ok
        reads, end = read_all(store, "Huge")
        # the 600 KiB unit ends the first read; alone it is handed out whole, and so is each 520 KiB one
        assert reads == [[0], [1], [2, 3], [4], [5]] and end == 6
    finally:
        store.shutdown()


def test_at_most_32_messages_a_read_in_memory(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        for i in range(70):
            assert store.put_message(make_msg("Many", 0, b"m%d" % i)).ok
        got = store.get_messages("Many", 0, 0, 64, transfer_limits=True)
        assert len(got.messages) == 32 and got.next_begin_offset == 32
        assert [len(r) for r in read_all(store, "Many", 64)[0]] == [32, 32, 6]
        assert len(store.get_messages("Many", 0, 0, 5, transfer_limits=True).messages) == 5  # maxMsgNums too
        assert len(store.get_messages("Many", 0, 0, 64).messages) == 64  # the store's own bulk reads: by count
    finally:
        store.shutdown()


def test_units_far_behind_the_commitlog_end_are_read_with_the_disk_limits(tmp_path: Path) -> None:
    # accessMessageInMemoryMaxRatio=0: no unit lies within the memory span, every one counts as on disk
    store = open_store(tmp_path, access_message_in_memory_max_ratio=0)
    try:
        for i in range(20):
            assert store.put_message(make_msg("Cold", 0, b"c%d" % i)).ok
        assert [len(r) for r in read_all(store, "Cold")[0]] == [8, 8, 4]
        for _ in range(4):
            assert store.put_message(make_msg("ColdBig", 0, b"x" * (40 * KIB))).ok
        assert read_all(store, "ColdBig")[0] == [[0], [1], [2], [3]]  # 64 KiB: one 40 KiB unit a read
    finally:
        store.shutdown()


def test_the_limits_are_the_store_config_keys(tmp_path: Path) -> None:
    store = open_store(tmp_path, max_transfer_bytes_on_message_in_memory=3 * KIB,
                       max_transfer_count_on_message_in_memory=4)
    try:
        for _ in range(10):
            assert store.put_message(make_msg("Conf", 0, b"k" * KIB)).ok
        assert [len(r) for r in read_all(store, "Conf")[0]] == [2, 2, 2, 2, 2]  # 3 units > 3 KiB
        store.config.max_transfer_bytes_on_message_in_memory = 256 * KIB  # updateBrokerConfig, live
        assert [len(r) for r in read_all(store, "Conf")[0]] == [4, 4, 2]
        # the caller's maxTotalMsgSize (a pop's room left over its queues)
        got = store.get_messages("Conf", 0, 0, 32, transfer_limits=True, max_total_bytes=1)
        assert len(got.messages) == 1 and got.next_begin_offset == 1
    finally:
        store.shutdown()


def test_filtered_reads_stay_within_the_limit_and_miss_no_match(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        tags = ["TagA" if i % 3 else "TagB" for i in range(15)]
        for i, tag in enumerate(tags):
            assert store.put_message(make_msg("Filt", 0, bytes([i]) * (100 * KIB), tags=tag)).ok
        reads, end = read_all(store, "Filt", message_filter=TagFilter("TagA"))
        assert end == 15 and all(len(r) <= 2 for r in reads)
        assert [o for r in reads for o in r] == [i for i, t in enumerate(tags) if t == "TagA"]
        # refused units are not counted: a read of the rare tag goes past the big ones it skips
        got = store.get_messages("Filt", 0, 0, 32, TagFilter("TagB"), transfer_limits=True)
        assert [m.queue_offset for m in got.messages] == [0, 3]
    finally:
        store.shutdown()


def test_an_inner_batch_unit_counts_whole(tmp_path: Path) -> None:
    store = open_store(tmp_path, mapper_file_size_batch_consume_queue=46 * 64)
    try:
        store.topic_table.put(TopicConfig("BatchBig", 1, 1, attributes={"queue.type": "BatchCQ"}), 0)
        for n in range(3):
            items = [BatchItem(bytes([n, j]) * (10 * KIB), {"TAGS": "t"}) for j in range(10)]  # ~200 KiB a batch
            msg = make_msg("BatchBig", 0, encode_batch(items), uniq=f"U{n}")
            assert store.put_inner_batch(msg, len(items)).ok
        reads, end = read_all(store, "BatchBig")
        assert reads == [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))] and end == 30
        # a read starting inside a batch takes the rest of it, and not the next whole one
        got = store.get_messages("BatchBig", 0, 5, 32, transfer_limits=True)
        assert [m.queue_offset for m in got.messages] == list(range(5, 10)) and got.next_begin_offset == 10
    finally:
        store.shutdown()


def test_the_keys_come_from_broker_conf_and_show_in_get_broker_config(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_properties({"maxTransferBytesOnMessageInMemory": "131072",
                                        "maxTransferCountOnMessageInMemory": "16",
                                        "maxTransferBytesOnMessageInDisk": "32768",
                                        "maxTransferCountOnMessageInDisk": "4",
                                        "accessMessageInMemoryMaxRatio": "30"}, tmp_path)
    store = cfg.store
    assert (store.max_transfer_bytes_on_message_in_memory, store.max_transfer_count_on_message_in_memory,
            store.max_transfer_bytes_on_message_in_disk, store.max_transfer_count_on_message_in_disk,
            store.access_message_in_memory_max_ratio) == (131072, 16, 32768, 4, 30)
    props = BrokerConfig.from_properties({}, tmp_path).to_properties()
    assert {k: props[k] for k in ("maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
                                  "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk",
                                  "accessMessageInMemoryMaxRatio")} == {
        "maxTransferBytesOnMessageInMemory": "262144", "maxTransferCountOnMessageInMemory": "32",
        "maxTransferBytesOnMessageInDisk": "65536", "maxTransferCountOnMessageInDisk": "8",
        "accessMessageInMemoryMaxRatio": "40"}


@pytest.mark.parametrize("key, value", [("maxTransferCountOnMessageInMemory", "0"),
                                        ("maxTransferBytesOnMessageInDisk", "-1"),
                                        ("accessMessageInMemoryMaxRatio", "101")])
def test_a_limit_that_would_hand_out_nothing_is_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        StoreConfig.from_properties({key: value})
