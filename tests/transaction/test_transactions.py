"""Transactional messages end to end on a real store: prepare, commit/rollback, op markers, check-back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hooked_store import T0, FakeClock, broker_put, open_store

from broker_core.broker.hooks import TransactionMessageRejected, transaction_prepare_hook
from broker_core.broker.transaction import (
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    EndTransactionStatus,
    TransactionalMessageCheckService,
    TransactionalMessageService,
    TransactionConfig,
    is_transaction_prepare_message,
)
from broker_core.broker.transaction.op_message import decode_op_body, encode_op_body
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.config_file import read_config_json
from broker_core.store.message_store import GetMessageStatus, MessageStore

COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0
TOPIC, GROUP = "TxTopic", "PG_ORDER"


def tx_msg(key: str, queue_id: int = 1, **props: str) -> MessageInner:
    properties = {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": key, "TAGS": "paid", "KEYS": key, **props}
    return MessageInner(topic=TOPIC, body=key.encode(), properties=properties, queue_id=queue_id, sys_flag=0x4,
                        born_timestamp=T0)


class FakeProducer:
    """Answers check-backs by calling end_transaction, like a producer's TransactionChecker."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.service: TransactionalMessageService | None = None
        self.checks: list[MessageExt] = []

    def __call__(self, half: MessageExt, group: str) -> None:
        self.checks.append(half)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        assert self.service is not None
        self.service.end_transaction(group, half.queue_offset, half.commit_log_offset, half.uniq_key,
                                     half.get_property("__transactionId__"), answer, True)


def make_service(store: MessageStore, clock: FakeClock, producer: FakeProducer | None = None,
                 **cfg: int) -> TransactionalMessageService:
    svc = TransactionalMessageService(store, broker_put(store, clock), config=TransactionConfig(**cfg),
                                      clock=clock, check_listener=producer)
    if producer is not None:
        producer.service = svc
    svc.load()
    return svc


def visible(store: MessageStore, topic: str = TOPIC, queue_id: int = 1) -> list[MessageExt]:
    return store.get_messages(topic, queue_id, 0, 100).messages


def op_offsets(store: MessageStore) -> list[int]:
    return [o for m in visible(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) for o in decode_op_body(m.body)]


def end(svc: TransactionalMessageService, result, decision: int, group: str = GROUP, from_check: bool = False,
        queue_offset: int | None = None):
    return svc.end_transaction(group, result.queue_offset if queue_offset is None else queue_offset,
                               result.wrote_offset, "id", "id", decision, from_check)


