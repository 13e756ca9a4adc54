"""Delay levels end to end: put hook -> SCHEDULE_TOPIC_XXXX -> ScheduleMessageService -> real topic."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from hooked_store import T0, FakeClock, broker_put, open_store

from broker_core.broker.hooks import DelayLevelIllegal, handle_schedule_message, schedule_message_hook
from broker_core.store.codec.message import MessageInner
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus
from broker_core.store.config_file import read_config_json, write_config_json
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.message_store import GetMessageStatus, MessageStore
from broker_core.store.schedule import ScheduleMessageService
from broker_core.store.store_config import DEFAULT_DELAY_LEVELS, parse_delay_levels

LEVELS_MS = parse_delay_levels(DEFAULT_DELAY_LEVELS)
TOPIC = "DelayTopic"


def delay_msg(level: int | str, body: bytes, queue_id: int = 0, topic: str = TOPIC, **props: str) -> MessageInner:
    properties = {"TAGS": "TagA", "KEYS": body.decode(), "DELAY": str(level), **props}
    return MessageInner(topic=topic, body=body, properties=properties, queue_id=queue_id, born_timestamp=T0)


def real_messages(store: MessageStore, topic: str = TOPIC, queue_ids: range = range(4)) -> list:
    out = []
    for qid in queue_ids:
        res = store.get_messages(topic, qid, 0, 1000)
        out.extend(res.messages)
    return out


def test_every_level_is_delivered_at_its_due_time_and_not_before(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    for level in range(1, 19):
        r = put(delay_msg(level, f"m{level}".encode(), queue_id=level % 4, Color="red"))
        assert r.ok
    # Parked, not visible, due time in the CQ tagsCode.
    assert real_messages(store) == []
    for level in range(1, 19):
        [unit] = store.get_units(SCHEDULE_TOPIC, level - 1, 0, 10)
        assert unit.tags_code == T0 + LEVELS_MS[level - 1]
    svc = ScheduleMessageService(store, put, clock=clock)
    for level in range(1, 19):
        due = T0 + LEVELS_MS[level - 1]
        clock.now = due - 1
        svc.tick()
        assert len(real_messages(store)) == level - 1, f"level {level} delivered before its due time"
        clock.now = due
        assert svc.tick() == 1
        delivered = {m.body: m for m in real_messages(store)}
        assert len(delivered) == level
        m = delivered[f"m{level}".encode()]
        assert m.topic == TOPIC and m.queue_id == level % 4
        assert m.store_timestamp == due
        props = m.properties
        assert "DELAY" not in props
        assert props["TAGS"] == "TagA" and props["KEYS"] == f"m{level}" and props["Color"] == "red"
        assert props["REAL_TOPIC"] == TOPIC and props["REAL_QID"] == str(level % 4)
        assert m.sys_flag & 0xC == 0
    assert svc.tick() == 0
    assert all(s.pending == 0 and s.delivered == 1 for s in svc.stats())
    # Delivered messages are findable by key like any other message.
    assert [m.body for m in store.query_message(TOPIC, "m7")] == [b"m7"]
    store.shutdown()


def test_level_above_max_is_clamped_to_the_last_level(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    assert put(delay_msg(25, b"late")).ok
    [parked] = store.get_messages(SCHEDULE_TOPIC, 17, 0, 10).messages
    assert parked.properties["DELAY"] == "18"
    svc = ScheduleMessageService(store, put, clock=clock)
    clock.now = T0 + 7_200_000 - 1
    assert svc.tick() == 0
    clock.now = T0 + 7_200_000
    assert svc.tick() == 1
    assert [m.body for m in real_messages(store)] == [b"late"]
    store.shutdown()


@pytest.mark.parametrize("level", ["0", "-1"])
def test_non_positive_level_is_stored_directly(tmp_path: Path, clock: FakeClock, level: str) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    assert put(delay_msg(level, b"dead", topic="%DLQ%G1")).ok
    assert [m.body for m in store.get_messages("%DLQ%G1", 0, 0, 10).messages] == [b"dead"]
    assert SCHEDULE_TOPIC not in store.topics()
    store.shutdown()


def test_non_numeric_level_is_refused_and_nothing_is_written(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    before = store.get_max_phy_offset()
    result = put(delay_msg("soon", b"x"))  # the Broker's pipeline answers the hook's refusal as a status
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL and "'soon'" in result.remark
    with pytest.raises(DelayLevelIllegal, match="'soon'"):
        handle_schedule_message(delay_msg("soon", b"x"), T0)
    assert store.get_max_phy_offset() == before
    store.shutdown()


def test_delay_level_wins_over_timer_properties() -> None:
    msg = delay_msg(2, b"x", TIMER_DELAY_SEC="30", TIMER_DELIVER_MS=str(T0 + 99_000))
    out = handle_schedule_message(msg, T0)
    assert out is not None and out.topic == SCHEDULE_TOPIC and out.queue_id == 1
    assert "TIMER_DELAY_SEC" not in out.properties and "TIMER_DELIVER_MS" not in out.properties
    assert msg.topic == TOPIC and "TIMER_DELAY_SEC" in msg.properties  # input untouched
    assert schedule_message_hook(out) is None  # never converted twice


def test_timer_properties_go_to_the_timer_topic() -> None:
    msg = MessageInner(topic=TOPIC, body=b"t", properties={"TIMER_DELAY_SEC": "30"}, queue_id=3)
    out = handle_schedule_message(msg, T0 + 500)
    assert out is not None and out.topic == "rmq_sys_wheel_timer" and out.queue_id == 0
    assert out.properties["REAL_TOPIC"] == TOPIC and out.properties["REAL_QID"] == "3"
    assert out.properties["TIMER_OUT_MS"] == str(T0 + 30_000)


def test_prepared_messages_are_not_delayed() -> None:
    msg = delay_msg(3, b"p")
    msg.sys_flag = 0x4
    assert schedule_message_hook(msg) is None


def test_delay_offset_json_has_rocketmq_shape(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    for i in range(3):
        put(delay_msg(1, f"a{i}".encode()))
    put(delay_msg(3, b"c0"))
    svc = ScheduleMessageService(store, put, clock=clock)
    clock.advance(1000)
    svc.tick()
    svc.shutdown()
    path = tmp_path / "store" / "config" / "delayOffset.json"
    text = path.read_text()
    assert text.startswith('{\n\t"dataVersion":{') and "\t\t1:3" in text and '"1"' not in text
    assert '"offsetTable":{' in text and not text.endswith("\n")
    obj = read_config_json(path)
    assert obj["offsetTable"] == {"1": 3}
    assert obj["dataVersion"]["counter"] >= 1 and obj["dataVersion"]["timestamp"] == T0 + 1000
    store.shutdown()


def test_java_written_delay_offset_file_is_honoured(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    for i in range(4):
        put(delay_msg(2, f"b{i}".encode()))
    # As a Java broker leaves it: levels 2 already delivered up to offset 3; quoted keys accepted too.
    write_config_json(store.config_dir / "delayOffset.json",
                      {"dataVersion": {"counter": 7, "stateVersion": 0, "timestamp": T0}, "offsetTable": {2: 3}})
    svc = ScheduleMessageService(store, put, clock=clock)
    clock.advance(5000)
    assert svc.tick() == 1
    assert [m.body for m in real_messages(store)] == [b"b3"]
    store.shutdown()


def test_offsets_outside_the_queue_are_corrected(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    put(delay_msg(1, b"only"))
    store.config_dir.mkdir(exist_ok=True)
    (store.config_dir / "delayOffset.json").write_text('{"offsetTable":{"1":99}}')
    svc = ScheduleMessageService(store, put, clock=clock)
    svc.load()
    assert svc.offsets.get(1) == 1  # pulled back to the queue's max offset
    store.shutdown()


def test_restart_in_the_middle_delivers_the_rest_exactly_once(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "store"
    store = open_store(root, clock)
    put = broker_put(store, clock)
    expected = set()
    for level in (1, 2, 3):
        for i in range(5):
            body = f"L{level}-{i}".encode()
            expected.add(body)
            clock.advance(100)
            assert put(delay_msg(level, body, queue_id=i % 2)).ok
    svc = ScheduleMessageService(store, put, clock=clock)
    clock.now = T0 + 1000 + 300  # level 1: first 3 due (stored at T0+100..T0+500)
    first = svc.tick()
    assert first == 3
    svc.shutdown()
    store.shutdown()

    clock.advance(60_000)
    store = open_store(root, clock)
    put = broker_put(store, clock)
    svc = ScheduleMessageService(store, put, clock=clock)
    assert svc.tick() == len(expected) - first
    assert svc.tick() == 0
    bodies = [m.body for m in real_messages(store, queue_ids=range(2))]
    assert sorted(bodies) == sorted(expected)  # every message once, none twice
    svc.shutdown()
    store.shutdown()


def test_failed_put_is_retried_at_the_same_offset(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    real_put = broker_put(store, clock)
    real_put(delay_msg(1, b"first"))
    real_put(delay_msg(1, b"second"))
    failures = [1]

    def flaky_put(msg: MessageInner) -> PutMessageResult:
        if failures:
            failures.pop()
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="disk full")
        return real_put(msg)

    svc = ScheduleMessageService(store, flaky_put, clock=clock)
    clock.advance(1000)
    assert svc.tick() == 0 and svc.failed_puts == 1 and svc.offsets.get(1) in (None, 0)
    assert svc.tick() == 2
    assert [m.body for m in real_messages(store)] == [b"first", b"second"]
    store.shutdown()


def test_a_put_failing_every_pass_is_logged_once_and_when_it_works_again(tmp_path: Path, clock: FakeClock,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """On a full disk every pass (10 a second) failed the same re-put and logged a warning each time."""
    store = open_store(tmp_path / "store", clock)
    real_put = broker_put(store, clock)
    real_put(delay_msg(1, b"first"))
    failures = [1] * 30

    def full_disk_put(msg: MessageInner) -> PutMessageResult:
        if failures:
            failures.pop()
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="disk full")
        return real_put(msg)

    svc = ScheduleMessageService(store, full_disk_put, clock=clock)
    clock.advance(1000)
    with caplog.at_level("INFO", logger="rmqops"):
        for _ in range(30):
            assert svc.tick() == 0
        assert svc.tick() == 1
    lines = [r.getMessage() for r in caplog.records if "delay level 1 re-put" in r.getMessage()]
    assert lines == [f"delay level 1 re-put failed: offset 0 to {TOPIC} returned SERVICE_NOT_AVAILABLE disk full",
                     f"delay level 1 re-put works again (it had failed: offset 0 to {TOPIC} returned "
                     "SERVICE_NOT_AVAILABLE disk full)"], lines
    assert svc.failed_puts == 30 and [m.body for m in real_messages(store)] == [b"first"]
    store.shutdown()


def test_message_with_the_half_topic_as_real_topic_is_discarded(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    # the put hooks no longer delay a half, so the bad record is written as a broker that did would have
    bad = delay_msg(1, b"bad", REAL_TOPIC="RMQ_SYS_TRANS_HALF_TOPIC", REAL_QID="0")
    assert store.put_message(dataclasses.replace(bad, topic="SCHEDULE_TOPIC_XXXX", queue_id=0)).ok
    put(delay_msg(1, b"good"))
    svc = ScheduleMessageService(store, put, clock=clock)
    clock.advance(1000)
    assert svc.tick() == 1 and svc.skipped == 1
    assert store.get_messages("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 10).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    store.shutdown()


def test_figures_report_pending_and_next_due(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    put(delay_msg(4, b"x"))
    clock.advance(10)
    put(delay_msg(4, b"y"))
    svc = ScheduleMessageService(store, put, clock=clock)
    level4 = svc.stats()[3]
    assert (level4.level, level4.queue_id, level4.pending, level4.next_due_ms) == (4, 3, 2, T0 + 30_000)
    clock.now = T0 + 30_000
    svc.tick()
    level4 = svc.stats()[3]
    assert (level4.pending, level4.next_due_ms, level4.delivered) == (1, T0 + 30_010, 1)
    assert svc.running_stats()["scheduleMessageOffset_4"] == "1,2"
    store.shutdown()


def test_background_thread_delivers_and_persists_on_shutdown(tmp_path: Path, clock: FakeClock) -> None:
    store = open_store(tmp_path / "store", clock)
    put = broker_put(store, clock)
    put(delay_msg(1, b"bg"))
    svc = ScheduleMessageService(store, put, clock=clock, poll_interval_ms=5).start()
    clock.advance(1000)
    deadline = time.monotonic() + 5
    while not real_messages(store) and time.monotonic() < deadline:
        time.sleep(0.01)
    svc.shutdown()
    assert [m.body for m in real_messages(store)] == [b"bg"]
    assert read_config_json(store.config_dir / "delayOffset.json")["offsetTable"] == {"1": 1}
    store.shutdown()
