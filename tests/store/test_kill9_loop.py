"""kill -9 loop: every acknowledged message survives, findable by queue, by key and by unique key.

Why: issue 11's promise is that nothing acknowledged is ever lost or misaddressed. A separate writer
process (SYNC and ASYNC flush, alternating) puts single sends and exploded batches to a SimpleCQ
topic and inner batches to a BatchCQ topic and is killed with SIGKILL at a random moment, >= 20
times on one store. Each acknowledged message is then looked up by queue offset (read-only and after
writable recovery), by key and by unique key. Bounded: the cycles are short (well under a minute).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import kill_loop
from kill_writer import BATCH, SIMPLE, WRITE_BUFFER, config
from store_util import as_after_reboot

from broker_core.store.message_store import MessageStore

HERE = Path(__file__).resolve().parent
CYCLES = 30


@dataclass(frozen=True)
class Ack:
    topic: str
    qid: int
    offset: int
    count: int
    keys: tuple[str, ...]
    uniqs: tuple[str, ...]


def parse(line: str) -> Ack | None:
    parts = line.split()
    if len(parts) != 7 or parts[0] != "ack":
        return None
    return Ack(parts[1], int(parts[2]), int(parts[3]), int(parts[4]), tuple(parts[5].split(",")),
               tuple(parts[6].split(",")))


def run_and_kill(root: Path, flush: str, seed: int, acks_before_kill: int, kill_after: float = 20.0) -> list[Ack]:
    """Kill the writer after ``acks_before_kill`` acks or ``kill_after`` seconds (then maybe mid-recovery)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(HERE / "kill_writer.py"), str(root), flush, str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    acks: list[Ack] = []
    try:
        deadline = time.monotonic() + kill_after
        os.set_blocking(proc.stdout.fileno(), False)
        while len(acks) < acks_before_kill and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                if proc.poll() is not None:
                    break
                time.sleep(0.002)
                continue
            assert not line.startswith("fail"), line
            ack = parse(line)
            if ack is not None:
                acks.append(ack)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        os.set_blocking(proc.stdout.fileno(), True)
        rest, err = proc.communicate()
        acks += [a for a in map(parse, rest.splitlines()) if a is not None]  # acked before the kill
    assert proc.returncode == -signal.SIGKILL, err[-2000:]
    return acks


def expected(acks: list[Ack]) -> dict[tuple[str, int, int], tuple[str, str]]:
    """(topic, qid, queue offset) -> (key, uniq key) of every acknowledged message."""
    out: dict[tuple[str, int, int], tuple[str, str]] = {}
    for a in acks:
        for j in range(a.count):
            if a.topic == BATCH:
                out[(a.topic, a.qid, a.offset + j)] = (a.keys[0], a.uniqs[0])
            else:
                out[(a.topic, a.qid, a.offset + j)] = (a.keys[j], a.uniqs[j])
    return out


def queue_contents(store: MessageStore, topic: str, qid: int) -> dict[int, tuple[str | None, str | None]]:
    """Queue offset -> (keys, unique key) of a SimpleCQ message, (body, None) of an inner-batch item
    (items carry their own, empty, properties: they are known by body)."""
    return {m.queue_offset: (m.keys, m.uniq_key) if topic == SIMPLE else (m.body.decode(), None)
            for _, m in kill_loop.topic_messages(store, topic, [qid])}


def stored_as(ack: Ack, j: int) -> tuple[str, str | None]:
    """What ``queue_contents`` holds for the ``j``-th message of ``ack``."""
    if ack.topic == SIMPLE:
        return ack.keys[j], ack.uniqs[j]
    return f"inner-{ack.keys[0][1:]}-{j}", None


def check_store(store: MessageStore, acks: list[Ack], by_key: bool) -> None:
    want = expected(acks)
    # (a later run's ack of the same queue offset replaces an earlier one, as in ``expected``)
    stored = {(a.topic, a.qid, a.offset + j): stored_as(a, j) for a in acks for j in range(a.count)}
    for topic in (SIMPLE, BATCH):
        for qid in (0, 1):
            got = queue_contents(store, topic, qid)
            for (t, q, o), expect in stored.items():
                if (t, q) == (topic, qid):
                    assert got.get(o) == expect, f"{t}/{q} offset {o}: {got.get(o)} != {expect}"
            offsets = sorted(got)
            assert offsets == list(range(len(offsets))), f"{topic}/{qid}: offsets not contiguous"
    if by_key:
        seen: set[str] = set()
        for (topic, _q, _o), (key, uniq) in want.items():
            if key in seen:
                continue
            seen.add(key)
            assert [m.keys for m in store.query_message(topic, key)] == [key], f"key {key} not found once"
            assert [m.uniq_key for m in store.query_message(topic, uniq)] == [uniq], f"uniq {uniq} not found once"


def loop_seed() -> int:
    """The run's seed, printed first so that a failure's captured output names it; RMQ_KILL_LOOP_SEED
    replays one (the kill moments still vary)."""
    seed = int(os.environ.get("RMQ_KILL_LOOP_SEED") or random.randrange(1 << 30))
    print(f"kill -9 loop seed {seed}")
    return seed


