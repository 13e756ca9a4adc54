"""StoreCheckpoint (spec §9.1): the recovery starting hints, in a 4,096-byte mapped file."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from .codec.checkpoint_format import CHECKPOINT, CHECKPOINT_FILE_SIZE


class StoreCheckpoint:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self._mm: mmap.mmap | None = None
        self._fd = -1
        if read_only:
            if path.exists() and path.stat().st_size >= CHECKPOINT.size:
                self._set(CHECKPOINT.unpack_from(path.read_bytes(), 0))
            return
        exists = path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size != CHECKPOINT_FILE_SIZE:
            os.ftruncate(self._fd, CHECKPOINT_FILE_SIZE)
        try:  # its one page must have a block: writing a mapped hole on a full disk is SIGBUS
            os.posix_fallocate(self._fd, 0, CHECKPOINT_FILE_SIZE)
        except OSError as e:
            os.close(self._fd)
            self._fd = -1
            raise OSError(e.errno, f"cannot allocate {path}: {e.strerror}") from None
        self._mm = mmap.mmap(self._fd, CHECKPOINT_FILE_SIZE)
        if exists:
            self._set(CHECKPOINT.unpack_from(self._mm, 0))

    def _set(self, values: tuple[int, int, int, int, int]) -> None:
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset) = values

    @property
    def min_timestamp(self) -> int:
        """Where abnormal recovery may start: 3 s before the older of the two progress stamps (as read
        from the file: recovery runs before any put)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def flush(self, physic_on_disk: int | None = None, logics_on_disk: int | None = None) -> None:
        """Write and msync the checkpoint.

        Why the arguments: ``physic_msg_timestamp`` and ``logics_msg_timestamp`` move with every put
        and dispatch, ahead of what is on disk. After a power cut recovery re-checks only records
        stored after the older of the two written times (less 3 s), so a written time must be one
        the commitlog (``physic_on_disk``) and every consume queue (``logics_on_disk``) had reached
        on disk, as the times RocketMQ's flush services capture before flushing. A written time never
        moves back. None writes the field as it is: right after a full flush with nothing running
        (shutdown).
        """
        if self._mm is None:
            return
        physic, logics = CHECKPOINT.unpack_from(self._mm, 0)[:2]
        physic = self.physic_msg_timestamp if physic_on_disk is None else max(physic, physic_on_disk)
        logics = self.logics_msg_timestamp if logics_on_disk is None else max(logics, logics_on_disk)
        CHECKPOINT.pack_into(self._mm, 0, physic, logics, self.index_msg_timestamp, self.master_flushed_offset,
                             self.confirm_phy_offset)
        try:
            self._mm.flush()
        except OSError as e:  # msync's own error names no file (as MappedFile's flush)
            raise OSError(e.errno, f"cannot flush {self.path}: {e.strerror}") from e

    def shutdown(self) -> None:
        if self._mm is not None:
            self.flush()
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
