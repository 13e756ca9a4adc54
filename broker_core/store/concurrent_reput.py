"""ConcurrentReputMessageService (``enableBuildConsumeQueueConcurrently``, RocketMQ 5.x).

Why: when the reput is far behind (a commitlog written by another process, a store opened after
its consume queues and index were dropped, a broker catching up), the serial reput decodes and
builds every dispatch request on one core. As RocketMQ's concurrent reput does, this one cuts the
pending bytes into blocks at record boundaries, has a pool parse the blocks in parallel
(``reput_parse.parse_block``, in worker processes: parsing is Python and would only contend for the
GIL in threads), and dispatches the results strictly in commitlog order on the reput thread, so
consume queues and index files come out byte-identical to the serial reput's.

Records this process appended itself still dispatch from their in-memory fields (nothing to
parse), and everything the fast parser declines (a file's BLANK end, torn or corrupt bytes) is
judged by the serial path, so the verdicts and messages stay exactly the serial reput's.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor

from .dispatch import DispatchRequest
from .mapped_file import MappedFile
from .reput import ReputMessageService
from .reput_parse import ParsedBlock, parse_block

log = logging.getLogger("rmqops.store")

BLOCK_BYTES = 4 << 20  # per parse task: big enough that a task's overhead is noise
MIN_PARALLEL_BYTES = 2 * BLOCK_BYTES  # below this the serial reput is done before a pool answers


class ConcurrentReputMessageService(ReputMessageService):
    def __init__(self, store) -> None:  # store: MessageStore (a type import would be circular)
        super().__init__(store)
        # batchDispatchRequestThreadPoolNums, bounded by the cores that can actually run them
        self.workers = max(1, min(store.config.batch_dispatch_request_thread_pool_nums, os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None
        self.parallel_records = 0  # how many records went through the pool (operators, tests)
        self.pool_failed: str | None = None  # why the pool was given up (then the reput is serial)

    def shutdown(self) -> None:
        super().shutdown()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn, not fork: the broker has threads (flush, reput, servers) a fork would copy mid-lock
            self._pool = ProcessPoolExecutor(max_workers=self.workers,
                                             mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def _dispatch_from_file(self, mf: MappedFile, pos: int) -> tuple[int, int, bool]:
        appended = self.store.commit_log.appended_records
        if self.pool_failed is None and mf.wrote_position - pos >= MIN_PARALLEL_BYTES and not (
                appended and appended[0][0] <= mf.file_from_offset + mf.wrote_position):
            pos, dispatched = self._dispatch_blocks(mf, pos)
        else:
            dispatched = 0
        # what is left (a short tail, the BLANK end, bad bytes, records appended here) goes serially
        pos, n, stopped = super()._dispatch_from_file(mf, pos)
        return pos, dispatched + n, stopped

    def _blocks(self, mf: MappedFile, pos: int) -> list[tuple[int, int]]:
        """[start, stop) blocks of whole records from ``pos``: walking the size fields is cheap; a size
        that cannot be a record ends the walk there and the serial path judges it."""
        mv = mf.mv
        limit = mf.wrote_position
        blocks: list[tuple[int, int]] = []
        start = pos
        while pos + 8 <= limit:
            size = int.from_bytes(mv[pos:pos + 4], "big", signed=True)
            if size <= 0 or pos + size > limit:
                break
            pos += size
            if pos - start >= BLOCK_BYTES:
                blocks.append((start, pos))
                start = pos
        if pos > start:
            blocks.append((start, pos))
        return blocks

    def _dispatch_blocks(self, mf: MappedFile, pos: int) -> tuple[int, int]:
        """Parse the file's blocks in the pool (a bounded window in flight) and dispatch in order."""
        pool = self._get_pool()
        do_dispatch = self.store.do_dispatch
        delay_levels = list(self.store.delay_levels_ms)
        path = str(mf.path)
        pending = deque(self._blocks(mf, pos))
        in_flight: deque[tuple[int, Future[ParsedBlock]]] = deque()
        dispatched = 0
        while pending or in_flight:
            try:
                while pending and len(in_flight) < 2 * self.workers:
                    start, stop = pending.popleft()
                    in_flight.append((stop, pool.submit(parse_block, path, start, stop, delay_levels)))
                stop, fut = in_flight.popleft()
                fields, reached = fut.result()
            except Exception as e:
                # a pool that cannot work (workers killed, a __main__ that cannot be re-imported by
                # spawn) must not stop dispatch: give it up, say so once, and go on serially
                self._give_up_pool(f"{type(e).__name__}: {e}")
                break
            for t in fields:
                do_dispatch(DispatchRequest(*t))
            dispatched += len(fields)
            self.parallel_records += len(fields)
            if fields:
                pos = fields[-1][2] - mf.file_from_offset + fields[-1][3]
                self.reput_from_offset = mf.file_from_offset + pos
            if reached < stop or pos != reached:  # the serial path judges what the parser declined
                for _, f in in_flight:
                    f.cancel()
                break
        return pos, dispatched

    def _give_up_pool(self, reason: str) -> None:
        self.pool_failed = reason
        log.warning("concurrent reput: worker pool failed (%s); dispatching serially from now on", reason)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
