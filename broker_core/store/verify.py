"""verifyStore: check every consume queue unit and index entry of a store against its commitlog.

Why this module exists: after a crash, a copy, a disk problem or a rebuild, an operator needs one
read-only answer to "do the derived files still describe the commitlog?". The checks, both ways:

* each CQ/BCQ unit points at a valid record of the same topic and queue, whose size, queue offset
  (batch base and count for BatchCQ), tagsCode and (BatchCQ) store time match the unit;
* each record that enters a queue has its unit (unless its queue has aged out below it), and records
  beyond the queue's end are counted as not yet dispatched (a broker re-dispatches them on start);
* each index entry points at a record start whose ``topic#key`` (UNIQ_KEY or a KEYS token) hashes to
  the entry's hash, and each record inside the index's coverage has an entry for every key;
* the timer's own files: a ``timerwheel`` or timer log file of another length (the broker refuses
  to open the store), a ``config/timercheck`` that cannot place the timer messages the store holds
  and a timer log shorter than that checkpoint says was on disk.

Only the store's read API and the codec are used; nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .batch_consume_queue import BatchConsumeQueue
from .codec.cq_ext import is_ext_addr
from .codec.cq_unit import CQ_FILLER, CQ_STORE_UNIT_SIZE, CQ_UNIT
from .codec.hashing import index_key_hash
from .codec.properties import KEY_SEPARATOR
from .codec.salvage import iter_intact_records
from .codec.sys_flag import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK, is_dispatched_to_queue
from .codec.timer_format import DEFAULT_SLOTS_TOTAL, wheel_length
from .consume_queue import ConsumeQueue
from .dispatch import build_dispatch_request
from .errors import CorruptDataError
from .index_service import build_key
from .lost_found import lost_found_dir
from .message_store import MessageStore

ProgressFn = Callable[[int, int], None]
_MB = 1024 * 1024


@dataclass(frozen=True)
class VerifyIssue:
    kind: str  # cq-*, bcq-*, log-*, index-*
    where: str  # topic/queue or index file name
    offset: int  # queue offset, or commitlog offset for log/index issues
    detail: str


@dataclass
class VerifyReport:
    store: str
    commit_log_min_offset: int = 0
    commit_log_max_offset: int = 0
    records: int = 0
    queues: int = 0
    cq_units: int = 0
    bcq_units: int = 0
    index_files: int = 0
    index_entries: int = 0
    expired_units: int = 0
    undispatched_records: int = 0
    deleted_topic_records: int = 0  # records of topics deleted after they were written: never dispatched
    # Topics with queues but no config in topics.json (the broker fills it in): not a mismatch, but
    # invisible to every topic command; cleanUnusedTopic removes them.
    unused_topics: list[str] = field(default_factory=list)
    issues: list[VerifyIssue] = field(default_factory=list)
    issues_truncated: int = 0
    follow_on_issues: int = 0
    elapsed_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.issues and not self.issues_truncated

    @property
    def mismatch_count(self) -> int:
        return len(self.issues) + self.issues_truncated + self.follow_on_issues

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        d["mismatchCount"] = self.mismatch_count
        return d


class _Collector:
    """Keeps the first issue of each kind and place; later ones of the same kind and place are counted
    as its follow-ons (one damaged spot used to produce hundreds of lines that buried it)."""

    def __init__(self, report: VerifyReport, limit: int) -> None:
        self.report = report
        self.limit = limit
        self._first: dict[tuple[str, str], int] = {}
        self._more: dict[tuple[str, str], int] = {}

    def add(self, kind: str, where: str, offset: int, detail: str) -> None:
        key = (kind, where)
        if key in self._first:
            self._more[key] = self._more.get(key, 0) + 1
            self.report.follow_on_issues += 1
            return
        if len(self.report.issues) < self.limit:
            self._first[key] = len(self.report.issues)
            self.report.issues.append(VerifyIssue(kind, where, offset, detail))
        else:
            self.report.issues_truncated += 1

    def finish(self) -> None:
        for key, more in self._more.items():
            i = self._first[key]
            issue = self.report.issues[i]
            self.report.issues[i] = VerifyIssue(issue.kind, issue.where, issue.offset,
                                                f"{issue.detail} (first of {more + 1} like it here)")


def _unit_location(cq, queue_offset: int) -> str:
    """`` (file F, byte B)`` of a SimpleCQ unit, for an issue's detail; empty for a BatchCQ one."""
    if not isinstance(cq, ConsumeQueue):
        return ""
    logic = queue_offset * CQ_STORE_UNIT_SIZE
    for mf in cq.file_queue.files:
        if mf.file_from_offset <= logic < mf.file_from_offset + cq.file_size:
            return f" (file {mf.path}, byte {logic - mf.file_from_offset})"
    return ""


