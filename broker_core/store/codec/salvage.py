"""Finding the intact records inside damaged or discarded commitlog bytes (lost+found, spec §1).

Why: recovery stops at the first invalid record and discards everything after it; the records
behind a single flipped byte are usually intact. Scanning for the next record magic code and
re-validating there (size, layout, body CRC) finds them without trusting any length field of the
damaged record.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .message import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, RECORD_VALID, MessageExt, check_record

_MAGICS = (struct.pack(">i", MESSAGE_MAGIC_CODE_V1), struct.pack(">i", MESSAGE_MAGIC_CODE_V2))


def iter_intact_records(data: bytes | bytearray | memoryview, read_body: bool = True
                        ) -> Iterator[tuple[int, MessageExt]]:
    """Yield ``(position, record)`` of every record in ``data`` that validates (CRC included).

    A record is looked for 4 bytes before each occurrence of a message magic code; after a valid
    one the scan continues right behind it, otherwise one byte further on.
    """
    buf = bytes(data)
    n = len(buf)
    pos = 0
    while pos < n:
        hits = [i for i in (buf.find(m, pos + 4) for m in _MAGICS) if i >= 0]
        if not hits:
            return
        start = min(hits) - 4
        rc = check_record(buf, start, n, check_crc=True, read_body=read_body)
        if rc.kind == RECORD_VALID and rc.message is not None:
            yield start, rc.message
            pos = start + rc.size
        else:
            pos = start + 1
