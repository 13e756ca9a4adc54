"""Over a real mqbroker: timer and delay-level messages pending when their topic is deleted do not come
back in the topic created again under the name (the probe's repro, over remoting).

What a user saw: TIMER_DELAY_SEC and DELAY messages sent to TDEL, ``mqadmin deleteTopic`` at once;
when they fell due the timer and the delay-level service re-put them into TDEL, which made its queue
again, and after ``updateTopic`` a new group pulling from offset 0 got both old messages.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from tests.client.conftest import create_topic
from tests.net.net_util import run_mqadmin as mqadmin
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

CONF = {"messageDelayLevel": "1s 2s 3s 4s 5s 6s 7s 8s", "timerPrecisionMs": "1000"}
DROPPED = "was deleted after it was stored"


def _send(b: BrokerProcess, *msgs: Message, create: bool = False) -> None:
    async def go() -> None:
        inst = MQClientInstance(b.namesrv_addr)
        producer = Producer("TdelP", inst)
        try:
            if create:
                await create_topic(inst, b.broker_addr, "TDEL", queues=1)
            await producer.start()
            for m in msgs:
                await producer.send(m)
        finally:
            await producer.shutdown()
            await inst.shutdown()

    asyncio.run(asyncio.wait_for(go(), 60))


def _pull_all(b: BrokerProcess, group: str) -> list[bytes]:
    async def go() -> list[bytes]:
        inst = MQClientInstance(b.namesrv_addr)
        consumer = PullConsumer(group, inst)
        try:
            await consumer.start()
            out: list[bytes] = []
            for q in await consumer.fetch_subscribe_queues("TDEL"):
                r = await consumer.pull(q, "*", 0, 32)
                out.extend(bytes(m.body) for m in r.messages)
            return out
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    return asyncio.run(asyncio.wait_for(go(), 60))


def test_pending_timer_and_delay_messages_do_not_come_back_after_delete_topic(tmp_path: Path) -> None:
    with running_broker(tmp_path / "b", CONF) as b:
        n = b.namesrv_addr
        _send(b, Message("TDEL", b"del-timer", properties={"TIMER_DELAY_SEC": "3"}),
              Message("TDEL", b"del-lvl", delay_level=3), create=True)
        deleted = mqadmin("deleteTopic", "-n", n, "-c", "DefaultCluster", "-t", "TDEL")
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        # both fall due within ~4 s; each is passed over with one log line (they made TDEL's queue again)
        old_queue = b.store / "consumequeue" / "TDEL"
        wait_for(lambda: b.log_text().count(DROPPED) >= 2 or old_queue.exists(), "both delayed messages due", 30)
        assert not old_queue.exists()
        made = mqadmin("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "TDEL", "-r", "1", "-w", "1")
        assert made.returncode == 0, made.stdout + made.stderr
        _send(b, Message("TDEL", b"new-timer", properties={"TIMER_DELAY_SEC": "1"}),
              Message("TDEL", b"new-lvl", delay_level=1))
        got = wait_for(lambda: (lambda x: x if len(x) >= 2 else None)(_pull_all(b, "cgNew")),
                       "the new topic's delayed messages", 30)
        log = b.log_text()
    assert sorted(got) == [b"new-lvl", b"new-timer"], got
    lines = [line for line in log.splitlines() if DROPPED in line]
    assert len(lines) == 2, lines
    assert all("TDEL" in line for line in lines), lines
