"""A ``config/timercheck`` whose read time was overwritten with a value far ahead of the clock is damaged.

Why: such a read pointer says every slot up to that far-off time was delivered, so the timer never
delivered a message again, while ``mqadmin verifyStore`` said "store OK". Now the broker names the file
at start and falls back as for any damaged checkpoint (the wheel is read again from the timer log,
nothing lost), and verifyStore reports it and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from typer.testing import CliRunner

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.remoting import RequestCode
from broker_core.remoting.headers import GetMaxOffsetRequestHeader, OffsetResponseHeader
from mqadmin.app import app
from tests.client.conftest import create_topic
from tests.remoting_broker import BrokerProcess, running_broker


async def _max_offset(inst: MQClientInstance, addr: str, topic: str, queue_id: int = 0) -> int:
    resp = await inst.invoke(addr, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id))
    inst.check(resp, addr=addr)
    return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset


async def _wait_max_offset(inst: MQClientInstance, addr: str, topic: str, at_least: int, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while True:
        got = await _max_offset(inst, addr, topic)
        if got >= at_least or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


def _send_delayed(b: BrokerProcess, topic: str, count: int, delay_sec: int, *, create: bool,
                  wait_for: int | None = None) -> int:
    """Send ``count`` messages with TIMER_DELAY_SEC; the topic's max offset once ``wait_for`` is reached
    (or 15 s passed)."""
    async def go() -> int:
        inst = MQClientInstance(b.namesrv_addr)
        producer = Producer("TimerProbeP", inst)
        try:
            if create:
                await create_topic(inst, b.broker_addr, topic, queues=1)
            await producer.start()
            for i in range(count):
                await producer.send(Message(topic, f"m{i}".encode(), properties={"TIMER_DELAY_SEC": str(delay_sec)}))
            if wait_for is None:
                return await _max_offset(inst, b.broker_addr, topic)
            return await _wait_max_offset(inst, b.broker_addr, topic, wait_for, 15)
        finally:
            await producer.shutdown()
            await inst.shutdown()

    return asyncio.run(asyncio.wait_for(go(), 60))


def test_a_timer_checkpoint_read_time_far_ahead_is_reported_and_no_timer_message_is_lost(tmp_path: Path) -> None:
    work = tmp_path / "b"
    with running_broker(work) as b:
        assert _send_delayed(b, "TimerCk", 1, 1, create=True, wait_for=1) == 1
    checkpoint = b.store / "config" / "timercheck"
    with checkpoint.open("r+b") as f:  # lastReadTimeMs (its first 8 bytes) becomes 7449361025514038561
        f.write(b"garbage!")

    result = CliRunner().invoke(app, ["verifyStore", "--store", str(b.store), "--config", str(work / "broker.conf"),
                                      "--output", "json"], env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert result.exit_code == 1, result.stdout
    issues = json.loads(result.stdout)["issues"]
    assert [(i["kind"], i["where"]) for i in issues] == [("timer-checkpoint", "config/timercheck")]
    assert "lastReadTimeMs=7449361025514038561" in issues[0]["detail"]
    assert "ahead of the clock" in issues[0]["detail"]

    with running_broker(work) as b:
        got = _send_delayed(b, "TimerCk", 5, 2, create=False, wait_for=6)
        log_text = b.log_text()
    assert got >= 6, f"the timer delivered {got - 1} of 5 timer messages after the restart\n{log_text}"
    assert "timer checkpoint" in log_text and "timercheck is damaged (lastReadTimeMs=7449361025514038561" in log_text


def test_a_read_time_ahead_of_a_clock_set_back_still_delivers_what_is_due_in_between(tmp_path: Path, caplog) -> None:
    """Within the wheel's span a read time ahead of the clock is a clock set back, not damage: the wheel
    is read from now. Believing it skipped every slot between the clock and that read time."""
    from broker_core.store.codec.message import MessageInner
    from broker_core.store.message_store import MessageStore
    from broker_core.store.store_config import StoreConfig
    from broker_core.store.timer import convert_to_timer_message
    from broker_core.store.timer.timer_message_store import TimerMessageStore

    class Clock:
        now = 1_800_000_000_000

        def __call__(self) -> int:
            return self.now

    clock = Clock()
    config = StoreConfig(mapped_file_size_commit_log=1 << 20, message_index_enable=False,
                         mapped_file_size_timer_log=64 * 1024)
    ms = MessageStore(tmp_path / "s", config, clock=clock).open()
    timer = TimerMessageStore(ms, clock=clock)
    timer.tick()
    timer.shutdown()  # the checkpoint's read time is now
    ms.shutdown()
    clock.now -= 3_600_000  # the clock is set back an hour
    ms = MessageStore(tmp_path / "s", config, clock=clock).open()
    timer = TimerMessageStore(ms, clock=clock)
    try:
        assert timer.timer_checkpoint.problem is None
        assert "ahead of the clock (was it set back?)" in caplog.text
        msg = MessageInner(topic="Real", body=b"due in 30 s", properties={"TIMER_DELAY_MS": "30000"},
                           born_timestamp=clock.now)
        assert ms.put_message(convert_to_timer_message(msg, clock.now, 1000)).ok
        timer.tick()
        clock.now += 31_000
        timer.tick()
        assert [m.body for m in ms.get_messages("Real", 0, 0, 10).messages] == [b"due in 30 s"]
    finally:
        timer.shutdown()
        ms.shutdown()
