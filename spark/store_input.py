"""What a rebuild reads besides record bytes: the store config, the commitlog file list, queue types.

Kept on the driver: executors receive only plain tuples (paths, sizes, offsets), so nothing here has
to be picklable beyond built-in types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker_core.store.store_config import StoreConfig, parse_delay_levels
from broker_core.store.topic_config import BATCH_CQ, SIMPLE_CQ, TopicConfigTable


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    """One commitlog file: its base offset comes from its 20-digit name (spec §4.1)."""

    path: str
    base: int
    length: int


@dataclass
class StoreInput:
    root: Path
    config: StoreConfig
    files: list[CommitLogFile]
    # topic -> "BatchCQ"/"SimpleCQ" from config/topics.json; None when the file is absent.
    topic_queue_types: dict[str, str] | None
    delay_levels_ms: list[int]
    warnings: list[str] = field(default_factory=list)

    @property
    def commitlog_bytes(self) -> int:
        return sum(f.length for f in self.files)

    def queue_type(self, topic: str, batch_topics_seen: set[str]) -> str:
        """topics.json decides; without it a topic holding inner-batch records is BatchCQ."""
        if self.topic_queue_types is not None and topic in self.topic_queue_types:
            return self.topic_queue_types[topic]
        return BATCH_CQ if topic in batch_topics_seen else SIMPLE_CQ


def list_commitlog_files(commitlog_dir: Path, file_size: int, warnings: list[str]) -> list[CommitLogFile]:
    """Data files in name order; an empty trailing file (pre-created by the broker) is skipped."""
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
        if out and base != out[-1].base + file_size:
            warnings.append(f"commitlog file {p.name} does not follow {Path(out[-1].path).name} contiguously")
        out.append(CommitLogFile(str(p), base, length))
    return out


def load_store_input(store_dir: str | Path, config_file: str | Path | None = None) -> StoreInput:
    root = Path(store_dir).resolve()
    config = StoreConfig.load(config_file, root=root)
    warnings: list[str] = []
    files = list_commitlog_files(config.commit_log_dir, config.mapped_file_size_commit_log, warnings)
    topics_path = root / "config" / "topics.json"
    queue_types: dict[str, str] | None = None
    if topics_path.exists() or topics_path.with_name("topics.json.bak").exists():
        table = TopicConfigTable(root / "config")
        table.load()
        queue_types = {name: tc.queue_type for name, tc in table.topics.items()}
    return StoreInput(root, config, files, queue_types, parse_delay_levels(config.message_delay_level), warnings)