def _check_raw_cq_units(store: MessageStore, cq: ConsumeQueue, where: str, cl_min: int, cl_max: int,
                        issues: _Collector) -> None:
    """Every unit in a SimpleCQ's files, not only those the read path serves (from the min offset up to
    the first invalid unit): a damaged unit (negative commitlog offset or size) stops reads there, and
    one below the min offset may have moved the min past units whose records are still kept, whose
    messages no read reaches then. Each is named by file and byte offset."""
    q_min = cq.get_min_offset_in_queue()
    unit = CQ_STORE_UNIT_SIZE
    filler = CQ_UNIT.unpack(CQ_FILLER)
    for mf in list(cq.file_queue.files):
        n = mf.wrote_position // unit
        first_q = mf.file_from_offset // unit
        for i, (phy, size, tags) in enumerate(CQ_UNIT.iter_unpack(mf.mv[:n * unit])):
            q = first_q + i
            if (phy, size, tags) == filler:
                continue
            at = f"unit at queue offset {q} (file {mf.path}, byte {i * unit})"
            if phy < 0 or size <= 0:
                issues.add("cq-damaged-unit", where, q,
                           f"{at} is damaged: commitlog offset {phy}, size {size}; no read passes it")
                continue
            if q >= q_min or phy < cl_min:
                continue  # served (checked unit by unit above), or expired
            # Below the min offset, yet pointing into the commitlog that is kept.
            if phy + size > cl_max:
                issues.add("cq-damaged-unit", where, q,
                           f"{at} is below the min offset {q_min} and points at {phy}+{size}, past the "
                           f"commitlog end {cl_max}")
                continue
            try:
                msg = store.commit_log.read_message(phy, size, read_body=False)
            except CorruptDataError:
                msg = None
            if msg is None or msg.topic != cq.topic or msg.queue_id != cq.queue_id \
                    or build_dispatch_request(msg, store.delay_levels_ms).consume_queue_offset != q:
                issues.add("cq-damaged-unit", where, q,
                           f"{at} is below the min offset {q_min} and points at commitlog offset {phy}, "
                           "which is no record start of this topic and queue")
            else:
                issues.add("cq-unreachable", where, q,
                           f"{at} is below the min offset {q_min}, but its record at commitlog offset {phy} "
                           f"is still kept (commitlog min {cl_min}): its message cannot be read")


def _record_key_hashes(topic: str, uniq_key: str | None, keys: str | None) -> set[int]:
    hashes = set()
    if uniq_key is not None:
        hashes.add(index_key_hash(build_key(topic, uniq_key)))
    if keys:
        for token in keys.split(KEY_SEPARATOR):
            if token:
                hashes.add(index_key_hash(build_key(topic, token)))
    return hashes