def test_half_message_is_stored_in_the_half_topic_and_invisible(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    original = tx_msg("k1")
    r = svc.prepare_message(original)
    assert r.ok and r.queue_offset == 0
    assert store.get_messages(TOPIC, 1, 0, 10).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    [half] = visible(store, RMQ_SYS_TRANS_HALF_TOPIC, 0)
    assert half.sys_flag & 0xC == 0 and half.commit_log_offset == r.wrote_offset
    assert half.properties["REAL_TOPIC"] == TOPIC and half.properties["REAL_QID"] == "1"
    assert half.properties["__transactionId__"] == "k1" and half.properties["TRAN_MSG"] == "true"
    assert original.topic == TOPIC and "REAL_TOPIC" not in original.properties
    assert svc.half_messages_pending(TOPIC) == 1
    store.shutdown()


def test_the_pending_count_never_goes_negative_after_a_crash_lost_its_increments(tmp_path: Path,
                                                                                 clock: FakeClock) -> None:
    """The per-topic half count is persisted periodically; a kill -9 before the save lost the prepares'
    increments, and the commits and rollbacks after the restart took it below zero: brokerStatus showed
    transactionHalfPending -10 for good (the file kept it)."""
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    results = [svc.prepare_message(tx_msg(f"k{i}")) for i in range(3)]
    assert svc.half_messages_pending(TOPIC) == 3
    store.shutdown()  # the metrics were never persisted: what a kill -9 before the periodic save leaves
    store = open_store(tmp_path / "s", clock)
    after = make_service(store, clock)
    for r in results:
        assert end(after, r, COMMIT).ok
    assert after.half_messages_pending(TOPIC) == 0 and after.half_messages_pending() == 0
    after.persist()
    assert make_service(store, clock).half_messages_pending(TOPIC) == 0
    store.shutdown()


def test_commit_makes_the_message_visible_and_writes_an_op_marker(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    clock.advance(50)
    res = end(svc, r, COMMIT)
    assert res.ok and res.response_code == 0
    [m] = visible(store)
    assert m.body == b"k1" and m.sys_flag & 0xC == 0x8
    assert m.prepared_transaction_offset == r.wrote_offset and m.store_timestamp == T0 + 50
    assert m.properties["UNIQ_KEY"] == "k1" and m.properties["TAGS"] == "paid"
    assert not {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} & m.properties.keys()
    assert [x.body for x in store.query_message(TOPIC, "k1")] == [b"k1"]
    # The op marker is batched: written once transactionOpBatchInterval has passed.
    assert svc.batch_send_op_message() == 0
    clock.advance(3000)
    assert svc.batch_send_op_message() == 1
    [op] = visible(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
    assert op.body == b"0," and op.tags == "d" and op.sys_flag == 0 and op.uniq_key
    assert svc.half_messages_pending(TOPIC) == 0 and svc.metrics.counters.commits == 1
    store.shutdown()


@pytest.mark.parametrize("props, stored_in", [({"DELAY": "1"}, "SCHEDULE_TOPIC_XXXX"),
                                               ({"TIMER_DELAY_SEC": "30"}, "rmq_sys_wheel_timer")])
def test_a_delayed_transactional_message_is_delayed_from_its_commit(tmp_path: Path, clock: FakeClock,
                                                                   props: dict, stored_in: str) -> None:
    """A half carrying DELAY or a timer property was moved by the put hooks into the delay (or timer)
    topic: SEND_OK, then every commit refused ("not a half message") and the message lost when the delay
    ended (its real topic had become the half topic). The half stays a half; the delay applies to the
    committed message, as RocketMQ's hooks apply it to a COMMIT-type put."""
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1", **props))
    assert r.ok
    [half] = visible(store, RMQ_SYS_TRANS_HALF_TOPIC, 0)
    assert half.properties["REAL_TOPIC"] == TOPIC and half.commit_log_offset == r.wrote_offset
    res = end(svc, r, COMMIT)
    assert res.ok and res.response_code == 0
    assert store.get_messages(TOPIC, 1, 0, 10).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE  # not yet
    [delayed] = visible(store, stored_in, 0)  # delay level 1 is queue 0; the timer topic has one queue
    assert delayed.properties["REAL_TOPIC"] == TOPIC and delayed.properties["REAL_QID"] == "1"
    assert delayed.sys_flag & 0xC == 0x8 and delayed.body == b"k1"
    store.shutdown()


def test_rollback_writes_only_the_op_marker(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    assert end(svc, r, ROLLBACK).ok
    svc.close()
    assert store.get_messages(TOPIC, 1, 0, 10).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert op_offsets(store) == [0]
    assert svc.metrics.counters.rollbacks == 1 and svc.half_messages_pending() == 0
    store.shutdown()


def test_several_ends_share_one_op_body(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    results = [svc.prepare_message(tx_msg(f"k{i}")) for i in range(5)]
    for i, r in enumerate(results):
        assert end(svc, r, COMMIT if i % 2 else ROLLBACK).ok
    svc.close()
    [op] = visible(store, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
    assert op.body == b"0,1,2,3,4,"
    assert [m.body for m in visible(store)] == [b"k1", b"k3"]
    store.shutdown()


@pytest.mark.parametrize("change, remark", [
    ({"group": "OTHER"}, "The producer group wrong"),
    ({"queue_offset": 5}, "The transaction state table offset wrong"),
])
def test_end_transaction_validation_writes_nothing(tmp_path: Path, clock: FakeClock, change: dict,
                                                   remark: str) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    before = store.get_max_phy_offset()
    res = end(svc, r, COMMIT, **change)
    assert res.status is EndTransactionStatus.SYSTEM_ERROR and res.remark == remark and res.response_code == 1
    svc.close()
    assert store.get_max_phy_offset() == before
    store.shutdown()


def test_end_transaction_refuses_offsets_that_are_not_half_messages(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    normal = store.put_message(MessageInner(topic=TOPIC, body=b"plain", properties={"PGROUP": GROUP}, queue_id=1))
    before = store.get_max_phy_offset()
    for phy in (normal.wrote_offset, -1, 10**9, normal.wrote_offset + 3):
        res = svc.end_transaction(GROUP, 0, phy, "id", "id", COMMIT, False)
        assert res.status is EndTransactionStatus.SYSTEM_ERROR
        assert "Find prepared transaction message failed" in res.remark or "offset wrong" in res.remark
    svc.close()
    assert store.get_max_phy_offset() == before and len(visible(store)) == 1
    store.shutdown()


def test_unknown_state_changes_nothing(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    res = end(svc, r, UNKNOWN)
    assert res.status is EndTransactionStatus.IGNORED and res.response_code is None
    svc.close()
    assert op_offsets(store) == [] and svc.half_messages_pending() == 1
    store.shutdown()


def test_duplicate_commit_is_stored_once(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    assert end(svc, r, COMMIT).ok
    again = end(svc, r, COMMIT, from_check=True)
    assert again.ok and "already committed" in again.remark
    assert end(svc, r, ROLLBACK).status is EndTransactionStatus.SYSTEM_ERROR
    assert len(visible(store)) == 1 and svc.half_messages_pending() == 0
    store.shutdown()


def test_unknown_then_check_back_then_commit(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([UNKNOWN, COMMIT])
    svc = make_service(store, clock, producer)
    r = svc.prepare_message(tx_msg("k1"))
    end(svc, r, UNKNOWN)
    checker = TransactionalMessageCheckService(svc)
    clock.advance(1000)
    assert svc.check().checked == [] and producer.checks == []  # younger than transactionTimeOut
    clock.now = T0 + 30_000
    report = checker.tick()
    assert report is not None and len(report.checked) == 1
    [first] = producer.checks
    assert first.topic == RMQ_SYS_TRANS_HALF_TOPIC and first.queue_offset == 1
    assert first.properties["TRANSACTION_CHECK_TIMES"] == "1" and first.uniq_key == "k1"
    assert "TRAN_PREPARED_QUEUE_OFFSET" not in first.properties
    assert visible(store) == []  # the producer answered UNKNOWN
    clock.now = T0 + 60_000
    checker.tick()
    assert len(producer.checks) == 2 and producer.checks[1].properties["TRANSACTION_CHECK_TIMES"] == "2"
    [m] = visible(store)
    assert m.body == b"k1" and m.prepared_transaction_offset == producer.checks[1].commit_log_offset
    # The commit's op marker ends the checks.
    clock.now = T0 + 90_000
    checker.tick()
    assert len(producer.checks) == 2 and len(visible(store)) == 1
    assert svc.metrics.counters.checks_sent == 2 and svc.half_messages_pending() == 0
    offsets = read_config_json(store.config_dir / "transactionCheckOffset.json")["offsetTable"]
    assert offsets[f"{RMQ_SYS_TRANS_HALF_TOPIC}@CID_RMQ_SYS_TRANS"] == {"0": 3}
    assert offsets[f"{RMQ_SYS_TRANS_OP_HALF_TOPIC}@CID_RMQ_SYS_TRANS"] == {"0": 1}
    store.shutdown()


def test_committed_and_rolled_back_halves_are_never_checked(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer)
    results = [svc.prepare_message(tx_msg(f"k{i}")) for i in range(4)]
    end(svc, results[0], COMMIT)
    end(svc, results[2], ROLLBACK)
    clock.advance(10_000)
    report = svc.check()
    assert sorted(h.uniq_key for h in report.checked) == ["k1", "k3"]
    assert sorted(m.body for m in visible(store)) == [b"k0", b"k1", b"k3"]
    store.shutdown()


def test_ended_halves_are_not_checked_while_dispatch_lags_behind_the_op_markers(tmp_path: Path,
                                                                               clock: FakeClock) -> None:
    """The check writes the op markers still queued in memory and must then read them back from the op
    queue. Dispatch runs behind the put on a started store; on a loaded machine (CI) the scan used to
    read the op queue before the markers were in it and checked committed and rolled-back halves back,
    every round (the ali-ons transaction test failed that way)."""
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer)
    results = [svc.prepare_message(tx_msg(f"k{i}")) for i in range(3)]
    end(svc, results[0], COMMIT)
    end(svc, results[1], ROLLBACK)
    store.start()

    def slow_op_dispatch(topic: str, _phy: int) -> bool:
        if topic == RMQ_SYS_TRANS_OP_HALF_TOPIC:
            time.sleep(0.3)  # a loaded machine: the op record reaches its queue late
        return True

    store.dispatch_filter = slow_op_dispatch
    clock.advance(10_000)
    report = svc.check()
    assert [h.uniq_key for h in report.checked] == ["k2"]
    assert store.wait_for_dispatch()
    assert sorted(m.body for m in visible(store)) == [b"k0", b"k2"]
    store.shutdown()


def test_check_back_exhausted_moves_the_half_to_trans_check_max_time_topic(tmp_path: Path,
                                                                          clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([UNKNOWN])
    svc = make_service(store, clock, producer, transaction_check_max=3)
    svc.prepare_message(tx_msg("k1"))
    for i in range(1, 6):
        clock.now = T0 + i * 30_000
        svc.check()
    assert len(producer.checks) == 3
    [parked] = visible(store, TRANS_CHECK_MAX_TIME_TOPIC, 0)
    assert parked.body == b"k1" and parked.properties["REAL_TOPIC"] == TOPIC
    assert parked.properties["TRANSACTION_CHECK_TIMES"] == "3"
    assert svc.metrics.counters.discarded == 1 and svc.half_messages_pending() == 0
    assert visible(store) == []
    store.shutdown()


def test_a_commit_answering_the_last_check_is_not_discarded(tmp_path: Path, clock: FakeClock) -> None:
    """The copy written for the last allowed check was read again in the same scan (dispatch is
    synchronous here) and moved to TRANS_CHECK_MAX_TIME_TOPIC before the producer could answer: a COMMIT
    to that check left the message both delivered and discarded, and the pending count below zero."""
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([UNKNOWN, UNKNOWN, COMMIT])
    svc = make_service(store, clock, producer, transaction_check_max=3)
    svc.prepare_message(tx_msg("k1"))
    for i in range(1, 6):
        clock.now = T0 + i * 30_000
        svc.check()
    assert len(producer.checks) == 3
    assert [m.body for m in visible(store)] == [b"k1"]
    assert visible(store, TRANS_CHECK_MAX_TIME_TOPIC, 0) == []
    assert svc.metrics.counters.discarded == 0 and svc.half_messages_pending(TOPIC) == 0
    store.shutdown()


def test_halves_older_than_the_check_max_time_are_discarded(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer, transaction_check_max_time_in_ms=60_000)
    svc.prepare_message(tx_msg("old"))
    clock.advance(61_000)
    report = svc.check()
    assert [h.uniq_key for h in report.discarded] == ["old"] and producer.checks == []
    assert len(visible(store, TRANS_CHECK_MAX_TIME_TOPIC, 0)) == 1
    store.shutdown()


def test_check_immunity_time_delays_the_first_check(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer)
    svc.prepare_message(tx_msg("imm", CHECK_IMMUNITY_TIME_IN_SECONDS="60"))
    clock.advance(30_000)
    assert svc.check().checked == [] and producer.checks == []
    [_, renewed] = visible(store, RMQ_SYS_TRANS_HALF_TOPIC, 0)
    assert renewed.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    clock.advance(31_000)
    assert len(svc.check().checked) == 1
    assert [m.body for m in visible(store)] == [b"imm"]
    store.shutdown()


def test_client_end_after_the_immunity_time_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "s", clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("imm", CHECK_IMMUNITY_TIME_IN_SECONDS="10"))
    clock.advance(10_001)
    res = end(svc, r, COMMIT)
    assert res.status is EndTransactionStatus.ILLEGAL_OPERATION and res.response_code == 604
    assert visible(store) == []
    assert end(svc, r, COMMIT, from_check=True).ok
    store.shutdown()


def test_restart_with_a_pending_half_then_commit(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "s"
    store = open_store(root, clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    svc.close()
    store.shutdown()
    store = open_store(root, clock)
    svc = make_service(store, clock)
    assert svc.half_messages_pending(TOPIC) == 1  # transactionMetrics survived
    assert end(svc, r, COMMIT).ok
    assert [m.body for m in visible(store)] == [b"k1"]
    store.shutdown()


def test_restart_after_commit_keeps_the_op_marker(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "s"
    store = open_store(root, clock)
    svc = make_service(store, clock)
    r = svc.prepare_message(tx_msg("k1"))
    end(svc, r, COMMIT)
    svc.close()  # the queued op marker is written at close
    store.shutdown()
    store = open_store(root, clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer)
    clock.advance(60_000)
    report = svc.check()
    assert report.checked == [] and producer.checks == []
    assert report.half_offset == {0: 1} and report.op_offset == {0: 1}
    assert len(visible(store)) == 1
    store.shutdown()


def test_restart_in_the_middle_of_checking_continues(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "s"
    store = open_store(root, clock)
    producer = FakeProducer([UNKNOWN])
    svc = make_service(store, clock, producer)
    svc.prepare_message(tx_msg("a"))
    svc.prepare_message(tx_msg("b"))
    clock.advance(30_000)
    assert len(svc.check().checked) == 2
    svc.close()
    store.shutdown()

    store = open_store(root, clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer)
    clock.advance(30_000)
    report = svc.check()
    assert sorted(h.uniq_key for h in report.checked) == ["a", "b"]
    assert all(h.properties["TRANSACTION_CHECK_TIMES"] == "2" for h in report.checked)
    assert sorted(m.body for m in visible(store)) == [b"a", b"b"]
    clock.advance(30_000)
    assert svc.check().checked == []
    store.shutdown()


def test_check_service_thread_answers_and_shuts_down_cleanly(tmp_path: Path, clock: FakeClock) -> None:
    import time

    store = open_store(tmp_path / "s", clock)
    producer = FakeProducer([COMMIT])
    svc = make_service(store, clock, producer)
    svc.prepare_message(tx_msg("bg"))
    checker = TransactionalMessageCheckService(svc, poll_interval_ms=5).start()
    clock.advance(30_000)
    deadline = time.monotonic() + 5
    while not visible(store) and time.monotonic() < deadline:
        time.sleep(0.01)
    checker.shutdown()
    assert [m.body for m in visible(store)] == [b"bg"]
    assert op_offsets(store) == [1]
    store.shutdown()


def test_send_path_decision_and_prepare_hook() -> None:
    msg = tx_msg("k1")
    assert is_transaction_prepare_message(msg)
    half = transaction_prepare_hook(msg)
    assert half is not None and half.topic == RMQ_SYS_TRANS_HALF_TOPIC and half.queue_id == 0
    assert half.sys_flag == 0 and transaction_prepare_hook(half) is None
    retry = tx_msg("k2", DELAY="3")
    retry.reconsume_times = 1  # retry of a committed message from a client older than 4.6.1
    assert not is_transaction_prepare_message(retry) and transaction_prepare_hook(retry) is None
    assert transaction_prepare_hook(MessageInner(topic=TOPIC, properties={"TRAN_MSG": "false"})) is None
    with pytest.raises(TransactionMessageRejected):
        transaction_prepare_hook(msg, reject_transaction_message=True)


def test_op_body_codec_accepts_legacy_and_garbage() -> None:
    assert encode_op_body([0, 12, 7]) == b"0,12,7,"
    assert decode_op_body(b"0,12,7,") == [0, 12, 7]
    assert decode_op_body(b"5") == [5]
    assert decode_op_body(b"3,x,,4,") == [3, -1, 4]
