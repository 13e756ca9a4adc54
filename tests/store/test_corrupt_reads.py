"""Corrupt bytes give one clear error naming file and offset; nothing answers with the wrong record
(issue 11 item 6).

Why: a record with a bad size field made queryMsgByKey/queryMsgById print a raw ``unpack_from
requires a buffer``, ``queryMsgByOffset -o 0`` answered with the message at offset 1, printMsgByQueue
silently printed 24 of 25, a garbage index file failed the writable open with struct.error, and an
emptied index file or flipped hash slots passed verifyStore while key queries found nothing.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config, small_config_file
from typer.testing import CliRunner

from broker_core.store.errors import CorruptDataError
from broker_core.store.message_store import MessageStore
from broker_core.store.verify import verify_store
from mqadmin.app import app

N = 25


def build(tmp_path: Path) -> tuple[Path, Path, list]:
    root = tmp_path / "store"
    store = MessageStore(root, small_config(), clock=FakeClock(step=1)).open()
    acks = [store.put_message(make_msg("Cor", 0, b"body-%02d" % i * 10, key=f"key{i}", uniq=f"UQ{i:04d}"))
            for i in range(N)]
    store.shutdown()
    return root, small_config_file(tmp_path / "broker.conf"), acks


def poke(root: Path, phy: int, pos: int, data: bytes) -> Path:
    path = root / "commitlog" / f"{phy - phy % 4096:020d}"
    with open(path, "r+b") as f:
        f.seek(phy % 4096 + pos)
        f.write(data)
    return path


def cli(root: Path, conf: Path, *args: str):  # noqa: ANN201 - click Result
    return CliRunner().invoke(app, [*args, "--store", str(root), "--config", str(conf)])


def one_clear_line(res, path: Path, offset: int) -> None:  # noqa: ANN001
    assert res.exit_code == 1, res.output
    err = res.stderr.strip()
    assert "\n" not in err and "Traceback" not in err and "unpack" not in err, err
    assert str(path) in err and f"offset {offset}" in err, err


def test_bad_size_field_is_named_by_every_reader(tmp_path: Path) -> None:
    root, conf, acks = build(tmp_path)
    victim = acks[0]
    path = poke(root, victim.wrote_offset, 0, struct.pack(">i", 9))  # TOTALSIZE 9: too small for a record
    at = victim.wrote_offset % 4096
    one_clear_line(cli(root, conf, "queryMsgByKey", "-t", "Cor", "-k", "key0"), path, at)
    one_clear_line(cli(root, conf, "queryMsgById", "-t", "Cor", "-i", victim.msg_id), path, at)
    one_clear_line(cli(root, conf, "queryMsgByUniqueKey", "-t", "Cor", "-i", "UQ0000"), path, at)
    one_clear_line(cli(root, conf, "queryMsgByOffset", "-t", "Cor", "-b", "broker-a", "-i", "0", "-o", "0"),
                   path, at)
    res = cli(root, conf, "printMsgByQueue", "-t", "Cor", "-a", "broker-a", "-i", "0", "-p", "true")
    one_clear_line(res, path, at)
    # the library raises the one error type, with the fields
    ro = MessageStore(root, small_config(), read_only=True).open()
    try:
        with pytest.raises(CorruptDataError) as e:
            ro.get_messages("Cor", 0, 0, 1)
        assert (e.value.file, e.value.offset) == (str(path), at)
        # an intact record is still served, and never in place of the damaged one
        r = ro.get_messages("Cor", 0, 1, 1)
        assert r.messages[0].queue_offset == 1 and r.messages[0].keys == "key1"
    finally:
        ro.shutdown()


def test_flipped_body_crc_region_is_not_served_as_another_record(tmp_path: Path) -> None:
    root, conf, acks = build(tmp_path)
    poke(root, acks[3].wrote_offset, 4, b"\0\0\0\0")  # magic code gone
    res = cli(root, conf, "queryMsgByOffset", "-t", "Cor", "-b", "broker-a", "-i", "0", "-o", "3")
    assert res.exit_code == 1 and "key4" not in res.output
    assert "corrupt data" in res.stderr and f"offset {acks[3].wrote_offset % 4096}" in res.stderr


def test_garbage_index_file_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    root, conf, _ = build(tmp_path)
    files = sorted((root / "index").iterdir())
    victim = files[0]
    victim.write_bytes(bytes((i * 131 + 7) % 251 for i in range(victim.stat().st_size)))
    ro = MessageStore(root, small_config(), read_only=True).open()
    try:
        rep = verify_store(ro)
        assert "index-damaged" in {i.kind for i in rep.issues}, rep.issues
    finally:
        ro.shutdown()
    store = MessageStore(root, small_config(), clock=FakeClock(step=1)).open()  # used to raise struct.error
    try:
        for i in range(N):
            assert [m.keys for m in store.query_message("Cor", f"key{i}")] == [f"key{i}"]
    finally:
        store.shutdown()
    assert (root / "lost+found" / "index" / victim.name).exists()
    ro = MessageStore(root, small_config(), read_only=True).open()
    try:
        assert verify_store(ro).ok
    finally:
        ro.shutdown()


@pytest.mark.parametrize("damage", ["emptied", "zeroed", "slots"])
def test_verify_sees_what_key_queries_cannot_find(tmp_path: Path, damage: str) -> None:
    root, conf, _ = build(tmp_path)
    files = sorted((root / "index").iterdir())
    victim = files[-1]
    size = victim.stat().st_size
    if damage == "emptied":
        for f in files:
            f.write_bytes(b"")
    elif damage == "zeroed":
        for f in files:
            f.write_bytes(bytes(size))
    else:  # every hash slot of one file cleared: the entries are there, no query reaches them
        raw = bytearray(victim.read_bytes())
        raw[40:40 + 64 * 4] = bytes(64 * 4)
        victim.write_bytes(bytes(raw))
    res = cli(root, conf, "verifyStore", "--output", "json")
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert not report["ok"]
    kinds = {i["kind"] for i in report["issues"]}
    assert kinds & {"index-missing-entry", "index-unreachable", "index-damaged"}, kinds
    # the first bad record is named once; follow-ons are counted, not listed
    assert len(report["issues"]) <= 4, report["issues"]


def test_verify_names_first_bad_record_once(tmp_path: Path) -> None:
    root, conf, acks = build(tmp_path)
    poke(root, acks[10].wrote_offset, 40, b"\xff" * 8)  # born timestamp: CRC still fine, record valid
    poke(root, acks[12].wrote_offset, 0, struct.pack(">i", 9))
    res = cli(root, conf, "verifyStore", "--output", "json")
    report = json.loads(res.stdout)
    assert res.exit_code == 1 and not report["ok"]
    bad = [i for i in report["issues"] if i["kind"] == "cq-bad-record"]
    assert len(bad) == 1 and bad[0]["offset"] == 12 and "TOTALSIZE" in bad[0]["detail"]
