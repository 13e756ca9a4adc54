"""Rebuild (or verify) consume queues, BatchCQ, index files and offsets of a store with Spark.

Entry points: :func:`run_rebuild` (called by ``mqadmin rebuildStore`` and ``spark/rebuild_store.py``)
and :func:`render_summary` / :func:`print_summary` for the result.

Pipeline (driver orchestrates, executors do the byte work):
1. list commitlog files; the driver cuts them into record-aligned ranges with a few small reads
   per range (``scan.plan_file``: every record names its own offset, no pass over the data);
2. pass 2 decodes byte ranges with the store's reput decoder (``scan.decode_range``); each range's
   packed units and index keys go to one exchange file (``exchange``) and only the range's metadata
   (counts, where the log stops, where each queue's units lie in that file) comes back to the driver;
3. the log end is the first invalid record in log order, as recovery finds it; ranges after it
   are ignored and the summary says where and why the log ends;
4. a second job, no shuffle: index-file tasks (first: the longest) and queue-group tasks read their
   slices of the exchange files; a queue task writes CQ/BCQ files through the store's queue classes
   into a staging directory (or compares against the existing files: verify), an index task links
   and writes one index file beside them;
5. verify: reachable index entries are compared with the keys the commitlog implies;
6. queues with no record left in the commitlog keep their offsets (min = max = old max, see
   ``kept_queues``), as Apache's retention keeps a queue's last file;
7. offsets: per-queue min/max and by-time tables; consumerOffset.json, delayOffset.json and the
   timer checkpoint's queue offsets clamped into [min, max];
8. staged directories replace the live ones by rename, only while holding the store lock.
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from broker_core.store.codec.hashing import index_key_hash
from broker_core.store.codec.index_format import index_file_name, index_file_size, is_index_file_name
from broker_core.store.codec.message import RECORD_VALID, check_record
from broker_core.store.deleted_topics import deleted_before_cut
from broker_core.store.dispatch import DispatchRequest, build_dispatch_request
from broker_core.store.lost_found import lost_found_dir
from broker_core.store.schedule.delay_offset import DELAY_OFFSET_FILE
from broker_core.store.store_lock import StoreLock, StoreLockedError, is_store_locked
from broker_core.store.topic_config import BATCH_CQ

from .exchange import Slice, decode_to_files, read_slices
from .index_build import IndexFileResult, index_file_task, plan_index_files, reachable_entries
from .interrupt import InterruptGuard
from .kept_queues import kept_queues, write_kept_queue
from .offsets import (
    OFFSET_TIME_TABLE,
    QUEUE_OFFSET_TABLE,
    RMQOPS_DIR,
    TIMER_CHECKPOINT,
    OffsetChange,
    queue_ranges,
    repair_consumer_offsets,
    repair_delay_offsets,
    repair_timer_offsets,
    write_offset_tables,
)
from .progress import ProgressCallback, StatusPoller
from .queues import (
    BCQ_DIR,
    CQ_DIR,
    Mismatch,
    QueueJobConf,
    QueueResult,
    existing_queues,
    not_yet_dispatched,
    process_queue,
    read_existing_units,
    units_in_log,
)
from .scan import (
    IDX_REC,
    DecodedRange,
    LogEnd,
    data_after_stop,
    file_starts_with_record,
    find_log_end,
    plan_file,
)
from .session import SparkStartError, get_spark, is_local_master, stop_quietly
from .store_input import StoreInput, load_store_input

ALL_PARTS = ("cq", "index", "offsets")
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
DEFAULT_TIME_GRANULARITY_MS = 60_000
INDEX_DIR = "index"
_HP = struct.Struct(">iqii")  # keyHash, phyOffset, index file number, entry number (index verify)
_VERIFY_BUCKETS = 16
# Queue tasks per core: several per core keep both cores busy beside the index task.
QUEUE_TASKS_PER_CORE = 4
# The session a rebuild starts itself: the driver JVM only schedules tasks and collects small
# metadata (the bytes move between Python workers through exchange files), so its JIT stops at C1;
# C2 compiler threads took ~0.6 s of CPU per 2 GiB rebuild on 2 cores, more than the rest of the JVM.
REBUILD_SPARK_CONF = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
INDEX_ITEM = "index"
QUEUES_ITEM = "queues"
DECODE_TASKS_PER_CORE = 2


class RebuildError(RuntimeError):
    """The rebuild cannot run (store held by a running broker, bad parts, missing commitlog)."""


class RebuildUsageError(RebuildError):
    """Options that cannot run (``--parts cq,bogus``): the front ends exit 2, as for other usage errors."""


class RebuildRefusedError(RebuildError):
    """The commitlog has intact data after a corrupt record (or after a gap between its files, or a
    queue's offsets do not follow each other): rebuilding would hide or misplace that data. Also a
    commitlog file whose length is not the log's file size (a last file cut short): the store does not
    open at all, so there is no log end to rebuild up to, not even with ``--force``.

    Exit 1 (the store needs an operator), not 2: the options were fine. ``--force`` rebuilds anyway
    up to the corrupt record or the gap.
    """


class RebuildSparkError(RebuildError):
    """Spark could not start for the master asked for (no master there, no executor granted): exit 1."""


class RebuildWriteError(RebuildError):
    """A file or directory of the store could not be written or replaced: refused before anything changed,
    or (a swap failing half-way) the message names what had been replaced. Front ends exit 1."""


class RebuildInterrupted(RebuildError):
    """Ctrl-C (SIGINT) stopped the rebuild; the message says what had been written to the store (the
    staged files are removed, so everything else is as it was). Front ends exit 130."""

    def __init__(self, root: Path, written: list[str]) -> None:
        names = []
        for w in written:
            try:
                names.append(str(Path(w).relative_to(root)))
            except ValueError:
                names.append(w)
        text = (f"interrupted after writing {', '.join(dict.fromkeys(names))} in {root}; nothing else in the store "
                f"was changed" if names else f"interrupted; the store {root} was left unchanged")
        super().__init__(text)
        self.written = list(written)


@dataclass
class RebuildSummary:
    store: str
    master: str
    parts: list[str]
    verify: bool
    commitlog_files: int = 0
    commitlog_bytes: int = 0  # bytes of valid log processed (up to the log end)
    records: int = 0
    ranges: int = 0
    log_end_offset: int = 0
    log_end_clean: bool = True
    log_end_reason: str = ""
    queues: int = 0
    # queues with no record left in the commitlog whose offsets were kept (kept_queues): "topic/queueId max"
    kept_queues: list[str] = field(default_factory=list)
    cq_files: int = 0
    bcq_files: int = 0
    index_files: int = 0
    index_entries: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    offset_changes: list[OffsetChange] = field(default_factory=list)
    queue_results: list[QueueResult] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    elapsed_seconds: float = 0.0
    # verify: units and index entries pointing past the scanned log end (written after the scan), not compared
    after_scan_units: int = 0
    after_scan_index_entries: int = 0
    # verify: records at or past the dispatched frontier without their unit or index entries yet (dispatch
    # had not reached them; the broker dispatches them on start), as verifyStore's "not yet dispatched"
    not_dispatched_units: int = 0
    not_dispatched_index_entries: int = 0
    # verify: units pointing below the commitlog's min offset (records retention deleted), not compared, as
    # verifyStore's "expired units"; index entries below it are left out the same way
    expired_units: int = 0

    @property
    def mismatch_count(self) -> int:
        return len(self.mismatches)

    @property
    def mb_per_s(self) -> float:
        return self.commitlog_bytes / 1e6 / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0

    @property
    def stopped_early(self) -> bool:
        """True when the log ends at torn or corrupt data (recovery would cut the commitlog there)."""
        return not self.log_end_clean

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("queue_results")
        d["mismatch_count"] = self.mismatch_count
        d["mb_per_s"] = round(self.mb_per_s, 3)
        return d


# ------------------------------------------------------------------------------------------ helpers

def normalize_parts(parts: Sequence[str] | str) -> list[str]:
    """``--parts`` as a list without duplicates; RebuildUsageError naming an unknown part."""
    if isinstance(parts, str):
        parts = [p for p in parts.split(",")]
    out = []
    for p in parts:
        p = p.strip().lower()
        if not p:
            continue
        if p not in ALL_PARTS:
            raise RebuildUsageError(f"unknown part {p!r} in --parts; choose from {','.join(ALL_PARTS)}")
        if p not in out:
            out.append(p)
    if not out:
        raise RebuildUsageError("no parts selected in --parts; choose from " + ",".join(ALL_PARTS))
    return out


def _exchange_paths(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0


STAGING_PREFIX = ".rmqops-rebuild-"


def set_aside_stale_staging(root: Path) -> list[str]:
    """Move the staging directories of rebuilds that were killed (kill -9, a lost machine) into
    ``lost+found/``; one warning each. Called with the store lock held, so no rebuild is using them.

    Why not leave them: each holds a whole rebuilt copy of the queues and index (or, killed during the
    swap, the old ones), which stayed in the store for ever. Why not delete them: nothing we did not
    write ourselves just now is deleted; the operator decides."""
    warnings: list[str] = []
    for stale in sorted(p for p in root.glob(f"{STAGING_PREFIX}*") if p.is_dir() and not p.is_symlink()):
        dest = lost_found_dir(root) / stale.name.lstrip(".")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(stale, dest)
        except OSError as e:
            raise RebuildError(f"cannot move the staging directory {stale} of an interrupted rebuild aside to "
                               f"{dest}: {e.strerror}; nothing was rebuilt") from None
        warnings.append(f"an interrupted rebuild left its staging directory {stale.name}; moved to {dest}")
    return warnings


@dataclass(slots=True)
class _Swap:
    """One directory put in place, and how to put the old one back (``kind``: exchanged, renamed, new, gone)."""

    name: str  # store-relative, for messages
    staged: Path
    target: Path  # the real directory (a symlink's target: the link itself stays)
    kind: str
    old: Path | None = None


def swap_target(root: Path, sub: str, staging: Path) -> Path:
    """The directory a rebuilt ``sub`` replaces: ``root/sub``, or the directory a symlink there points to.

    Why through the link: exchanging the link itself put a plain directory where the operator's link
    (to another disk, say) was. A rename cannot cross file systems, so a link to another one is refused.
    """
    path = root / sub
    if not path.is_symlink():
        return path
    real = path.resolve()
    if real.exists() and not real.is_dir():
        raise RebuildWriteError(f"cannot replace {path}: it is a symbolic link to {real}, which is not a "
                                f"directory; nothing was written")
    if not real.parent.is_dir() or os.stat(real.parent).st_dev != os.stat(staging).st_dev:
        raise RebuildWriteError(f"cannot replace {path}: it is a symbolic link to {real} on another file system, "
                                f"and a rebuild swaps directories by rename within the store's; nothing was written")
    return real


def _not_writable(path: Path) -> bool:
    """True when ``path`` (existing) cannot be written or renamed (permissions, ``chattr +i``)."""
    return not os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0))


def check_replaceable(dirs: Sequence[Path], files: Sequence[Path]) -> None:
    """Refuse, before anything is changed, when a directory to swap or a file to rewrite cannot be.

    A directory is renamed (its parent and, for '..', itself must be writable); a file is rewritten
    through a temporary file beside it and ``.bak`` (its directory must be writable).
    """
    for path in dirs:
        for p in (path.parent, path):
            if p.exists() and _not_writable(p):
                where = "it is" if p == path else f"its directory {p} is"
                raise RebuildWriteError(f"cannot replace {path}: {where} not writable; nothing was written")
    for path in files:
        d = path.parent
        while not d.exists():  # rmqops/ is made on the first rebuild
            d = d.parent
        for p in (d, path):
            if p.exists() and _not_writable(p):
                where = "it is" if p == path else f"its directory {p} is"
                raise RebuildWriteError(f"cannot write {path}: {where} not writable; nothing was written")


def put_in_place(name: str, staged: Path, target: Path, trash: Path) -> _Swap | None:
    """Put ``staged`` at ``target`` by rename; the old ``target`` stays in the staging area until the end.

    With both present the two directories are exchanged in one atomic step, so ``target`` always holds a
    complete old or new tree. A missing ``staged`` means the rebuilt state has no such directory. Returns
    how to undo it (None: nothing was there, nothing changed).
    """
    trash.mkdir(parents=True, exist_ok=True)
    old = trash / (name + ".old")
    if staged.exists() and target.exists():
        if _exchange_paths(staged, target):
            return _Swap(name, staged, target, "exchanged")
        os.rename(target, old)
        try:
            os.rename(staged, target)
        except OSError:
            os.rename(old, target)
            raise
        return _Swap(name, staged, target, "renamed", old)
    if staged.exists():
        os.rename(staged, target)
        return _Swap(name, staged, target, "new")
    if target.exists():
        os.rename(target, old)
        return _Swap(name, staged, target, "gone", old)
    return None


def put_back(swap: _Swap) -> None:
    """Undo :func:`put_in_place`: the old directory at its place again."""
    if swap.kind == "exchanged":
        if not _exchange_paths(swap.staged, swap.target):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(swap.target))
    elif swap.kind == "renamed":
        os.rename(swap.target, swap.staged)
        os.rename(swap.old, swap.target)
    elif swap.kind == "new":
        os.rename(swap.target, swap.staged)
    else:
        os.rename(swap.old, swap.target)


def replace_dir(staged: Path | None, target: Path, trash: Path) -> None:
    """Put ``staged`` at ``target`` and delete the old tree (see :func:`put_in_place`)."""
    swap = put_in_place(target.name, staged if staged is not None else trash / ".none", target, trash)
    if swap is not None and swap.kind == "exchanged":
        shutil.rmtree(swap.staged)
    elif swap is not None and swap.old is not None:
        shutil.rmtree(swap.old)


EXCHANGE_DIR_ENV = "RMQOPS_SPARK_EXCHANGE_DIR"


def _exchange_dir(staging: Path, verify: bool) -> Path:
    """Where decode tasks leave their exchange files (``exchange.py``); removed when the rebuild ends.

    A rebuild uses its staging directory inside the store. A verify writes nothing inside the store
    (a read-only store, a copy beside a running broker), on any master: its exchange files go to a
    temporary directory under ``$RMQOPS_SPARK_EXCHANGE_DIR`` or the system temp directory, which the
    executors of a local or a one-machine standalone cluster share. A cluster of several machines
    needs a directory every executor sees there (a shared mount), given by that variable.
    """
    if verify:
        parent = os.environ.get(EXCHANGE_DIR_ENV) or None
        try:
            return Path(tempfile.mkdtemp(prefix="rmqops-verify-", dir=parent))
        except OSError as e:
            raise RebuildWriteError(f"cannot make the exchange directory for --verify under "
                                    f"{parent or tempfile.gettempdir()}: {e.strerror or e} (set {EXCHANGE_DIR_ENV} "
                                    f"to a writable directory every executor sees); nothing was checked") from None
    d = staging / "exchange"
    d.mkdir(parents=True)
    return d


def _queue_groups(queue_slices: dict[tuple[str, int], list[Slice]], n_groups: int
                  ) -> list[list[tuple[str, int, list[Slice]]]]:
    """Queues in ``n_groups`` tasks of about equal bytes (largest first, each to the lightest group),
    heaviest group first: the scheduler hands tasks out in order as cores free up."""
    groups: list[list[tuple[str, int, list[Slice]]]] = [[] for _ in range(max(1, n_groups))]
    loads = [0] * len(groups)
    by_size = sorted(queue_slices.items(), key=lambda kv: (-sum(s[2] for s in kv[1]), kv[0]))
    for (topic, queue_id), slices in by_size:
        g = loads.index(min(loads))
        groups[g].append((topic, queue_id, slices))
        loads[g] += sum(s[2] for s in slices) + 1
    order = sorted(range(len(groups)), key=lambda g: -loads[g])
    return [groups[g] for g in order if groups[g]]


def _write_task(items: Iterable[tuple], conf: QueueJobConf, staging_index_dir: str, hash_slot_num: int,
                index_num: int) -> Iterator[QueueResult | IndexFileResult]:
    """Write-stage task: build one index file, or write (verify, measure) a group of queues."""
    for item in items:
        if item[0] == INDEX_ITEM:
            _kind, file_no, name, plan = item
            yield index_file_task(staging_index_dir, file_no, name, hash_slot_num, index_num, plan)
        else:
            for topic, queue_id, slices in item[1]:
                yield process_queue(conf, topic, queue_id, list(enumerate(read_slices(slices))))


def _emit_expected_hashes(key_slices: Iterable[Slice]) -> Iterator[tuple[int, tuple[int, bytes]]]:
    pairs = ((h, phy, -1, -1) for blob in read_slices(key_slices) for h, phy, _ts in IDX_REC.iter_unpack(blob))
    yield from _bucket_hash_pairs(pairs, 0)


def _emit_actual_hashes(hash_slot_num: int, index_num: int, file_no: int, path: str, min_phy_offset: int
                        ) -> Iterator[tuple[int, tuple[int, bytes]]]:
    """The reachable entries of one index file, those of expired records (below the commitlog's min offset)
    left out: retention deletes an index file only once all of it is below (Apache's deleteExpiredFile),
    so the oldest file kept still holds entries of deleted records, which verifyStore skips too."""
    entries = reachable_entries(path, hash_slot_num, index_num, numbered=True)
    yield from _bucket_hash_pairs(((h, phy, file_no, n) for h, phy, n in entries if phy >= min_phy_offset), 1)


def _bucket_hash_pairs(pairs: Iterable[tuple[int, int, int, int]], side: int
                       ) -> Iterator[tuple[int, tuple[int, bytes]]]:
    """(key hash, phy offset, index file number, entry number) packed per verify bucket, tagged
    0 = expected (no file: -1), 1 = actual."""
    buckets: dict[int, bytearray] = {}
    for h, phy, file_no, entry_no in pairs:
        b = h % _VERIFY_BUCKETS
        buf = buckets.get(b)
        if buf is None:
            buf = buckets[b] = bytearray()
        buf += _HP.pack(h, phy, file_no, entry_no)
    for b, buf in buckets.items():
        yield b, (side, bytes(buf))


def _diff_hash_bucket(row: tuple[int, Iterable[tuple[int, bytes]]]) -> list[tuple[int, int, int, int, list]]:
    """(hash, phy, expected count, found count, [(file number, entry number)] where found) per difference.

    Where an entry lies is looked up only for the differences (a second pass over the found side).
    """
    _bucket, chunks = row
    exp: Counter = Counter()
    act: Counter = Counter()
    found_blobs = []
    for side, blob in chunks:
        (exp if side == 0 else act).update((h, phy) for h, phy, _f, _n in _HP.iter_unpack(blob))
        if side == 1:
            found_blobs.append(blob)
    diff = {key: (exp.get(key, 0), act.get(key, 0)) for key in exp.keys() | act.keys()
            if exp.get(key, 0) != act.get(key, 0)}
    where: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for blob in found_blobs if diff else ():
        for h, phy, file_no, entry_no in _HP.iter_unpack(blob):
            if (h, phy) in diff:
                where.setdefault((h, phy), []).append((file_no, entry_no))
    return [(h, phy, e, a, sorted(where.get((h, phy), []))) for (h, phy), (e, a) in diff.items()]


def _index_file_covering(headers: list[tuple[str, int, int]], phy: int) -> str | None:
    """The index file whose header's [beginPhyOffset, endPhyOffset] holds ``phy`` (where its key belongs)."""
    return next((name for name, begin, end in headers if begin <= phy <= end), None)


def _index_where(names: list[str], headers: list[tuple[str, int, int]], phy: int, found: list[tuple[int, int]]
                 ) -> str:
    """``index/FILE`` of a mismatch: the file(s) and entry numbers holding it, else the file whose
    commitlog range covers it (an operator cannot act on "index" alone)."""
    if found:
        return ", ".join(f"index/{names[f]} entry {n}" for f, n in found[:3]) + (" ..." if len(found) > 3 else "")
    covering = _index_file_covering(headers, phy)
    return f"index/{covering}" if covering else "index (no file covers this offset)"


def _index_headers(paths: list[str]) -> list[tuple[str, int, int]]:
    """(file name, beginPhyOffset, endPhyOffset) of each index file (40-byte headers: cheap)."""
    from broker_core.store.codec.index_format import INDEX_HEADER, IndexHeaderValues

    out = []
    for p in paths:
        with open(p, "rb") as fh:
            h = IndexHeaderValues.decode(fh.read(INDEX_HEADER.size))
        out.append((Path(p).name, h.begin_phy_offset, h.end_phy_offset))
    return out


def _request_at(si: StoreInput, phy: int) -> DispatchRequest | None:
    """The dispatch request of the record at commitlog offset ``phy`` (None: no valid record there);
    reads that record only (a mismatch report may name many)."""
    for f in si.files:
        if f.base <= phy < f.base + f.length:
            with open(f.path, "rb") as fh:
                fh.seek(phy - f.base)
                head = fh.read(4)
                size = int.from_bytes(head, "big", signed=True) if len(head) == 4 else 0
                data = head + fh.read(max(0, min(size, f.length - (phy - f.base)) - 4))
            chk = check_record(data, 0, len(data), False, False)
            return build_dispatch_request(chk.message, si.delay_levels_ms) if chk.kind == RECORD_VALID else None
    return None


def _key_names(req: DispatchRequest | None) -> list[str]:
    """Index keys (``topic#key``) of a record (for readable reports)."""
    if req is None:
        return []
    keys = [f"{req.topic}#{req.uniq_key}"] if req.uniq_key is not None else []
    return keys + [f"{req.topic}#{t}" for t in (req.keys or "").split(" ") if t]


def _verify_leftover_queues(si: StoreInput, queue_results: list[QueueResult], queue_types: dict[str, str],
                            summary: RebuildSummary, scan_end: int) -> None:
    """Queue directories the commitlog does not explain (or of the wrong CQ type): every unit is extra, but
    those of expired records (a queue whose records all went with retention keeps its last file)."""
    cfg = si.config
    expected_keys = {(q.topic, q.queue_id) for q in queue_results}
    for topic, qid, kind in existing_queues(si.root):
        where = f"{topic}/{qid}"
        want = "BatchCQ" if queue_types.get(topic) == BATCH_CQ else "SimpleCQ"
        if (topic, qid) in expected_keys and kind == want:
            continue
        try:
            units = read_existing_units(si.root, topic, qid, kind == "BatchCQ",
                                        cfg.batch_consume_queue_file_size if kind == "BatchCQ"
                                        else cfg.consume_queue_file_size)
        except (ValueError, OSError) as e:
            summary.mismatches.append(Mismatch("unreadable-queue", where, -1, None, None, str(e)))
            continue
        units, expired, after_scan = units_in_log(units, si.min_phy_offset, scan_end)
        summary.expired_units += expired
        summary.after_scan_units += after_scan
        detail = (f"{kind} directory for a {want} topic" if (topic, qid) in expected_keys
                  else "queue has no records in the commitlog")
        for u in units:
            summary.mismatches.append(Mismatch("extra-unit", where, u[0], None, u, detail))


def _verify_index(sc, si: StoreInput, key_slices: list[Slice], slot_num: int, index_num: int,
                  summary: RebuildSummary, scan_end: int, frontier: int = -1) -> None:
    """Entries reachable in the existing index files vs the keys the commitlog implies, as multisets.

    Entries missing for records at or past ``frontier`` (the newest dispatched record) are not yet
    dispatched, as their consume queue units (see queues.not_yet_dispatched): counted, not mismatches.

    Entries pointing at or past ``scan_end`` were written after the scan (a running broker): counted, not compared.
    """
    idx_dir = si.root / INDEX_DIR
    size = index_file_size(slot_num, index_num)
    paths = []
    if idx_dir.is_dir():
        for p in sorted(idx_dir.iterdir()):
            if not (p.is_file() and is_index_file_name(p.name)):
                continue
            if p.stat().st_size != size:
                summary.mismatches.append(Mismatch(
                    "unreadable-index", f"index/{p.name}", -1, None, None,
                    f"{p.name} is {p.stat().st_size} bytes, expected {size}"))
                continue
            paths.append(str(p))
    summary.index_files = len(paths)
    expected = (sc.parallelize(key_slices, max(1, min(len(key_slices), sc.defaultParallelism * 2)))
                .mapPartitions(_emit_expected_hashes))
    min_phy = si.min_phy_offset
    actual = (sc.parallelize(list(enumerate(paths)), max(1, len(paths)))
              .flatMap(lambda fp: _emit_actual_hashes(slot_num, index_num, fp[0], fp[1], min_phy)))
    diffs = (expected.union(actual).groupByKey(_VERIFY_BUCKETS)
             .flatMap(_diff_hash_bucket).collect())
    names = [Path(p).name for p in paths]
    headers = _index_headers(paths) if diffs else []
    for h, phy, e, a, found in sorted(diffs, key=lambda d: (d[1], d[0])):
        if e == 0 and 0 <= scan_end <= phy:
            summary.after_scan_index_entries += a
            continue
        if e > a and 0 <= frontier <= phy:
            summary.not_dispatched_index_entries += e - a
            continue
        req = _request_at(si, phy)
        if e < a and req is not None and deleted_before_cut(si.deleted_topics, req.topic, phy):
            continue  # indexed before its topic was deleted: the rebuild leaves it out, a kept entry is no error
        names_at = [k for k in _key_names(req) if index_key_hash(k) == h]
        key_name = names_at[0] if names_at else f"hash {h}"
        kind = "missing-index-entry" if e > a else "extra-index-entry"
        where = _index_where(names, headers, phy, found)
        summary.mismatches.append(Mismatch(kind, where, phy, (h, phy, e), (h, phy, a),
                                           f"key {key_name}: expected {e} entries, found {a} ({where})"))


def _bytes_after_stop(si: StoreInput, metas: list[tuple], log_end: LogEnd) -> int:
    """Data after the log end: the stop file's non-zero bytes past the stopped record up to the
    next decoded range, plus the valid records every later range decoded."""
    f = si.files[log_end.file_index]
    pos = log_end.offset - f.base
    later = [m for m in metas if m[2] + m[3] > log_end.offset]
    next_start = min((m[3] for m in later if m[1] == log_end.file_index), default=-1)
    return data_after_stop(f.path, pos, next_start) + sum(m[4] - m[3] for m in later)


def _check_data_after_stop(si: StoreInput, metas: list[tuple], log_end: LogEnd, summary: RebuildSummary,
                           force: bool) -> None:
    """Refuse (verify: a mismatch) when non-zero data follows where the log stops; a torn tail passes."""
    follow = _bytes_after_stop(si, metas, log_end)
    if not follow:
        return
    f = si.files[log_end.file_index]
    name = Path(f.path).name
    what = (f"commitlog {name} at offset {log_end.offset}: {log_end.reason}, and {follow} bytes of data "
            f"follow it")
    if summary.verify:
        summary.mismatches.append(Mismatch("data-after-log-end", f"commitlog/{name}", log_end.offset, None, None,
                                           f"{log_end.reason}; {follow} bytes of data follow it, which recovery "
                                           f"and a rebuild would drop"))
    elif force:
        summary.warnings.append(f"{what}; --force: rebuilt up to it, the data after it is not dispatched")
    else:
        raise RebuildRefusedError(f"{what}; a rebuild would end the log there and drop it, so nothing was "
                                  f"written (--force rebuilds up to it as recovery would)")


def _keep_expired_queues(si: StoreInput, staging: Path, mode: str, queue_types: dict[str, str],
                         queue_results: list[QueueResult], summary: RebuildSummary) -> None:
    """Add the queues the commitlog has no record of but whose offsets must survive (``kept_queues``) to the
    results, written into the staging directory when the queues are rebuilt."""
    cfg = si.config
    kept = kept_queues(si.root, {(q.topic, q.queue_id) for q in queue_results}, queue_types, si.min_phy_offset,
                       cfg.consume_queue_file_size, cfg.batch_consume_queue_file_size, si.deleted_topics)
    for k in kept:
        files = write_kept_queue(staging, k, cfg.consume_queue_file_size,
                                 cfg.batch_consume_queue_file_size) if mode == "write" else 0
        if k.cq_type == "BatchCQ":
            summary.bcq_files += files
        else:
            summary.cq_files += files
        queue_results.append(k.result(files))
        summary.kept_queues.append(f"{k.topic}/{k.queue_id} at {k.max_offset} ({k.source})")
    queue_results.sort(key=lambda q: (q.topic, q.queue_id))
    summary.queues += len(kept)


def _replace_files(si: StoreInput, staging: Path, part_list: list[str], want_index: bool,
                   queue_results: list[QueueResult], time_granularity_ms: int, summary: RebuildSummary) -> None:
    """Swap the staged directories in and write the offset files, or change nothing.

    Every target is checked first (a refusal changes nothing). Directories go first, each swap kept
    undoable until the end; a failure then puts back the ones already swapped. Only what cannot be
    put back (or offset files already rewritten) is named in the error, so the operator knows the
    store's state exactly.
    """
    subs = ([CQ_DIR, BCQ_DIR] if "cq" in part_list else []) + ([INDEX_DIR] if want_index else [])
    targets = {sub: swap_target(si.root, sub, staging) for sub in subs}
    files: list[Path] = []
    if "offsets" in part_list:
        files = [si.root / RMQOPS_DIR / QUEUE_OFFSET_TABLE, si.root / RMQOPS_DIR / OFFSET_TIME_TABLE]
        files.extend(si.root / "config" / name for name in _changed_offset_files(summary))
    check_replaceable(list(targets.values()), files)
    trash = staging / "trash"
    swaps: list[_Swap] = []
    written: list[str] = []
    try:
        for sub, target in targets.items():
            staged = staging / sub
            if target != si.root / sub:
                staged.mkdir(exist_ok=True)  # a linked directory stays, emptied if the rebuilt state has none
            swap = put_in_place(sub, staged, target, trash)
            if swap is not None:
                swaps.append(swap)
        if "offsets" in part_list:
            written.extend(str(p) for p in write_offset_tables(si.root, queue_results, time_granularity_ms))
            changed = _changed_offset_files(summary)
            repair = {"consumerOffset.json": repair_consumer_offsets, DELAY_OFFSET_FILE: repair_delay_offsets,
                      TIMER_CHECKPOINT: repair_timer_offsets}
            for name in changed:
                repair[name](si.root / "config", queue_ranges(queue_results), write=True)
                written.append(str(si.root / "config" / name))
    except OSError as e:
        kept = [s.name for s in swaps]
        for swap in reversed(swaps):
            try:
                put_back(swap)
                kept.remove(swap.name)
            except OSError:
                pass
        raise RebuildWriteError(_write_failure(si.root, e, [str(si.root / k) for k in kept] + written)) from None
    summary.written.extend(written)
    summary.written.extend(str(si.root / s.name) for s in swaps)


def _changed_offset_files(summary: RebuildSummary) -> list[str]:
    """The config files (consumerOffset.json, delayOffset.json, timercheck) holding an offset the rebuild clamps."""
    return list(dict.fromkeys(c.source for c in summary.offset_changes))


def _write_failure(root: Path, e: OSError, changed: list[str]) -> str:
    """One line: what failed, and exactly what of the store had already been replaced (or that nothing was)."""
    what = f"cannot write {e.filename or root}: {e.strerror or e}"
    if not changed:
        return f"{what}; nothing in the store was changed"
    names = []
    for w in changed:
        try:
            names.append(str(Path(w).relative_to(root)))
        except ValueError:
            names.append(w)
    return f"{what}; already replaced: {', '.join(names)} in {root}; nothing else in the store was changed"


# ------------------------------------------------------------------------------------------ main

def run_rebuild(store_dir: str | os.PathLike[str], config_file: str | os.PathLike[str] | None = None,
                parts: Sequence[str] | str = ALL_PARTS, master: str = "local[*]", verify: bool = False,
                progress: ProgressCallback | None = None, *, spark=None,
                split_bytes: int = DEFAULT_SPLIT_BYTES,
                time_granularity_ms: int = DEFAULT_TIME_GRANULARITY_MS, force: bool = False) -> RebuildSummary:
    """Rebuild (or with ``verify`` only check) the selected ``parts`` of the store at ``store_dir``.

    ``spark`` lets a caller reuse a running SparkSession (tests, benchmarks); otherwise one is created
    for ``master`` and stopped at the end. ``progress(phase, done_tasks, total_tasks)`` is called from
    a poller thread. Raises RebuildError if a broker holds the store (unless verifying), and
    RebuildRefusedError, writing nothing, when intact data follows a corrupt record or a gap between
    commitlog files (the log would end before it) unless ``force``; ``verify`` reports that as a
    mismatch. A queue whose records' offsets do not follow each other is refused too (its units
    would land at offsets that are not theirs). RebuildSparkError: Spark could not start on
    ``master``. RebuildInterrupted: Ctrl-C (SIGINT) stopped it; its message says what was written.
    """
    with InterruptGuard() as guard:
        try:
            return _run_rebuild(store_dir, config_file, parts, master, verify, progress, spark, split_bytes,
                                time_granularity_ms, force, guard)
        except KeyboardInterrupt:
            raise RebuildInterrupted(Path(store_dir).resolve(), []) from None


def _run_rebuild(store_dir: str | os.PathLike[str], config_file: str | os.PathLike[str] | None,
                 parts: Sequence[str] | str, master: str, verify: bool, progress: ProgressCallback | None, spark,
                 split_bytes: int, time_granularity_ms: int, force: bool, guard: InterruptGuard) -> RebuildSummary:
    t0 = time.monotonic()
    part_list = normalize_parts(parts)
    try:
        si = load_store_input(store_dir, config_file)
    except FileNotFoundError as e:
        raise RebuildError(str(e)) from e
    if si.file_size_problem is not None:
        # Refused before the lock and Spark, whatever --force says: recovery does not end the log at a
        # cut file, the store does not open, so queues rebuilt (and offsets clamped) to match it are wrong.
        raise RebuildRefusedError(f"{si.file_size_problem}; the broker cannot open the store with it (nor can "
                                  f"mqadmin verifyStore), so nothing was {'checked' if verify else 'written'}")
    if si.index_size_problem is not None and "index" in part_list and si.config.message_index_enable:
        # Index files of another geometry: the config is wrong, not the files. A rebuild would replace them
        # with files the broker cannot open with its real config; a verify would report every entry.
        raise RebuildRefusedError(f"{si.index_size_problem}; nothing was {'checked' if verify else 'written'}")
    summary = RebuildSummary(str(si.root), master, part_list, verify, commitlog_files=len(si.files))
    summary.warnings.extend(si.warnings)
    cfg = si.config
    lock: StoreLock | None = None
    held = verify and is_store_locked(si.root)
    if verify:
        if held:
            summary.warnings.append("a broker holds this store; verify read files that may be changing")
    else:
        lock = StoreLock(si.root, role="mqadmin")  # a refused broker or mqadmin says "another mqadmin"
        try:
            lock.acquire()
        except StoreLockedError as e:
            raise RebuildError(f"{e}; stop the broker before rebuilding (or use --verify)") from e
        try:
            summary.warnings.extend(set_aside_stale_staging(si.root))
        except BaseException:
            lock.release()
            raise
    staging = si.root / f"{STAGING_PREFIX}{os.getpid()}-{int(time.time() * 1000)}"
    own_spark = spark is None
    exchange_dir: Path | None = None
    gaps = {g.after_index: g.describe() for g in si.gaps}
    try:
        if si.gaps and not verify and not force:
            # Refused before Spark starts: the log would end at the gap (as at a corrupt record).
            g = si.gaps[0]
            later = sum(1 for f in si.files[g.after_index:] if f.length)
            raise RebuildRefusedError(
                f"{g.describe()}; a rebuild would end the log before the gap and drop the {later} commitlog "
                f"file(s) from {g.after} on, so nothing was written (--force rebuilds up to the gap as recovery "
                f"would)")
        if own_spark:
            try:
                spark = get_spark(master, "rmqops-rebuildStore", REBUILD_SPARK_CONF, interrupted=guard.is_requested)
            except SparkStartError as e:
                raise RebuildSparkError(str(e)) from None
        sc = spark.sparkContext
        guard.attach(sc)
        summary.master = sc.master
        if not verify:
            staging.mkdir(parents=True)
        with StatusPoller(sc, progress) as poller:
            phase_t = time.monotonic()

            def phase(name: str) -> None:
                nonlocal phase_t
                guard.check()  # Ctrl-C: stop between phases (the swap is one phase: not cut half-way)
                now = time.monotonic()
                if poller.phase:
                    summary.phase_seconds[poller.phase] = round(now - phase_t, 3)
                phase_t = now
                poller.set_phase(name)

            # -- plan: record-aligned ranges from a few small reads per range (scan.plan_file) ------
            phase("plan ranges")
            split = max(1, int(split_bytes))
            planned: list[tuple[int, int, int, int, int]] = []
            for i, f in enumerate(si.files):
                for r in plan_file(f.path, f.base, split):
                    planned.append((len(planned), i, f.base, r.start, r.end))
            summary.ranges = len(planned)

            # -- pass 2: decode; each range's units and keys go to its exchange file (exchange.py) -----
            phase("decode records")
            want_index = "index" in part_list and cfg.message_index_enable
            want_queues = "cq" in part_list or "offsets" in part_list
            check_crc = cfg.check_crc_on_recover
            delay_levels = si.delay_levels_ms
            deleted = si.deleted_topics
            rows = [(ri, fi, si.files[fi].path, base, start, end) for ri, fi, base, start, end in planned]
            metas: list[tuple] = []
            if rows:
                exchange_dir = _exchange_dir(staging, verify)
                xdir = str(exchange_dir)
                # A few decode tasks per core (a task's fixed cost is tens of ms of CPU), ranges in order.
                metas = (sc.parallelize(rows, min(len(rows), sc.defaultParallelism * DECODE_TASKS_PER_CORE))
                         .mapPartitions(lambda it: decode_to_files(it, check_crc, delay_levels, want_index,
                                                                   want_queues, xdir, deleted))
                         .collect())
            metas.sort(key=lambda m: m[0])
            light = [DecodedRange(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]) for m in metas]
            after_has_data = {}
            later = False
            for i in range(len(si.files) - 1, -1, -1):
                after_has_data[i] = later
                later = later or file_starts_with_record(si.files[i].path)
            log_end: LogEnd = find_log_end(light, after_has_data, gaps)
            summary.log_end_offset = log_end.offset
            summary.log_end_clean = log_end.clean
            summary.log_end_reason = log_end.reason
            if not log_end.clean:
                summary.warnings.append(
                    f"commitlog valid data ends at offset {log_end.offset}: {log_end.reason}; "
                    f"recovery stops there too, records after it are not dispatched")
                _check_data_after_stop(si, metas, log_end, summary, force)
            valid_metas = [m for m in metas if m[2] + m[3] < log_end.offset]
            summary.records = sum(m[5] for m in valid_metas)
            summary.commitlog_bytes = sum(m[4] - m[3] for m in valid_metas)
            batch_seen: set[str] = set()
            queue_slices: dict[tuple[str, int], list[Slice]] = {}
            for m in valid_metas:
                batch_seen.update(m[9])
                for q, (offset, length) in m[13].items():
                    queue_slices.setdefault(q, []).append((m[11], offset, length))
                for q in m[10]:
                    queue_slices.setdefault(tuple(q), [])
            queue_types = {t: BATCH_CQ for t in batch_seen if si.queue_type(t, batch_seen) == BATCH_CQ}
            if si.topic_queue_types:
                queue_types.update({t: v for t, v in si.topic_queue_types.items() if v == BATCH_CQ})
            summary.queues = len(queue_slices)

            # -- index plan: key k of the valid log goes to file k // (maxIndexNum - 1) ----------------
            per_file = cfg.max_index_num - 1
            key_ranges = [(m[11], m[12][0], m[8]) for m in valid_metas if m[8]]
            total_keys = sum(r[2] for r in key_ranges)
            n_files = math.ceil(total_keys / per_file) if total_keys else 0
            slot_num, index_num = cfg.max_hash_slot_num, cfg.max_index_num
            build_index = bool(rows) and want_index and not verify and n_files > 0
            idx_dir = staging / INDEX_DIR
            names: list[str] = []
            if want_index and not verify:
                summary.index_entries = total_keys
                idx_dir.mkdir(parents=True, exist_ok=True)
                base_ms = time.time_ns() // 1_000_000
                names = [index_file_name(base_ms + i) for i in range(n_files)]

            # -- queues and index files: one job, index files first (the longest tasks) ---------------
            # Beside a broker holding the store its queues and index grow while the log is scanned: what points
            # past the scanned end is newer than the scan, not extra. Without one it is damage (a cut log).
            scan_end = log_end.offset if verify and held else -1
            mode = "verify" if verify and "cq" in part_list else ("write" if "cq" in part_list and not verify
                                                                  else "stats")
            conf = QueueJobConf(mode, str(staging), str(si.root), cfg.consume_queue_file_size,
                                cfg.batch_consume_queue_file_size, queue_types, time_granularity_ms,
                                scan_end=scan_end, min_phy_offset=si.min_phy_offset)
            run_queues = bool(rows) and want_queues and bool(queue_slices)
            items: list[tuple] = []
            if build_index:
                for file_no, plan in enumerate(plan_index_files(key_ranges, per_file)):
                    items.append((INDEX_ITEM, file_no, names[file_no], plan))
            if run_queues:
                groups = _queue_groups(queue_slices, sc.defaultParallelism * QUEUE_TASKS_PER_CORE)
                items.extend((QUEUES_ITEM, g) for g in groups)
            if items:
                if build_index:
                    phase("write queues + index" if run_queues else "write index")
                else:
                    phase({"verify": "verify queues", "write": "write queues", "stats": "queue offsets"}[mode])
            queue_results: list[QueueResult] = []
            index_results: list[IndexFileResult] = []
            if items:
                out = (sc.parallelize(items, len(items))
                       .mapPartitions(lambda it: _write_task(it, conf, str(idx_dir), slot_num, index_num))
                       .collect())
                for r in out:
                    (index_results if isinstance(r, IndexFileResult) else queue_results).append(r)
            queue_results.sort(key=lambda q: (q.topic, q.queue_id))
            refused = [q.refused for q in queue_results if q.refused]
            if refused:
                more = f" (and {len(refused) - 1} more queue(s))" if len(refused) > 1 else ""
                raise RebuildRefusedError(f"{refused[0]}{more}; nothing was written")
            summary.queue_results = queue_results
            frontier = -1
            # only after a crash (or beside a running broker: both leave ``abort``): a clean shutdown
            # dispatched everything, so there a missing unit is damage, as verifyStore judges it
            if mode == "verify" and (si.root / "abort").exists():
                summary.not_dispatched_units, frontier = not_yet_dispatched(queue_results)
            for q in queue_results:
                summary.mismatches.extend(q.mismatches)
                if q.cq_type == "BatchCQ":
                    summary.bcq_files += q.files
                else:
                    summary.cq_files += q.files
            summary.after_scan_units = sum(q.after_scan for q in queue_results)
            summary.expired_units = sum(q.expired for q in queue_results)
            if rows and mode == "verify":
                _verify_leftover_queues(si, queue_results, queue_types, summary, scan_end)

            # -- index ---------------------------------------------------------------------------
            if build_index:
                summary.index_files = len(index_results)
            if rows and want_index and verify:
                summary.index_entries = total_keys
                phase("verify index")
                _verify_index(sc, si, [(p, o, n * IDX_REC.size) for p, o, n in key_ranges], slot_num, index_num,
                              summary, scan_end, frontier)
            if summary.after_scan_units or summary.after_scan_index_entries:
                summary.warnings.append(
                    f"{summary.after_scan_units} consume queue units and {summary.after_scan_index_entries} index "
                    f"entries point at or past the scanned log end {log_end.offset}, written by the broker holding "
                    f"the store after the scan: not checked")
            if summary.not_dispatched_units or summary.not_dispatched_index_entries:
                summary.warnings.append(
                    f"{summary.not_dispatched_units} consume queue units and {summary.not_dispatched_index_entries} "
                    f"index entries of records at or past commitlog offset {frontier}, the newest dispatched, are "
                    f"not written yet: not yet dispatched (the broker dispatches them when it starts), as "
                    f"verifyStore counts them")
            if exchange_dir is not None:
                shutil.rmtree(exchange_dir, ignore_errors=True)

            # -- queues whose records all went with retention keep their offsets --------------------
            if rows and want_queues:
                _keep_expired_queues(si, staging, mode, queue_types, queue_results, summary)

            # -- offsets -------------------------------------------------------------------------
            if "offsets" in part_list:
                phase("offsets")
                ranges = queue_ranges(queue_results)
                config_dir = si.root / "config"
                summary.offset_changes = (repair_consumer_offsets(config_dir, ranges, write=False)
                                          + repair_delay_offsets(config_dir, ranges, write=False)
                                          + repair_timer_offsets(config_dir, ranges, write=False))

            # -- swap staged output into place ---------------------------------------------------
            if not verify:
                phase("replace files")
                _replace_files(si, staging, part_list, want_index, queue_results, time_granularity_ms, summary)
            phase("")
    except KeyboardInterrupt:
        raise RebuildInterrupted(si.root, summary.written) from None
    except Exception:
        if guard.requested:  # a job cancelled by Ctrl-C fails with Spark's "cancelled" error: not a failure
            raise RebuildInterrupted(si.root, summary.written) from None
        raise
    finally:
        if own_spark and spark is not None:
            if guard.requested:
                stop_quietly(spark)
            else:
                spark.stop()
        if exchange_dir is not None and exchange_dir.exists():
            shutil.rmtree(exchange_dir, ignore_errors=True)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        if lock is not None:
            lock.release()
    summary.phase_seconds.pop("", None)
    summary.elapsed_seconds = time.monotonic() - t0
    if not is_local_master(summary.master):
        summary.warnings.append("cluster mode: executors read and write the store path directly; "
                                "it must be the same path on every worker")
    return summary


# ------------------------------------------------------------------------------------------ output

def render_summary(summary: RebuildSummary):
    """The final summary as a rich Table (records, files, mismatches, time, MB/s)."""
    from rich.table import Table

    title = "rebuildStore --verify" if summary.verify else "rebuildStore"
    t = Table(title=f"{title}: {summary.store}", show_header=True, header_style="bold")
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_row("master", summary.master)
    t.add_row("parts", ",".join(summary.parts))
    t.add_row("commitlog files", str(summary.commitlog_files))
    t.add_row("records", f"{summary.records:,}")
    t.add_row("commitlog MB", f"{summary.commitlog_bytes / 1e6:,.1f}")
    end = f"{summary.log_end_offset:,}" + ("" if summary.log_end_clean else f" (STOPPED: {summary.log_end_reason})")
    t.add_row("log end offset", end)
    t.add_row("queues", str(summary.queues))
    verb = "checked" if summary.verify else "written"
    if "cq" in summary.parts:
        t.add_row(f"CQ files {verb}", str(summary.cq_files))
        t.add_row(f"BCQ files {verb}", str(summary.bcq_files))
    if summary.kept_queues:
        t.add_row("queues kept (records expired)", str(len(summary.kept_queues)))
    if "index" in summary.parts:
        t.add_row(f"index files {verb}", str(summary.index_files))
        t.add_row("index entries", f"{summary.index_entries:,}")
    if "offsets" in summary.parts:
        t.add_row("offsets clamped" if not summary.verify else "offsets out of range",
                  str(len(summary.offset_changes)))
    t.add_row("mismatches", str(summary.mismatch_count) if summary.verify else "-")
    t.add_row("time (s)", f"{summary.elapsed_seconds:.2f}")
    t.add_row("MB/s", f"{summary.mb_per_s:.1f}")
    return t


def render_details(summary: RebuildSummary, limit: int = 50):
    """Mismatches and offset changes as a rich Table (None when there is nothing to list)."""
    from rich.table import Table

    if not summary.mismatches and not summary.offset_changes and not summary.warnings:
        return None
    t = Table(title="details", show_header=True, header_style="bold")
    t.add_column("kind")
    t.add_column("where")
    t.add_column("offset", justify="right")
    t.add_column("detail")
    for m in summary.mismatches[:limit]:
        detail = m.detail or f"expected {m.expected} found {m.actual}"
        t.add_row(m.kind, m.where, str(m.offset), detail)
    if len(summary.mismatches) > limit:
        t.add_row("...", "", "", f"{len(summary.mismatches) - limit} more mismatches")
    for c in summary.offset_changes[:limit]:
        t.add_row("offset-clamped" if not summary.verify else "offset-out-of-range", c.where,
                  str(c.old), f"{c.reason}: [{c.min_offset}, {c.max_offset}] -> {c.new}")
    for w in summary.warnings:
        t.add_row("warning", "", "", w)
    return t


def print_summary(summary: RebuildSummary, console=None) -> None:
    from rich.console import Console

    console = console or Console()
    console.print(render_summary(summary))
    details = render_details(summary)
    if details is not None:
        console.print(details)
