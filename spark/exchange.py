"""How decoded byte ranges reach the tasks that write: one exchange file per range, no Spark shuffle.

Why files instead of a shuffle: the rebuild's executors already read and write the store path
directly (the commitlog in, the staged queues and index out), so the packed per-queue units and
index keys can go the same way. Each decode task writes one file per range — the range's index keys,
then each queue's packed units — and returns only the range's metadata with where each part lies in
that file. The driver then knows every queue's and every index file's input as a list of slices
``(path, offset, length)`` and hands them to the write tasks, which read them back with ``pread``
(from the page cache: they were written moments before).

Through a Spark shuffle the same bytes were pickled, copied into the JVM, written to shuffle files
(compressed), read back, decompressed and streamed to the Python workers again: at 2 GiB of
commitlog that was ~4 s of JVM CPU, as much as all the decoding, on a 2-core machine. Here they are
written once and read once.

Everything here runs on executors too, so it holds only plain values.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from .scan import DecodedRange, decode_range

Slice = tuple[str, int, int]  # (exchange file, offset, length)
_IOV_MAX = 512  # buffers per os.writev call (Linux allows 1024)


def range_file(exchange_dir: str, range_index: int) -> str:
    return os.path.join(exchange_dir, f"range-{range_index:07d}")


def range_meta(r: DecodedRange, path: str, index_at: tuple[int, int], cq_at: dict[tuple[str, int], tuple[int, int]]
               ) -> tuple:
    """What the driver needs from a range: position, stop, counts, BatchCQ topics, where its data lies.

    ``(range_index, file_index, base, start, end, records, stop, stop_reason, key_count,
    batch_topics, queues, exchange_path, (index offset, length), {queue: (offset, length)})``
    """
    return (r.range_index, r.file_index, r.base, r.start, r.end, r.records, r.stop, r.stop_reason,
            r.key_count, sorted(r.batch_topics), sorted(r.cq), path, index_at, cq_at)


def write_range(r: DecodedRange, exchange_dir: str, want_queues: bool) -> tuple:
    """Write one decoded range's index keys and queue units to its exchange file; return its metadata."""
    path = range_file(exchange_dir, r.range_index)
    parts: list[bytes] = [r.index]
    index_at = (0, len(r.index))
    cq_at: dict[tuple[str, int], tuple[int, int]] = {}
    pos = len(r.index)
    if want_queues:
        for q, blob in r.cq.items():
            cq_at[q] = (pos, len(blob))
            parts.append(blob)
            pos += len(blob)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(0, len(parts), _IOV_MAX):
            chunk = [p for p in parts[i:i + _IOV_MAX] if p]
            want = sum(len(p) for p in chunk)
            done = os.writev(fd, chunk) if chunk else 0
            if done != want:  # a short write (full disk, signal): finish it part by part
                _finish_write(fd, chunk, done)
    finally:
        os.close(fd)
    return range_meta(r, path, index_at, cq_at)


def _finish_write(fd: int, chunk: list[bytes], done: int) -> None:
    data = memoryview(b"".join(chunk))[done:]
    while data:
        n = os.write(fd, data)
        data = data[n:]


def decode_to_files(rows: Iterable[tuple[int, int, str, int, int, int]], check_crc: bool, delay_levels_ms: list[int],
                    want_index: bool, want_queues: bool, exchange_dir: str,
                    deleted_topics: dict[str, int] | None = None) -> Iterator[tuple]:
    """mapPartitions body of the decode stage: decode each planned range, write its exchange file."""
    for range_index, file_index, path, base, start, end in rows:
        r = decode_range(range_index, file_index, path, base, start, end, check_crc, delay_levels_ms, want_index,
                         deleted_topics)
        yield write_range(r, exchange_dir, want_queues)


def read_slices(slices: Iterable[Slice]) -> list[bytes]:
    """The bytes of each slice, in order (one ``pread`` each; an exchange file is opened once)."""
    out: list[bytes] = []
    fds: dict[str, int] = {}
    try:
        for path, offset, length in slices:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
            data = os.pread(fd, length, offset)
            if len(data) != length:
                raise OSError(f"exchange file {path}: {len(data)} bytes at {offset}, expected {length}")
            out.append(data)
    finally:
        for fd in fds.values():
            os.close(fd)
    return out


def read_slices_into(slices: Iterable[Slice]) -> bytearray:
    """The slices' bytes concatenated, read straight into one buffer (no joined copy)."""
    slices = list(slices)
    buf = bytearray(sum(s[2] for s in slices))
    view = memoryview(buf)
    fds: dict[str, int] = {}
    pos = 0
    try:
        for path, offset, length in slices:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
            got = 0
            while got < length:
                n = os.preadv(fd, [view[pos + got:pos + length]], offset + got)
                if n <= 0:
                    raise OSError(f"exchange file {path}: {got} bytes at {offset}, expected {length}")
                got += n
            pos += length
    finally:
        view.release()
        for fd in fds.values():
            os.close(fd)
    return buf
