"""One-line summaries of the store maintenance requests (CLEAN_EXPIRED_CONSUMEQUEUE,
DELETE_EXPIRED_COMMITLOG, CLEAN_UNUSED_TOPIC).

Why shared: the remoting handler sends the summary as the response remark (Java's answer is a bare
SUCCESS, which a Java mqadmin prints as "success"; the remark adds what was done) and the in-process
transport returns the same words, so ``--store`` and ``-n`` say the same thing.
"""

from __future__ import annotations

from broker_core.store.retention import RetentionReport


def expired_queues_summary(removed: list[tuple[str, int]]) -> str:
    if not removed:
        return "no expired consume queue"
    return f"removed {len(removed)} expired consume queue(s): " + ", ".join(f"{t}-{q}" for t, q in removed)


def commit_log_summary(report: RetentionReport) -> str:
    files = report.deleted_commit_log_files
    if not files:
        return f"no expired commitlog file (commitlog starts at {report.commit_log_min_offset})"
    return (f"deleted {len(files)} commitlog file(s) {', '.join(files)}, {report.deleted_consume_queue_files} "
            f"consume queue file(s), {report.deleted_index_files} index file(s); commitlog starts at "
            f"{report.commit_log_min_offset}")


def unused_topics_summary(removed: list[str]) -> str:
    if not removed:
        return "no unused topic"
    return f"removed the queues of {len(removed)} unused topic(s): " + ", ".join(removed)
