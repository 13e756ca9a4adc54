"""What reached the disk: a model of the page cache for power-cut tests.

Why: kill -9 loses nothing the store wrote into its mappings (the page cache outlives the process),
so it cannot show what a power cut does, where everything not yet written back is gone. There is no
power switch here; instead this records, per file, the bytes the store's msync calls
(``MappedFile.flush``/``flush_all``, ``IndexFile.flush``, ``StoreCheckpoint.flush``) made durable,
and ``cut`` puts exactly those back: a power cut in which the kernel wrote back nothing on its own,
the worst case. ``writeback`` is the kernel writing back pages on its own while the store runs; with
``rnd``, ``cut`` keeps a random part of the pages as they were at the cut too. The kernel's
writeback keeps no order between pages.

Covered: the commitlog, the consume queues (SimpleCQ and BatchCQ), the index files, the checkpoint
and the timer's log, wheel and checkpoint (whole files: a flush of one of them counts as writing all
of it). Config files are written by fsync and rename: ``cut`` leaves them as they were at the cut
(what a store writes after it, e.g. while shutting down, never reached the disk). A modelled file
deleted (``destroy``) and made again under the same name (a topic deleted and created again) starts
with nothing durable: the old file's flushed bytes went with it.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from broker_core.store.checkpoint import StoreCheckpoint
from broker_core.store.index_file import IndexFile
from broker_core.store.mapped_file import MappedFile
from broker_core.store.timer.timer_checkpoint import TimerCheckpoint
from broker_core.store.timer.timer_log import TimerLog
from broker_core.store.timer.timer_wheel import TimerWheel

PAGE = 4096
MODELLED = ("commitlog", "consumequeue", "batchconsumequeue", "index", "checkpoint", "timerlog", "timerwheel",
            "config/timercheck")


class DiskImage:
    """The durable bytes of every modelled file, as the store's msync calls left them."""

    def __init__(self) -> None:
        self.durable: dict[Path, bytearray] = {}
        self.inodes: dict[Path, int] = {}  # the file each durable image is of
        self.powered = True
        self.page_cache: dict[Path, bytes] = {}
        self.page_cache_inodes: dict[Path, int] = {}
        self.config_files: dict[Path, bytes] = {}
        # Held by every flush and by power_off: the cut falls between two flushes, never inside one
        # (a checkpoint written after the cut must not be in the page cache it keeps).
        self._lock = threading.Lock()

    def power_off(self, root: Path) -> None:
        """The moment of the cut: what ``root``'s files hold now is the page cache the kernel may have
        written back part of. From now on every flush does nothing at all, as if the machine had
        stopped: the store's flush threads may still run, and ``crash`` closes the files, which would
        msync them and rewrite the index and checkpoint headers."""
        with self._lock:
            self.powered = False
            self.page_cache, self.page_cache_inodes = {}, {}
            for p in self._modelled(root):
                self.page_cache[p.resolve()] = p.read_bytes()
                self.page_cache_inodes[p.resolve()] = p.stat().st_ino
            self.config_files = {}
            for p in self._config_files(root):
                try:  # a temporary file renamed away by a writer at this very moment was not a config file
                    self.config_files[p.resolve()] = p.read_bytes()
                except FileNotFoundError:
                    continue

    def writeback(self, root: Path, rnd: random.Random) -> None:
        """The kernel writing back dirty pages on its own (every ~30 s on Linux): a random part of
        the pages of ``root``'s files, as they are at this moment, become durable."""
        share = rnd.random()
        with self._lock:
            self._writeback(root, rnd, share)

    def _writeback(self, root: Path, rnd: random.Random, share: float) -> None:
        for path in self._modelled(root):
            current = path.read_bytes()
            durable = self._durable_of(path.resolve(), len(current))
            if len(durable) < len(current):
                durable.extend(bytes(len(current) - len(durable)))
            for pos in range(0, len(current), PAGE):
                if rnd.random() < share:
                    durable[pos:pos + PAGE] = current[pos:pos + PAGE]

    @staticmethod
    def _config_files(root: Path) -> list[Path]:
        """The JSON files under config/ (written whole, fsync and rename); the timer's checkpoint there
        is a modelled mapped file."""
        config = Path(root) / "config"
        if not config.is_dir():
            return []
        return sorted(p for p in config.rglob("*") if p.is_file()
                      and not any(p.relative_to(root).as_posix().startswith(m) for m in MODELLED))

    @staticmethod
    def _modelled(root: Path) -> list[Path]:
        return sorted(p for p in Path(root).rglob("*") if p.is_file()
                      and any(p.relative_to(root).as_posix().startswith(m) for m in MODELLED))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> DiskImage:
        image = self
        mf_flush, mf_flush_all = MappedFile.flush, MappedFile.flush_all

        def flush(mf: MappedFile, least_pages: int = 0) -> int:
            with image._lock:
                if not image.powered:
                    return mf.flushed_position
                before = mf.flushed_position
                after = mf_flush(mf, least_pages)
                if after > before:  # msync of [before rounded down to its page, after)
                    image._record(mf.path, before - before % PAGE, after)
                return after

        def flush_all(mf: MappedFile) -> None:
            with image._lock:
                if image.powered:
                    mf_flush_all(mf)
                    image._record(mf.path, 0, None)

        monkeypatch.setattr(MappedFile, "flush", flush)
        monkeypatch.setattr(MappedFile, "flush_all", flush_all)
        for cls in (MappedFile, IndexFile):  # a deleted file's durable bytes go with it (inodes are reused)
            monkeypatch.setattr(cls, "destroy", self._forgetting(cls.destroy))
        for cls in (IndexFile, StoreCheckpoint, TimerWheel, TimerCheckpoint):
            monkeypatch.setattr(cls, "flush", self._whole_files(cls.flush, lambda obj: [obj.path]))
        monkeypatch.setattr(TimerLog, "flush", self._whole_files(TimerLog.flush, lambda log: [f.path for f in log._files]))
        return self

    def power_off_after(self, monkeypatch: pytest.MonkeyPatch, cls: type, method: str, root: Path) -> None:
        """The power goes the moment ``cls.method`` returns (e.g. right after a file is written), before
        anything the caller does next can reach the disk."""
        original = getattr(cls, method)
        image = self

        def then_cut(obj, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            result = original(obj, *args, **kwargs)
            image.power_off(root)
            return result
        monkeypatch.setattr(cls, method, then_cut)

    def _forgetting(self, destroy):  # noqa: ANN001, ANN202 - wraps MappedFile.destroy / IndexFile.destroy
        image = self

        def forget(obj, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            path = Path(obj.path).resolve()
            result = destroy(obj, *args, **kwargs)
            with image._lock:
                if image.powered:
                    image.durable.pop(path, None)
                    image.inodes.pop(path, None)
            return result
        return forget

    def _whole_files(self, original, paths):  # noqa: ANN001, ANN202 - wraps a flush method of any signature
        image = self

        def flush(obj, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            with image._lock:
                if not image.powered:
                    return getattr(obj, "_flushed_where", None)  # TimerLog.flush returns its flushed position
                result = original(obj, *args, **kwargs)
                for path in paths(obj):
                    if Path(path).exists():
                        image._record(path, 0, None)
                return result
        return flush

    def _durable_of(self, path: Path, size: int) -> bytearray:
        """The durable image of the file now at ``path``: a new, empty one when the file it was of has
        been deleted since (another inode under the same name)."""
        inode = path.stat().st_ino
        if self.inodes.get(path) != inode:
            self.inodes[path] = inode
            self.durable[path] = bytearray(size)
        return self.durable[path]

    def _record(self, path: Path | str, start: int, end: int | None) -> None:
        path = Path(path).resolve()
        current = path.read_bytes()
        end = len(current) if end is None else min(end, len(current))
        durable = self._durable_of(path, len(current))
        if len(durable) < len(current):
            durable.extend(bytes(len(current) - len(durable)))
        durable[start:end] = current[start:end]

    def cut(self, root: Path, rnd: random.Random | None = None) -> None:
        """Leave ``root``'s modelled files as the power cut of ``power_off`` would (and ``abort`` as
        after a reboot). Call it once the store's files are closed (``crash``)."""
        assert not self.powered, "power_off first"
        for path in self._modelled(root):
            current = self.page_cache.get(path.resolve())
            if current is None:  # made after the cut (by crash): not on the disk
                path.unlink()
                continue
            durable = self.durable.get(path.resolve(), bytearray(len(current)))
            if self.inodes.get(path.resolve()) != self.page_cache_inodes[path.resolve()]:
                durable = bytearray(len(current))  # made again after its last flush: none of it on disk
            survived = bytearray(durable[:len(current)].ljust(len(current), b"\0"))
            if rnd is not None:
                keep = rnd.random()  # this cut's share of the pages written back by the kernel
                for pos in range(0, len(current), PAGE):
                    if rnd.random() < keep:
                        survived[pos:pos + PAGE] = current[pos:pos + PAGE]
            path.write_bytes(bytes(survived))
        for path in self._config_files(root):  # written after the cut: never reached the disk
            if path.resolve() not in self.config_files:
                path.unlink()
        for path, content in self.config_files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        (Path(root) / "abort").write_text("1\nan-earlier-boot\n")
