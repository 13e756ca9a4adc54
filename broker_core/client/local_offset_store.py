"""Broadcasting-mode consumer offsets in a local file per consumer (Java's LocalFileOffsetStore).

Why a file per consumer: in BROADCASTING mode every consumer of a group reads every queue, so the
broker's one offset per (group, queue) cannot hold them; each consumer keeps its own progress at
``<dir>/<clientId>/<group>/offsets.json`` (dir defaults to ``~/.rocketmq_offsets``, as Java's
``rocketmq.client.localOffsetStoreDir``) and a restarted consumer with the same client id resumes
from it (the id is ``MQClientInstance.stable_client_id``: ip@DEFAULT as in Java, unless the instance
was given a name). The file has Java's content — ``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:N}}``
(fastjson with MessageQueue keys) — and is replaced as MixAll.string2File does: the new content is
written to ``offsets.json.tmp``, the old file is moved aside to ``offsets.json.bak``, then the
temporary file takes its place; a reader falls back to the ``.bak`` when the file is missing or torn.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from broker_core.client.offset_store import OffsetTable
from broker_core.remoting.bodies import MessageQueue

DEFAULT_STORE_DIR = Path.home() / ".rocketmq_offsets"
_WRAPPER = re.compile(r'\A\s*\{\s*"offsetTable"\s*:\s*\{(.*)\}\s*\}\s*\Z', re.DOTALL)
_ENTRY = re.compile(r'\{\s*"brokerName"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"queueId"\s*:\s*(-?\d+)\s*,'
                    r'\s*"topic"\s*:\s*"((?:[^"\\]|\\.)*)"\s*\}\s*:\s*(-?\d+)')


class OffsetFileError(ValueError):
    """An offsets file that is not what the store writes (names the file and the position)."""


def _unquote(s: str) -> str:
    return json.loads(f'"{s}"')


def parse_offsets(text: str, path: Path) -> dict[MessageQueue, int]:
    m = _WRAPPER.match(text)
    if m is None:
        raise OffsetFileError(f"{path}: not an offsetTable (expected {{\"offsetTable\":{{...}}}})")
    body, base = m.group(1), m.start(1)
    table: dict[MessageQueue, int] = {}
    pos = 0
    for e in _ENTRY.finditer(body):
        gap = body[pos:e.start()]
        if gap.strip(" \t\r\n,"):
            raise OffsetFileError(f"{path}: offset {base + pos}: unexpected {gap.strip()[:20]!r} in offsetTable")
        mq = MessageQueue(topic=_unquote(e.group(3)), broker_name=_unquote(e.group(1)), queue_id=int(e.group(2)))
        table[mq] = int(e.group(4))
        pos = e.end()
    if body[pos:].strip(" \t\r\n,"):
        raise OffsetFileError(f"{path}: offset {base + pos}: unexpected {body[pos:].strip()[:20]!r} in offsetTable")
    return table


def format_offsets(table: dict[MessageQueue, int]) -> str:
    entries = ",".join(
        f'{{"brokerName":{json.dumps(mq.broker_name)},"queueId":{mq.queue_id},"topic":{json.dumps(mq.topic)}}}:{off}'
        for mq, off in sorted(table.items()))
    return '{"offsetTable":{' + entries + "}}"


class LocalFileOffsetStore(OffsetTable):
    def __init__(self, client_id: str, group: str, store_dir: str | Path | None = None) -> None:
        super().__init__()
        self.path = Path(store_dir or DEFAULT_STORE_DIR) / client_id / group / "offsets.json"
        self._loaded = False

    def load(self) -> None:
        """Read the file, else its .bak (a torn write); OffsetFileError when neither parses. Nothing is deleted."""
        self._loaded = True
        first_error: OffsetFileError | None = None
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                text = candidate.read_bytes().decode("utf-8", errors="replace")
            except FileNotFoundError:
                continue
            if not text.strip():
                continue
            try:
                self._table.update(parse_offsets(text, candidate))
                return
            except OffsetFileError as e:
                first_error = first_error or e
        if first_error is not None:
            raise first_error

    async def read_store(self, mq: MessageQueue) -> int | None:
        if not self._loaded:
            self.load()
        return self._table.get(mq)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all()

    async def persist_all(self, mqs: set[MessageQueue] | None = None) -> None:
        """The whole table (every queue this consumer ever read) goes to the file, as Java's persistAll."""
        if not self._table:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write(format_offsets(self._table))
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)

    def remove(self, mq: MessageQueue) -> None:
        """Kept: the file is this consumer's alone, and a queue dropped now is read again later."""
