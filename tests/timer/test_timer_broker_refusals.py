"""Timer sends a real mqbroker refuses, as a producer sees them (remoting client).

* ``timerCongestNumEachSlot`` refuses timer messages into a crowded slot with SYSTEM_ERROR (Apache's
  WHEEL_TIMER_FLOW_CONTROL); it was shown but had no effect.
* A broker with ``timerWheelEnable=false`` answers a timer message SYSTEM_ERROR (Apache's
  WHEEL_TIMER_NOT_ENABLE), which a producer retries on another broker; it answered MESSAGE_ILLEGAL,
  which fails the send.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.common.response_code import ResponseCode
from broker_core.remoting.bodies import MessageQueue
from tests.client.conftest import create_topic
from tests.remoting_broker import BrokerProcess, running_broker

FLOW_CONTROL_TEXT = ("timer message is under flow control, max num limit is 10 or the current value is greater than 5 "
                     "and less than 10, trigger random flow control")


def _send_at(b: BrokerProcess, topic: str, deliver_ms: int, count: int, *, create: bool = False
             ) -> list[BrokerError | None]:
    """``count`` sends (no retry) due at ``deliver_ms``: None for each SEND_OK, else the broker's error."""
    async def go() -> list[BrokerError | None]:
        inst = MQClientInstance(b.namesrv_addr)
        producer = Producer("TimerFlowP", inst, retry_times_when_send_failed=0)
        out: list[BrokerError | None] = []
        try:
            if create:
                await create_topic(inst, b.broker_addr, topic, queues=1)
            await producer.start()
            for i in range(count):
                msg = Message(topic, f"m{i}".encode(), properties={"TIMER_DELIVER_MS": str(deliver_ms)})
                try:
                    await producer.send(msg)
                    out.append(None)
                except BrokerError as e:
                    out.append(e)
                await asyncio.sleep(0.15)  # the timer service wheels what was sent (it polls every 100 ms)
            return out
        finally:
            await producer.shutdown()
            await inst.shutdown()

    return asyncio.run(asyncio.wait_for(go(), 60))


def test_timer_congest_num_each_slot_refuses_messages_into_a_crowded_slot(tmp_path: Path) -> None:
    work = tmp_path / "b"
    crowded = (int(time.time()) + 120) * 1000 + 500  # one slot, two minutes ahead
    with running_broker(work) as b:  # no limit: 12 messages into one slot
        assert _send_at(b, "TimerFC", crowded, 12, create=True) == [None] * 12
    with running_broker(work, {"timerCongestNumEachSlot": "5"}) as b:
        refused = _send_at(b, "TimerFC", crowded, 3)
        quiet = _send_at(b, "TimerFC", crowded + 30_000, 5)
    for e in refused:  # 12 >= 2 * 5: every one refused
        assert isinstance(e, BrokerError), refused
        assert (e.code, e.remark) == (ResponseCode.SYSTEM_ERROR, FLOW_CONTROL_TEXT)
    assert quiet == [None] * 5  # up to the limit a slot takes every message


def test_a_broker_without_timer_wheel_answers_system_error_and_the_producer_retries_elsewhere(
        tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", {"timerWheelEnable": "false"}, broker_name="broker-b",
                           namesrv=a.namesrv_addr) as b:
        async def go() -> tuple[list[str], BrokerError]:
            inst = MQClientInstance(a.namesrv_addr)
            producer = Producer("TimerOffP", inst)  # 2 retries
            try:
                await create_topic(inst, a.broker_addr, "TimerOff", queues=2)
                await create_topic(inst, b.broker_addr, "TimerOff", queues=2)
                for _ in range(50):
                    route = await inst.get_route("TimerOff", refresh=True)
                    if route is not None and len(route.data.broker_datas) == 2:
                        break
                    await asyncio.sleep(0.1)
                await producer.start()
                brokers = []
                for i in range(8):
                    r = await producer.send(Message("TimerOff", f"m{i}".encode(),
                                                    properties={"TIMER_DELAY_SEC": "30"}))
                    brokers.append(r.message_queue.broker_name)
                with pytest.raises(BrokerError) as ei:
                    await producer.send(Message("TimerOff", b"x", properties={"TIMER_DELAY_SEC": "30"}),
                                        MessageQueue(topic="TimerOff", broker_name="broker-b", queue_id=0))
                return brokers, ei.value
            finally:
                await producer.shutdown()
                await inst.shutdown()

        brokers, error = asyncio.run(asyncio.wait_for(go(), 60))
    assert brokers == ["broker-a"] * 8
    assert (error.code, error.remark) == (ResponseCode.SYSTEM_ERROR,
                                          "accurate timer message is not enabled, timerWheelEnable is false")