def verify_store(store: MessageStore, progress: ProgressFn | None = None, max_issues: int = 1000,
                 check_crc: bool = True, deleted_topics: Mapping[str, int] | None = None) -> VerifyReport:
    """Run every check on an opened store (read-only opening recommended) and return the report.

    ``deleted_topics`` (topic -> commitlog offset at deletion, the broker's deletedTopics.json): records
    below that offset belong to a deleted topic and are counted apart, not as "not yet dispatched"."""
    deleted = deleted_topics or {}
    t0 = time.monotonic()
    cl_min, cl_max = store.get_min_phy_offset(), store.get_max_phy_offset()
    report = VerifyReport(str(store.root), cl_min, cl_max)
    issues = _Collector(report, max_issues)
    rec = store.recovery_report
    if rec is not None and rec.truncated_bytes > 0:
        mf = store.commit_log.file_queue.find_mapped_file_by_offset(rec.process_offset)
        name = mf.path.name if mf is not None else "commitlog"
        issues.add("log-corrupt", name, rec.process_offset,
                   f"valid records end at commitlog offset {rec.process_offset} ({rec.stop_reason}); "
                   f"{rec.truncated_bytes} byte(s) after it cannot be read")
    queues = sorted(list(store.consume_queues.items()))  # a copy: a started store adds queues while we read
    index_files = store.index_service.files if store.index_service is not None else []
    log_steps = max(1, -(-(cl_max - cl_min) // _MB))
    total = len(queues) + log_steps + len(index_files)
    done = 0

    def step(n: int = 1) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(min(done, total), total)

    delay_levels = store.delay_levels_ms
    frontier = store.dispatched_frontier
    # (topic, qid) -> {unit queue offset: (phy, batch_num)} for the log -> queue direction.
    unit_maps: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    unit_ends: dict[tuple[str, int], tuple[int, int]] = {}

    # -- 1. queue units -> commitlog ------------------------------------------------------------------
    for (topic, qid), cq in queues:
        report.queues += 1
        where = f"{topic}/{qid}"
        batch = isinstance(cq, BatchConsumeQueue)
        kind = "bcq" if batch else "cq"
        units: dict[int, tuple[int, int]] = {}
        expected_next: int | None = None
        for u in cq.iter_all_units():
            if batch:
                report.bcq_units += 1
            else:
                report.cq_units += 1
            units[u.queue_offset] = (u.phy_offset, u.batch_num)
            if batch and expected_next is not None and u.queue_offset != expected_next:
                issues.add("bcq-gap", where, u.queue_offset,
                           f"unit base offset {u.queue_offset} but the previous unit ends at {expected_next}")
            expected_next = u.queue_offset + u.batch_num
            if u.phy_offset < cl_min:
                report.expired_units += 1
                continue
            if u.phy_offset + u.size > cl_max:
                issues.add(f"{kind}-beyond-log", where, u.queue_offset,
                           f"unit{_unit_location(cq, u.queue_offset)} points at {u.phy_offset}+{u.size}, past the "
                           f"commitlog end {cl_max}")
                continue
            try:
                msg = store.commit_log.read_message(u.phy_offset, u.size, read_body=False)
            except CorruptDataError as e:
                msg, reason = None, str(e)
            else:
                reason = f"no record at commitlog offset {u.phy_offset} (size {u.size})"
            if msg is None:
                issues.add(f"{kind}-bad-record", where, u.queue_offset,
                           f"unit{_unit_location(cq, u.queue_offset)}: {reason}")
                continue
            problems = []
            if msg.store_size != u.size:
                problems.append(f"size {u.size} but record is {msg.store_size} bytes")
            if msg.topic != topic or msg.queue_id != qid:
                problems.append(f"record belongs to {msg.topic}/{msg.queue_id}")
            req = build_dispatch_request(msg, delay_levels)
            base = req.msg_base_offset if batch else req.consume_queue_offset
            if base != u.queue_offset:
                problems.append(f"record's queue offset is {base}")
            if batch and req.batch_size != u.batch_num:
                problems.append(f"batch of {u.batch_num} but record holds {req.batch_size}")
            # an ext address (consume queue ext not opened: enableConsumeQueueExt off) hides the tags hash
            if req.tags_code != u.tags_code and not is_ext_addr(u.tags_code):
                problems.append(f"tagsCode {u.tags_code} but record gives {req.tags_code}")
            if batch and u.store_time and u.store_time != msg.store_timestamp:
                problems.append(f"store time {u.store_time} but record has {msg.store_timestamp}")
            if problems:
                issues.add(f"{kind}-mismatch", where, u.queue_offset,
                           f"unit{_unit_location(cq, u.queue_offset)} -> commitlog {u.phy_offset}: "
                           + "; ".join(problems))
        if isinstance(cq, ConsumeQueue):
            _check_raw_cq_units(store, cq, where, cl_min, cl_max, issues)
        for problem in cq.damage:
            issues.add(f"{kind}-damaged", where, cq.get_max_offset_in_queue(), problem)
        unit_maps[(topic, qid)] = units
        unit_ends[(topic, qid)] = (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue())
        step()

    # -- 2. commitlog -> queue units (and the expected index keys) ---------------------------------
    # Every record the index should hold: from the commitlog min (older index files are deleted only
    # once the commitlog is) up to what was dispatched. An emptied or missing index file is then
    # missing keys, not "outside the index".
    index_enabled = store.config.message_index_enable
    index_upto = frontier if frontier >= 0 else (index_files[-1].end_phy_offset if index_files else -1)
    # Beside a live writer (a read-only open of a store with ``abort``) the files keep growing while
    # they are read one after another.
    live = store.read_only and rec is not None and rec.abnormal
    if rec is not None and rec.abnormal and index_files:
        # Beside a live writer (or after a crash) the index may trail the queues by what was being
        # dispatched when the store was opened: only what it had reached then is compared.
        index_upto = min(index_upto, index_files[-1].end_phy_offset)  # its last record may be half in
    if live:
        # The queues may have been read after the writer started a commitlog file that the open did
        # not list: records past the commitlog end read here are not in this snapshot.
        index_upto = min(index_upto, cl_max)
    record_hashes: dict[int, set[int]] = {}
    index_optional: set[int] = set()  # records whose keys may be missing from the index
    damaged_queues: set[tuple[str, int]] = set()
    record_offsets: set[int] = set()
    next_step_at = cl_min + _MB
    log_steps_done = 0
    log_stop: list[tuple[int, str]] = []  # where the walk met a record that is not valid, and why
    for msg in store.iter_commit_log(check_crc=check_crc, read_body=check_crc,
                                     on_stop=lambda offset, reason: log_stop.append((offset, reason))):
        report.records += 1
        phy = msg.commit_log_offset
        record_offsets.add(phy)
        while phy >= next_step_at and log_steps_done < log_steps:
            next_step_at += _MB
            log_steps_done += 1
            step()
        req = build_dispatch_request(msg, delay_levels)
        cut = deleted.get(msg.topic)
        if (index_enabled and phy < index_upto
                and (msg.sys_flag & TRANSACTION_TYPE_MASK) != TRANSACTION_ROLLBACK_TYPE):
            hashes = _record_key_hashes(msg.topic, req.uniq_key, req.keys)
            if hashes:
                record_hashes[phy] = hashes
                if cut is not None and phy < cut:
                    # indexed if dispatched before its topic was deleted; one dispatched after (a
                    # recovery re-dispatching it) is filtered out of the index as out of its queue
                    index_optional.add(phy)
        if not is_dispatched_to_queue(msg.sys_flag):
            continue
        if cut is not None and phy < cut:
            report.deleted_topic_records += 1
            continue
        key = (msg.topic, msg.queue_id)
        units = unit_maps.get(key)
        offset = req.msg_base_offset if req.is_inner_batch else req.consume_queue_offset
        if units is None:
            report.undispatched_records += 1
            continue
        q_min, q_max = unit_ends[key]
        if offset >= q_max:
            if phy >= frontier:
                report.undispatched_records += 1
            elif key not in damaged_queues:
                # Dispatch runs in commitlog order: a record before the newest dispatched one whose
                # unit is missing lost it (a zeroed or truncated file), it is not pending.
                damaged_queues.add(key)
                cq_kind = "bcq" if isinstance(store.consume_queues.get(key), BatchConsumeQueue) else "cq"
                issues.add(f"{cq_kind}-damaged", f"{msg.topic}/{msg.queue_id}", offset,
                           f"record at commitlog offset {phy} (queue offset {offset}) has no unit, though records "
                           f"after it were dispatched; the queue's files end at offset {q_max}")
            continue
        if offset < q_min:
            continue
        found = units.get(offset)
        if found is None:
            issues.add("log-missing-unit", f"{msg.topic}/{msg.queue_id}", phy,
                       f"record at queue offset {offset} has no consume queue unit")
        elif found[0] != phy:
            issues.add("log-unit-elsewhere", f"{msg.topic}/{msg.queue_id}", phy,
                       f"unit at queue offset {offset} points at {found[0]}, not at this record")
    step(log_steps - log_steps_done)

    # A damaged record ends the walk (as it ends recovery): what lies past it is not checked against
    # records, and every index entry pointing there is its follow-on, not a mismatch of its own (a
    # flipped body byte was reported as thousands of "points at no record start", never as itself).
    walk_end = log_stop[0][0] if log_stop and not (rec is not None and rec.truncated_bytes > 0
                                                    and rec.process_offset == log_stop[0][0]) else None
    past_walk_end = 0

    # -- 3. index entries <-> commitlog --------------------------------------------------------------
    seen_hashes: dict[int, set[int]] = {}
    if store.index_service is not None:
        for problem in store.index_service.damaged_files:
            issues.add("index-damaged", problem.split(":", 1)[0], 0, problem)
    for f in index_files:
        reachable = f.reachable_entries(follow_newer=live)
        for n, key_hash, phy, time_diff, _prev in f.iter_entries():
            report.index_entries += 1
            if phy < cl_min or phy >= index_upto:  # outside the snapshot this check covers
                continue
            if n in reachable:  # what a key query can find
                seen_hashes.setdefault(phy, set()).add(key_hash)
            else:
                issues.add("index-unreachable", f.file_name, phy,
                           f"entry {n} cannot be reached from its hash slot (damaged slot or chain)")
            if phy not in record_offsets:
                if walk_end is not None and phy >= walk_end:
                    past_walk_end += 1
                    continue
                issues.add("index-bad-offset", f.file_name, phy, f"entry {n} points at no record start")
                continue
            expected = record_hashes.get(phy)
            if expected is None or key_hash not in expected:
                issues.add("index-key-mismatch", f.file_name, phy,
                           f"entry {n} hash {key_hash} matches none of the record's keys")
            if time_diff < 0:
                issues.add("index-bad-time", f.file_name, phy, f"entry {n} has negative time diff {time_diff}")
        report.index_files += 1
        step()
    for phy, expected in record_hashes.items():
        if phy < cl_min or phy in index_optional:
            continue
        missing = expected - seen_hashes.get(phy, set())
        if missing:
            issues.add("index-missing-entry", "index", phy,
                       f"{len(missing)} of the record's {len(expected)} key(s) have no index entry")
    _check_timer_files(store, issues)
    issues.finish()
    if walk_end is not None:
        mf = store.commit_log.file_queue.find_mapped_file_by_offset(walk_end)
        follow = f"; {past_walk_end} index entr{'y' if past_walk_end == 1 else 'ies'} point past it" \
            if past_walk_end else ""
        report.issues.insert(0, VerifyIssue(
            "log-corrupt", mf.path.name if mf is not None else "commitlog", walk_end,
            f"record at commitlog offset {walk_end} is not valid ({log_stop[0][1]}); the {cl_max - walk_end} "
            f"byte(s) from it to the commitlog end are not checked{follow}"))
        report.follow_on_issues += past_walk_end
    report.elapsed_seconds = round(time.monotonic() - t0, 3)
    return report


def _check_timer_files(store: MessageStore, issues: _Collector) -> None:
    """What would stop the broker's timer, or make it deliver timer messages again, said before a start."""
    from .timer.convert import TIMER_TOPIC
    from .timer.timer_checkpoint import TimerCheckpoint

    wheel = store.root / "timerwheel"
    if wheel.is_file():
        length, expected = wheel.stat().st_size, wheel_length()
        if length not in (0, expected):
            issues.add("timer-wheel", wheel.name, 0, f"length {length} != expected {expected}: the broker "
                       "refuses to open the store with it")
    queue = store.find_consume_queue(TIMER_TOPIC, 0)
    queued = store.get_max_offset_in_queue(TIMER_TOPIC, 0) if queue is not None else 0
    timer_log = store.root / "timerlog"
    logged = timer_log.is_dir() and any(p.is_file() and p.stat().st_size > 0 for p in timer_log.iterdir())
    if not (queued or logged):
        return
    log_end = _check_timer_log(store, issues) if logged else 0
    check = store.root / "config" / "timercheck"
    flushed = 0
    try:
        # the broker's own bound of a believable read time: its wheel's span ahead of the clock
        span_ms = DEFAULT_SLOTS_TOTAL * store.config.timer_precision_ms
        checkpoint = TimerCheckpoint(check, read_only=True, max_read_time_ahead_ms=span_ms) \
            if check.is_file() else None
        problem, flushed = ("missing", 0) if checkpoint is None else \
            (checkpoint.problem, checkpoint.last_timer_log_flush_pos)
    except OSError as e:
        problem = f"unreadable ({e.strerror or e})"
    if problem is not None:
        issues.add("timer-checkpoint", f"config/{check.name}", 0,
                   f"{problem} while {TIMER_TOPIC} holds {queued} message(s): the broker reads the timer wheel "
                   "again from 7 days back, so timer messages already delivered may be delivered again")
    elif log_end is not None and flushed > log_end:
        issues.add("timer-log", timer_log.name, log_end,
                   f"the timer log ends at byte {log_end}, before the {flushed} bytes timer checkpoint config/"
                   f"{check.name} says were on disk: a file was cut short or removed (the broker wheels "
                   f"{TIMER_TOPIC} again after the last unit left)")


def _check_timer_log(store: MessageStore, issues: _Collector) -> int | None:
    """The timer log's end, or None (and the issue) when the broker would refuse to open it."""
    from .timer.timer_log import TimerLog, TimerLogError

    directory = store.root / "timerlog"
    try:
        timer_log = TimerLog.of_store(directory, store.config.mapped_file_size_timer_log, read_only=True)
    except TimerLogError as e:
        issues.add("timer-log", directory.name, 0, f"{e}: the broker refuses to open the store with it")
        return None
    try:
        return timer_log.max_offset
    finally:
        timer_log.close(flush=False)


@dataclass(frozen=True)
class LostRecord:
    """An intact record found in ``lost+found/commitlog/`` (what crash truncation set aside)."""

    file: str  # the lost+found file it is in
    commit_log_offset: int  # where it was in the commitlog
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    keys: str | None
    uniq_key: str | None
    store_timestamp: int
    body_size: int


def list_lost_found(store_root: Path) -> list[LostRecord]:
    """Every intact record kept in ``<store>/lost+found/commitlog/``, in file and offset order.

    File names are ``<commitlog file>@<start>.<time>``: the commitlog offset of a record is the file's
    base offset plus ``start`` plus its position in the saved bytes. Reads files only; no store opened.
    """
    base_dir = lost_found_dir(store_root) / "commitlog"
    out: list[LostRecord] = []
    if not base_dir.is_dir():
        return out
    for path in sorted(p for p in base_dir.iterdir() if p.is_file()):
        name, _, rest = path.name.partition("@")
        start = rest.split(".", 1)[0]
        if not (name.isdigit() and start.isdigit()):
            continue
        at = int(name) + int(start)
        for pos, m in iter_intact_records(path.read_bytes()):
            out.append(LostRecord(path.name, at + pos, m.store_size, m.topic, m.queue_id, m.queue_offset,
                                  m.keys, m.uniq_key, m.store_timestamp, len(m.body)))
    return out
