"""The store's one error for corrupt data: which file, which offset, what was expected there.

Why one type: every reader (queue reads, lookups by offset, id and key, index queries, verifyStore)
must refuse to answer with bytes that are not what they claim to be, and the operator must learn
exactly where the damage is. Callers catch this one class; its message is a single line.
"""

from __future__ import annotations

from pathlib import Path


class CorruptDataError(Exception):
    """Bytes at ``offset`` of ``file`` are not ``expected`` (``found`` says what is there)."""

    def __init__(self, file: str | Path, offset: int, expected: str, found: str = "") -> None:
        self.file = str(file)
        self.offset = offset
        self.expected = expected
        self.found = found
        detail = f"; found {found}" if found else ""
        super().__init__(f"corrupt data in {self.file} at offset {offset}: expected {expected}{detail}")


class StoreClosedError(OSError):
    """A write reached a file queue after the store closed it. Why an error: a closed queue has no
    files, and making one again would start the log at offset 0, over the data already there."""

    def __init__(self, directory: str | Path) -> None:
        super().__init__(f"{directory}: the store is shut down")


class CommitLogMissingError(FileNotFoundError):
    """The store's consume queues point into a commitlog its configured directory does not hold."""
