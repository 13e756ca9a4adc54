"""The Admin's dashboard figures (issue 14) on real store state: transactions, store positions, lag."""

from __future__ import annotations

from tui_seed import DASH_GROUP_OFFSETS, open_broker, seed_consumers

from mqadmin.figures import TIMER_DUE_BUCKETS


def test_transaction_backlog_counts_halves_until_they_are_ended(golden_store):
    store = golden_store("store-basic")
    broker = open_broker(store)
    admin = store.admin()
    try:
        broker.create_or_update_topic("PayTopic", 1, 1)
        sent = [broker.send_message("PayTopic", f"pay-{i}".encode(), {"TRAN_MSG": "true", "PGROUP": "pay_producer"},
                                    sys_flag=0x4) for i in range(3)]
        broker.persist()
        backlog = admin.transaction_backlog()  # a read-only look beside the running broker
        assert (backlog.pending_check, backlog.half_depth) == (3, 3)
        first = sent[0]
        broker.end_transaction("pay_producer", first.queue_offset, int(first.msg_id[-16:], 16), 8)  # commit
        broker.persist()
        admin.close()  # the next call reopens the store: what the dashboard does every refresh
        assert admin.transaction_backlog().pending_check == 2
    finally:
        admin.close()
        broker.shutdown()


def test_store_positions_and_group_lag_read_only(golden_store):
    store = golden_store("store-basic")
    seed_consumers(store)
    admin = store.admin()
    try:
        p = admin.store_positions()
        assert p.commit_log_min_offset == 0 and p.flushed_offset == p.commit_log_max_offset > 0
        assert p.dispatch_behind_bytes == 0 and p.unflushed_bytes == 0
        lag = admin.group_lag("dash_group")
        assert lag.topics == ["GoldenTopicA"]
        assert {q.queue_id: q.consumer_offset for q in lag.queues} == DASH_GROUP_OFFSETS
        assert lag.total_lag == 60 and lag.inflight == 0 and not lag.blocked_queues
        assert admin.timer_backlog() is None  # store-basic has no timer wheel
        assert len(admin.delay_levels()) == 18 and all(d.pending == 0 for d in admin.delay_levels())
    finally:
        admin.close()


def test_timer_backlog_buckets_cover_every_pending_message(golden_store):
    store = golden_store("store-timer")
    admin = store.admin()
    try:
        t = admin.timer_backlog()
        assert t is not None and list(t.due) == list(TIMER_DUE_BUCKETS)
        assert sum(t.due.values()) == t.pending == 6
    finally:
        admin.close()
