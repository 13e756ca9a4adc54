"""The parse half of the concurrent reput: commitlog bytes to dispatch request fields, in a worker.

Why a separate process and plain tuples: building a DispatchRequest (decode, property lookups for
TAGS/KEYS/UNIQ_KEY, the tags hash) is more than half of a reput's CPU and is pure Python, so threads
would only take turns on the GIL. A worker process maps the same commitlog file read-only and
answers with the requests' fields as tuples, which cost far less to unpickle than to compute.
"""

from __future__ import annotations

import dataclasses
import mmap

from .codec.message import decode_dispatch_fields
from .dispatch import DispatchRequest, dispatch_request_of

REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(DispatchRequest))

ParsedBlock = tuple[list[tuple], int]


def parse_block(path: str, start: int, stop: int, delay_levels_ms: list[int]) -> ParsedBlock:
    """The dispatch requests (as field tuples, in DispatchRequest's field order) of the records in
    [start, stop) of one commitlog file, and the position parsing reached: ``stop`` unless a record
    there is not a well-formed message (the BLANK end, torn or corrupt bytes), which the reput
    thread then judges itself, exactly as the serial reput does."""
    out: list[tuple] = []
    pos = start
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        try:
            limit = min(stop, len(mm))
            while pos < limit:
                fields = decode_dispatch_fields(mv, pos, limit)
                if fields is None:
                    break
                size, topic, queue_id, queue_offset, phy, sys_flag, store_ts, prepared, props = fields
                r = dispatch_request_of(topic, queue_id, phy, size, sys_flag, store_ts, queue_offset, prepared,
                                        props, delay_levels_ms)
                out.append((r.topic, r.queue_id, r.commit_log_offset, r.msg_size, r.tags_code, r.store_timestamp,
                            r.consume_queue_offset, r.keys, r.uniq_key, r.sys_flag, r.prepared_transaction_offset,
                            r.batch_size, r.msg_base_offset, r.properties_string))
                pos += size
        finally:
            mv.release()
    return out, pos
