"""How decoded byte ranges reach the tasks that write: one shuffle, three kinds of keys.

Why one shuffle straight out of the decode tasks: the packed per-queue units and index keys are
serialized once and read once, instead of being cached, read back for a metadata pass and read again
for a queue shuffle and an index shuffle. Each decode task emits, per range:

* ``(META, range_index)`` -> the range's small metadata, alone in partition 0. The driver reads only
  that partition first (``sc.runJob``), which runs every decode task and finds where the log ends
  before any file is written; the other partitions' shuffle output waits on disk for the second job.
* ``(INDEX, range_index)`` -> the range's packed index keys, all in partition 1: index files are
  filled strictly in commitlog order, so one task joins the valid ranges in order.
* ``(QUEUE, topic, queueId)`` -> ``(range_index, packed units)``, spread over the queue partitions
  so one task owns whole queues.

Everything here runs on executors too, so it holds only plain values.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .scan import DecodedRange, decode_range

META = 0
INDEX = 1
QUEUE = 2
META_PARTITION = 0
INDEX_PARTITION = 1
FIRST_QUEUE_PARTITION = 2


@dataclass(frozen=True, slots=True)
class RangePartitioner:
    """``partitionBy`` function: META -> 0, INDEX -> 1, a queue -> one of ``queue_partitions``.

    Queues are placed by ``crc32(topic) + queueId`` (stable across processes, unlike ``hash``), so
    the queues of one topic land on consecutive partitions.
    """

    queue_partitions: int

    @property
    def num_partitions(self) -> int:
        return FIRST_QUEUE_PARTITION + self.queue_partitions

    def __call__(self, key: tuple) -> int:
        if key[0] == QUEUE:
            return FIRST_QUEUE_PARTITION + (zlib.crc32(key[1].encode("utf-8")) + key[2]) % self.queue_partitions
        return key[0]


def range_meta(r: DecodedRange) -> tuple:
    """What the driver needs from a range: position, stop, counts, BatchCQ topics, queues seen."""
    return (r.range_index, r.file_index, r.base, r.start, r.end, r.records, r.stop, r.stop_reason,
            r.key_count, sorted(r.batch_topics), sorted(r.cq))


def route_range(r: DecodedRange, want_queues: bool) -> Iterator[tuple[tuple, object]]:
    yield (META, r.range_index), range_meta(r)
    if r.index:
        yield (INDEX, r.range_index), r.index
    if want_queues:
        for (topic, queue_id), blob in r.cq.items():
            yield (QUEUE, topic, queue_id), (r.range_index, blob)


def decode_and_route(rows: Iterable[tuple[int, int, str, int, int, int]], check_crc: bool,
                     delay_levels_ms: list[int], want_index: bool, want_queues: bool
                     ) -> Iterator[tuple[tuple, object]]:
    """mapPartitions body of the decode stage: decode each planned range, emit its keyed outputs."""
    for range_index, file_index, path, base, start, end in rows:
        r = decode_range(range_index, file_index, path, base, start, end, check_crc, delay_levels_ms, want_index)
        yield from route_range(r, want_queues)


def valid_index_blobs(rows: Iterable[tuple[tuple, object]], valid: frozenset[int]) -> list[tuple[int, bytes]]:
    """``(range_index, keys)`` of the valid ranges in the index partition, in commitlog order."""
    out = [(key[1], blob) for key, blob in rows if key[0] == INDEX and key[1] in valid]
    out.sort(key=lambda c: c[0])
    return out  # type: ignore[return-value]


def valid_queue_chunks(rows: Iterable[tuple[tuple, object]], valid: frozenset[int]
                       ) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """Chunks of the valid ranges in a queue partition, grouped by queue."""
    out: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for key, chunk in rows:
        if key[0] != QUEUE or chunk[0] not in valid:  # type: ignore[index]
            continue
        q = (key[1], key[2])
        lst = out.get(q)
        if lst is None:
            lst = out[q] = []
        lst.append(chunk)  # type: ignore[arg-type]
    return out
