"""Retention deleting messages a group has not consumed logs ONE WARNING naming them (issue 11 item 3).

Why: under disk pressure the store deletes the oldest commitlog files whether or not they were
consumed. That loss of acknowledged messages was silent. The store now reports per queue what a run
made unreadable; the Broker compares it with the committed offsets and writes one line naming each
queue's range and the groups behind. A real Broker and store; only the disk usage is injected.
"""

from __future__ import annotations

import logging

from broker_core.store.retention import DroppedQueueRange

from .conftest import small_config


def _warnings(caplog) -> list[str]:  # noqa: ANN001 - pytest's caplog
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "not yet consumed" in
            r.getMessage()]


def test_disk_pressure_drop_of_unconsumed_messages_logs_one_warning(make_broker, caplog) -> None:
    b = make_broker(config=small_config(mappedFileSizeCommitLog="4096", deleteFileBatchMax="3"))
    b.create_or_update_topic("Ret", 2, 2)
    for g in ("slow", "done", "idle"):
        b.create_or_update_subscription_group(g)
    for i in range(60):
        assert b.send_message("Ret", b"r" * 300, {"KEYS": f"r{i}"}, queue_id=i % 2).queue_offset == i // 2
    b.store.wait_for_dispatch()
    b.commit_offset("slow", "Ret", 0, 1)
    b.commit_offset("slow", "Ret", 1, 29)
    b.commit_offset("done", "Ret", 0, 30)
    b.commit_offset("done", "Ret", 1, 30)
    before = {q: b.store.get_min_offset_in_queue("Ret", q) for q in (0, 1)}
    b.store.retention.disk_usage = lambda p: 0.90  # above diskSpaceCleanForciblyRatio: young files go too
    caplog.clear()
    with caplog.at_level(logging.INFO):
        rep = b.store.delete_expired_files()
    assert rep.trigger == "disk" and len(rep.deleted_commit_log_files) == 3
    after = {q: b.store.get_min_offset_in_queue("Ret", q) for q in (0, 1)}
    # the store reports exactly the queue offsets that became unreadable
    assert rep.dropped == [DroppedQueueRange("Ret", q, before[q], after[q]) for q in (0, 1) if after[q] > before[q]]
    assert after[0] > 1 and after[1] < 29  # slow is behind on queue 0 only
    lines = _warnings(caplog)
    assert len(lines) == 1, lines
    assert f"Ret/0 [1,{after[0]}) behind: slow@1" in lines[0]
    assert "Ret/1" not in lines[0] and "done" not in lines[0] and "idle" not in lines[0]
    assert b.retention_warner.last[0].groups == (("slow", 1),)

    # everything the next run drops was consumed: no warning
    b.commit_offset("slow", "Ret", 0, 30)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        rep = b.store.delete_expired_files()
    assert rep.dropped and _warnings(caplog) == []
