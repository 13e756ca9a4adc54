"""A put that fails changes nothing (issue 11 item 2).

Why: a send that failed inside the append used to keep the queue offset it was given, so later acks
named offsets one off from where the records were stored and, after a restart, two records shared an
offset. Every failure must leave queue offsets, files and counters exactly as before, with one line
saying why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config

from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.message_store import GetMessageStatus, MessageStore


def _state(store: MessageStore) -> tuple:
    return (dict(store.commit_log.queue_offsets.table), store.get_max_phy_offset(),
            len(store.commit_log.appended_records))


BAD_FIELDS = [
    ("born_timestamp", 2 ** 63),
    ("born_timestamp", -(2 ** 63) - 1),
    ("queue_id", 2 ** 31),
    ("flag", 2 ** 40),
    ("reconsume_times", -(2 ** 31) - 5),
    ("prepared_transaction_offset", 2 ** 64),
    ("born_host", ("10.0.0.9", 70000)),
    ("born_host", ("not-an-ip", 1)),
    ("store_host", ("127.0.0.1", -1)),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
@pytest.mark.parametrize("path", ["single", "batch", "inner"])
def test_failed_put_changes_nothing(tmp_path: Path, field: str, value: object, path: str) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        for i in range(3):
            assert store.put_message(make_msg("T", 0, b"ok%d" % i, key=f"k{i}")).ok
        before = _state(store)
        bad = make_msg("T", 0, b"bad", key="bad")
        setattr(bad, field, value)
        if path == "single":
            r = store.put_message(bad)
        elif path == "batch":
            r = store.put_messages([make_msg("T", 0, b"fine", key="fine"), bad])
        else:
            bad.body = encode_batch([BatchItem(b"a"), BatchItem(b"b")])
            r = store.put_inner_batch(bad, 2)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert field.split("_")[0] in r.remark and "\n" not in r.remark
        assert _state(store) == before
        # the next good put gets the offset the failed one would have had
        r = store.put_message(make_msg("T", 0, b"after", key="after"))
        assert r.ok and r.queue_offset == 3
        store.wait_for_dispatch()
        got = store.get_messages("T", 0, 0, 10)
        assert got.status is GetMessageStatus.FOUND
        assert [m.body for m in got.messages] == [b"ok0", b"ok1", b"ok2", b"after"]
        assert [m.queue_offset for m in got.messages] == [0, 1, 2, 3]
    finally:
        store.shutdown()
    # after a restart no two records share an offset
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        got = store.get_messages("T", 0, 0, 10)
        assert [m.queue_offset for m in got.messages] == [0, 1, 2, 3]
        assert store.put_message(make_msg("T", 0, b"next")).queue_offset == 4
    finally:
        store.shutdown()


def test_failure_inside_append_restores_offsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure past validation (here: the write itself) still leaves nothing behind."""
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        assert store.put_message(make_msg("T", 0, b"first")).ok
        before = _state(store)
        calls = {"n": 0}
        real = store.commit_log._append_record

        def failing(mf, rec, msg, *a):  # noqa: ANN001, ANN002 - wraps the real writer
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(28, "No space left on device")
            return real(mf, rec, msg, *a)

        monkeypatch.setattr(store.commit_log, "_append_record", failing)
        r = store.put_messages([make_msg("T", 0, b"x1"), make_msg("T", 0, b"x2")])
        assert r.status is PutMessageStatus.UNKNOWN_ERROR and "No space" in r.remark
        assert _state(store) == before
        monkeypatch.undo()
        r = store.put_message(make_msg("T", 0, b"second"))
        assert r.ok and r.queue_offset == 1
        store.wait_for_dispatch()
        assert [m.body for m in store.get_messages("T", 0, 0, 10).messages] == [b"first", b"second"]
    finally:
        store.shutdown()
