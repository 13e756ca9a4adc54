"""The store's hot byte work: the compiled ``_hotpath`` when it is built, else its pure-Python twin.

Why a switch and not a choice: ``_hotpath.c`` and ``hot_py.py`` are the same functions (the Python
one is the reference); the compiled one makes the put + dispatch path ~2x faster. The extension is
built by ``pip install -e .`` (setup.py, optional); a machine without a compiler gets the twin.
``RMQ_PURE_PYTHON=1`` forces the twin (the test suite runs the codec, store and golden tests both
ways). ``IMPLEMENTATION`` says which one is in use ("c" or "python").
"""

from __future__ import annotations

import os

from . import hot_py, validate
from .errors import RecordError
from .hashing import _crc32, java_string_hash
from .hosts import encode_host
from .properties import encode_properties

FORCE_PURE_PYTHON_ENV = "RMQ_PURE_PYTHON"


def _load():
    try:
        from . import _hotpath  # type: ignore[attr-defined]
    except ImportError:
        return hot_py
    # Registered even when the twin is forced, so tests can compare the two in one process.
    _hotpath.init(RecordError, _crc32, encode_properties, encode_host, hot_py.known_properties, java_string_hash,
                  hot_py.index_put_keys, validate.check_message, validate.check_host)
    if os.environ.get(FORCE_PURE_PYTHON_ENV, "") not in ("", "0"):
        return hot_py
    return _hotpath


_impl = _load()

IMPLEMENTATION: str = _impl.IMPLEMENTATION
prepare_record = _impl.prepare_record
write_record = _impl.write_record
record_parts = _impl.record_parts
offset_msg_id = _impl.offset_msg_id
decode_dispatch_fields = _impl.decode_dispatch_fields
body_crc_matches = _impl.body_crc_matches
put_cq_unit = _impl.put_cq_unit
put_fast = _impl.put_fast
put_bcq_unit = _impl.put_bcq_unit
valid_units_end = _impl.valid_units_end
first_record_stored_after = _impl.first_record_stored_after
index_put_keys = _impl.index_put_keys
index_key_hash = _impl.index_key_hash
java_hash = _impl.java_string_hash
tags_code = _impl.tags_code
check_message = _impl.check_message
hop_records = _impl.hop_records
select_records = _impl.select_records
dispatch_range = _impl.dispatch_range
link_index_entries = _impl.link_index_entries
cq_units_of = _impl.cq_units_of
inner_batch_known = _impl.inner_batch_known
buffer_inner_batch = _impl.buffer_inner_batch
dispatch_inner_batch = _impl.dispatch_inner_batch
dispatch_inner_batches = _impl.dispatch_inner_batches
VERDICT_CACHE_MAX = hot_py.VERDICT_CACHE_MAX
PreparedRecord = hot_py.PreparedRecord

__all__ = [
    "FORCE_PURE_PYTHON_ENV", "IMPLEMENTATION", "PreparedRecord", "body_crc_matches", "check_message", "decode_dispatch_fields", "first_record_stored_after",
    "buffer_inner_batch", "dispatch_inner_batch", "dispatch_inner_batches", "inner_batch_known",
    "cq_units_of", "dispatch_range", "hop_records", "link_index_entries", "select_records", "VERDICT_CACHE_MAX",
    "index_key_hash", "index_put_keys", "java_hash", "offset_msg_id", "prepare_record", "put_bcq_unit", "put_cq_unit", "put_fast",
    "record_parts", "tags_code", "valid_units_end", "write_record",
]
