"""Crash truncation destroys nothing silently (issue 11 item 7).

Why: one flipped body byte plus an abort marker made recovery discard 199 of 200 messages and 2 of 3
commitlog files (RocketMQ's semantics, kept), while the warning said 67,132 bytes for >= 190,366 gone.
The discarded tail now goes to ``lost+found/``, the report gives exact bytes and record counts, and
``mqadmin verifyStore --lostFound`` lists the intact records in it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from store_util import (
    BASE_TS,
    FakeClock,
    as_after_reboot,
    crash,
    make_msg,
    set_checkpoint,
    small_config,
    small_config_file,
)
from typer.testing import CliRunner

from broker_core.store.message_store import MessageStore
from mqadmin.app import app

FILE = 32768


def test_flipped_body_byte_tail_goes_to_lost_found(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "store"
    cfg = small_config(mapped_file_size_commit_log=FILE)
    store = MessageStore(root, cfg, clock=FakeClock(step=1)).open()
    acks = [store.put_message(make_msg("Lost", i % 2, b"payload-%03d-" % i * 20, key=f"lk{i}", uniq=f"LU{i}"))
            for i in range(200)]
    store.wait_for_dispatch()
    store.flush()
    crash(store)
    assert len(list((root / "commitlog").iterdir())) == 3
    cut = acks[1].wrote_offset
    path = root / "commitlog" / f"{cut - cut % FILE:020d}"
    with open(path, "r+b") as f:  # one body byte of the second record
        f.seek(cut % FILE + acks[1].wrote_bytes - 60)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    set_checkpoint(root, physic_ts=BASE_TS, logics_ts=BASE_TS)  # recovery checks from the first file
    as_after_reboot(root)  # a flipped byte on disk: the power went, not just the process
    data_after = sum(len((root / "commitlog" / p.name).read_bytes().rstrip(b"\0")) for p in
                     sorted((root / "commitlog").iterdir())) - cut
    caplog.set_level(logging.WARNING, "rmqops")
    store = MessageStore(root, cfg, clock=FakeClock(BASE_TS + 10 ** 6)).open()
    try:
        rep = store.recovery_report
        assert rep.process_offset == cut
        assert rep.truncated_bytes == data_after  # exact: every non-zero byte after the cut
        assert (rep.discarded_records, rep.intact_records) == (199, 198)
        assert store.get_max_phy_offset() == cut
        line = next(r.getMessage() for r in caplog.records if "discarded" in r.getMessage())
        assert f"{data_after} byte(s)" in line and "199 record start(s), 198 of them intact" in line
        assert "lost+found" in line
    finally:
        store.shutdown()
    res = CliRunner().invoke(app, ["verifyStore", "--lostFound", "--store", str(root), "--config",
                                   str(small_config_file(tmp_path / "broker.conf",
                                                         mappedFileSizeCommitLog=FILE)), "--output", "json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert [r["uniq_key"] for r in listed] == [f"LU{i}" for i in range(2, 200)]
    assert [r["commit_log_offset"] for r in listed] == [a.wrote_offset for a in acks[2:]]


def test_clean_crash_tail_is_not_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    for _i in range(30):
        store.put_message(make_msg("Calm", 0, b"x" * 100))
    crash(store)
    caplog.set_level(logging.WARNING, "rmqops")
    store = MessageStore(tmp_path, small_config()).open()
    try:
        assert store.recovery_report.truncated_bytes == 0
        assert not (tmp_path / "lost+found").exists()
    finally:
        store.shutdown()
    assert not [r for r in caplog.records if "discarded" in r.getMessage()]