def test_kill9_loop_keeps_every_acked_message(tmp_path: Path) -> None:
    seed = loop_seed()
    rnd = random.Random(seed)
    root = tmp_path / "store"
    acks: list[Ack] = []
    t0 = time.monotonic()
    for cycle in range(CYCLES):
        flush = "SYNC" if cycle % 2 == 0 else "ASYNC"
        if cycle % 3 == 2:  # by time: sometimes during the writer's own recovery
            acks += run_and_kill(root, flush, seed * 100 + cycle, 10 ** 6, rnd.uniform(0.05, 0.5))
        else:
            acks += run_and_kill(root, flush, seed * 100 + cycle, rnd.randrange(5, 80))
        if cycle % 4 == 3 and (root / "abort").exists():
            # as if the machine had rebooted too: recovery then re-checks from the checkpoint, as
            # Java does, instead of from where the queues confirm; both must keep every ack
            as_after_reboot(root)
        if cycle % 6 == 5:  # read-only readers see exactly the acked messages on the crashed store
            ro = MessageStore(root, config(flush), read_only=True).open()
            try:
                check_store(ro, acks, by_key=True)
            finally:
                ro.shutdown()
    want = expected(acks)
    store = MessageStore(root, config("SYNC")).open()
    try:
        assert store.recovery_report.abnormal
        check_store(store, acks, by_key=True)
    finally:
        store.shutdown()
    elapsed = time.monotonic() - t0
    print(f"kill -9 loop: {CYCLES} cycles, {len(acks)} acked puts, {len(want)} messages checked by queue, "
          f"key and unique key in {elapsed:.1f}s (seed {seed})")
    assert elapsed < 180, f"loop took {elapsed:.1f}s (a hang guard, not a benchmark)"


WRITE_BUFFER_CYCLES = 12


def surviving_prefix(store: MessageStore, acks: list[Ack]) -> int:
    """How many of ``acks`` (one writer run, in put order) are in ``store``, asserting that they are
    its first ones: the commitlog is appended in put order and recovery keeps a prefix of it, so a
    lost acknowledged put followed by a kept one would be a hole (misaddressed or lost data)."""
    contents = {(t, q): queue_contents(store, t, q) for t in (SIMPLE, BATCH) for q in (0, 1)}
    kept = [all(contents[(a.topic, a.qid)].get(a.offset + j) == stored_as(a, j) for j in range(a.count))
            for a in acks]
    n = kept.count(True)
    if kept != [True] * n + [False] * (len(acks) - n):
        hole = kept.index(False)
        a = acks[hole]
        found = {a.offset + j: contents[(a.topic, a.qid)].get(a.offset + j) for j in range(a.count)}
        raise AssertionError(f"a hole among the acknowledged puts: ack #{hole} of {len(acks)} ({a}) is not kept "
                             f"(its queue holds {found}; queue end {max(contents[(a.topic, a.qid)], default=-1)}) "
                             f"but #{kept.index(True, hole)} is")
    return n


def test_kill9_loop_with_the_write_buffer_loses_only_uncommitted_inner_batches(tmp_path: Path) -> None:
    """kill -9 of a writer whose store has the write buffer (transientStorePoolEnable), as RocketMQ's:
    an inner batch is acknowledged once buffered, so a kill may lose the last ones, never more.

    What must hold after each kill: the acknowledged puts still there are a prefix of the run's
    (no hole); every lost one is a buffered inner batch (a plain put commits the buffer before its
    own record, so once it is acknowledged everything before it is in the file); the queues stay
    contiguous, every kept message is found by key and unique key, and no lost key is found (no
    index entry points at bytes a later run overwrote). Read-only readers see it first, then the
    next writer's recovery; at the end a writable reopen."""
    seed = loop_seed()
    rnd = random.Random(seed)
    root = tmp_path / "store"
    kept_acks: list[Ack] = []
    lost: list[Ack] = []
    t0 = time.monotonic()
    for cycle in range(WRITE_BUFFER_CYCLES):
        if cycle % 3 == 2:  # by time: sometimes during the writer's own recovery
            acks = run_and_kill(root, WRITE_BUFFER, seed * 100 + cycle, 10 ** 6, rnd.uniform(0.05, 0.5))
        else:
            acks = run_and_kill(root, WRITE_BUFFER, seed * 100 + cycle, rnd.randrange(5, 120))
        ro = MessageStore(root, config(WRITE_BUFFER), read_only=True).open()
        try:
            n = surviving_prefix(ro, acks)
            for a in acks[:n]:  # by key as well: most are not in the index files yet
                assert [m.keys for m in ro.query_message(a.topic, a.keys[0])] == [a.keys[0]], a
        finally:
            ro.shutdown()
        assert all(a.topic == BATCH for a in acks[n:]), f"an acknowledged plain put was lost: {acks[n:]}"
        kept_acks += acks[:n]
        lost += acks[n:]
    store = MessageStore(root, config(WRITE_BUFFER)).open()
    try:
        assert store.recovery_report.abnormal
        check_store(store, kept_acks, by_key=True)
        for a in lost:
            assert store.query_message(BATCH, a.keys[0]) == [], f"lost key {a.keys[0]} still indexed"
            assert store.query_message(BATCH, a.uniqs[0]) == [], f"lost uniq key {a.uniqs[0]} still indexed"
    finally:
        store.shutdown()
    elapsed = time.monotonic() - t0
    print(f"kill -9 loop, write buffer: {WRITE_BUFFER_CYCLES} cycles, {len(kept_acks)} acknowledged puts kept, "
          f"{len(lost)} buffered ones lost, in {elapsed:.1f}s (seed {seed})")
    assert elapsed < 120, f"loop took {elapsed:.1f}s (a hang guard, not a benchmark)"
