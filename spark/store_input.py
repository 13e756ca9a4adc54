"""What a rebuild reads besides record bytes: the store config, the commitlog file list, queue types.

Kept on the driver: executors receive only plain tuples (paths, sizes, offsets), so nothing here has
to be picklable beyond built-in types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker_core.store.codec.index_format import index_file_size, is_index_file_name
from broker_core.store.deleted_topics import read_deleted_topics
from broker_core.store.mapped_file import MappedFileQueue, first_data_file_size
from broker_core.store.message_store import infer_file_sizes
from broker_core.store.store_config import StoreConfig, parse_delay_levels
from broker_core.store.topic_config import BATCH_CQ, SIMPLE_CQ, TopicConfigTable


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    """One commitlog file: its base offset comes from its 20-digit name (spec §4.1)."""

    path: str
    base: int
    length: int


@dataclass(frozen=True, slots=True)
class CommitLogGap:
    """Offsets no commitlog file holds: a file between ``before`` and ``after`` is missing.

    Why it matters: every record after a gap keeps its own queue offset, so the records in the
    missing range are lost from their queues; a rebuild that went on would hide that (and a writer
    that placed units one after the other would shift every later unit of those queues).
    """

    before: str  # name of the file before the gap
    end: int  # commitlog offset where its bytes end
    after: str  # name of the file after the gap
    start: int  # its base offset (where the data goes on)
    after_index: int  # index of ``after`` in the file list

    def describe(self) -> str:
        return (f"commitlog file {self.after} (offset {self.start}) does not follow {self.before}, which ends at "
                f"offset {self.end}: no file holds offsets {self.end}..{self.start - 1} (a missing file?)")


@dataclass
class StoreInput:
    root: Path
    config: StoreConfig
    files: list[CommitLogFile]
    # topic -> "BatchCQ"/"SimpleCQ" from config/topics.json; None when the file is absent.
    topic_queue_types: dict[str, str] | None
    delay_levels_ms: list[int]
    warnings: list[str] = field(default_factory=list)
    gaps: list[CommitLogGap] = field(default_factory=list)
    # topic -> commitlog offset at its deletion (config/deletedTopics.json): older records of it stay out
    deleted_topics: dict[str, int] = field(default_factory=dict)
    # Why the broker would refuse to open this commitlog (a file cut short or extended), else None.
    file_size_problem: str | None = None
    # Why the broker would refuse the index files for the configured geometry (verifyStore's words), else None.
    index_size_problem: str | None = None
    # The commitlog's min offset as the store takes it (MessageStore.get_min_phy_offset): queue units and
    # index entries below it are of records retention deleted (expired, as verifyStore counts them).
    min_phy_offset: int = 0

    @property
    def commitlog_bytes(self) -> int:
        return sum(f.length for f in self.files)

    def queue_type(self, topic: str, batch_topics_seen: set[str]) -> str:
        """topics.json decides; without it a topic holding inner-batch records is BatchCQ."""
        if self.topic_queue_types is not None and topic in self.topic_queue_types:
            return self.topic_queue_types[topic]
        return BATCH_CQ if topic in batch_topics_seen else SIMPLE_CQ


def list_commitlog_files(commitlog_dir: Path, file_size: int, warnings: list[str],
                         gaps: list[CommitLogGap] | None = None) -> list[CommitLogFile]:
    """Data files in name order; an empty trailing file (pre-created by the broker) is skipped.

    A file whose base offset lies past the end of the one before it (by that file's own length, so
    a wrong ``mappedFileSizeCommitLog`` does not matter) follows a gap: it goes to ``gaps`` when
    given, else a warning names it. Files that overlap are only warned about.
    """
    if not commitlog_dir.is_dir():
        raise FileNotFoundError(f"no commitlog directory at {commitlog_dir}")
    names = sorted(p for p in commitlog_dir.iterdir() if p.is_file() and len(p.name) == 20 and p.name.isdigit())
    out: list[CommitLogFile] = []
    for i, p in enumerate(names):
        length = p.stat().st_size
        if length == 0 and i == len(names) - 1:
            continue
        if length != file_size:
            warnings.append(f"commitlog file {p.name} is {length} bytes, mappedFileSizeCommitLog is {file_size}")
        base = int(p.name)
        if out:
            prev = out[-1]
            prev_end = prev.base + prev.length
            if base > prev_end:
                gap = CommitLogGap(Path(prev.path).name, prev_end, p.name, base, len(out))
                if gaps is None:
                    warnings.append(gap.describe())
                else:
                    gaps.append(gap)
            elif base < prev_end:
                warnings.append(f"commitlog file {p.name} (offset {base}) overlaps {Path(prev.path).name}, "
                                f"which ends at offset {prev_end}")
        out.append(CommitLogFile(str(p), base, length))
    return out


def open_commitlog(commitlog_dir: Path, configured_size: int) -> tuple[str | None, int]:
    """(Why the broker would refuse to open the commitlog for its files' lengths, in its own words, or None;
    the commitlog's min offset as the store takes it).

    Why the broker's own check (MappedFileQueue.load, as the store and ``mqadmin verifyStore`` open it):
    the files of a log are all one size, the first file's length winning over the configuration. A last
    file cut short (even at a record boundary) is not a torn tail that recovery ends at: the store does
    not open at all, so a rebuild that went on (and clamped consumer offsets to what was left) would
    hide that.

    Why the min offset from the same queue: it is ``MessageStore.get_min_phy_offset`` (the first file's
    base once retention deleted the older ones), the line below which verifyStore counts a queue unit or
    index entry as expired. ``--verify`` draws the same line, or it reports what retention left (units and
    entries of deleted records in the CQ/index files that still hold newer ones) as mismatches.
    """
    queue = MappedFileQueue(commitlog_dir, first_data_file_size(commitlog_dir) or configured_size, read_only=True)
    try:
        queue.load()
    except ValueError as e:
        return str(e), 0
    else:
        return None, queue.min_offset()
    finally:
        queue.close()


def index_size_problem(index_dir: Path, hash_slot_num: int, index_num: int) -> str | None:
    """The store's refusal of index files of another geometry (IndexService/IndexFile), in verifyStore's words.

    Index files carry no geometry the store trusts: their size must match maxHashSlotNum/maxIndexNum. Files
    of another size beside files of the configured one are cut short (damage a rebuild repairs), not
    another geometry; only when no file has the configured size is the config wrong.
    """
    if not index_dir.is_dir():
        return None
    expected = index_file_size(hash_slot_num, index_num)
    sizes = [(p, p.stat().st_size) for p in sorted(index_dir.iterdir()) if is_index_file_name(p.name) and p.is_file()]
    sizes = [(p, n) for p, n in sizes if n]
    if not sizes or any(n == expected for _p, n in sizes):
        return None
    path, size = sizes[0]
    return (f"index file {path} is {size} bytes, expected {expected} (maxHashSlotNum={hash_slot_num}, "
            f"maxIndexNum={index_num}); give --config with the store's maxHashSlotNum/maxIndexNum")


def load_store_input(store_dir: str | Path, config_file: str | Path | None = None) -> StoreInput:
    root = Path(store_dir).resolve()
    config = StoreConfig.load(config_file, root=root)
    infer_file_sizes(config, root)
    warnings: list[str] = []
    gaps: list[CommitLogGap] = []
    files = list_commitlog_files(config.commit_log_dir, config.mapped_file_size_commit_log, warnings, gaps)
    topics_path = root / "config" / "topics.json"
    queue_types: dict[str, str] | None = None
    if topics_path.exists() or topics_path.with_name("topics.json.bak").exists():
        table = TopicConfigTable(root / "config")
        table.load()
        queue_types = {name: tc.queue_type for name, tc in table.topics.items()}
    size_problem, min_phy_offset = open_commitlog(config.commit_log_dir, config.mapped_file_size_commit_log)
    return StoreInput(root, config, files, queue_types, parse_delay_levels(config.message_delay_level), warnings,
                      gaps, read_deleted_topics(root / "config"), size_problem,
                      index_size_problem(root / "index", config.max_hash_slot_num, config.max_index_num),
                      min_phy_offset=min_phy_offset)
