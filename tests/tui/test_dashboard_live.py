"""Live: the dashboard beside a running broker with a producer and a slow consumer shows the lag rise,
then drain: over a store directory (read-only, re-read each refresh) and over the network (-n)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tui_helpers import by_first, first_refresh, number, run_async
from tui_seed import SIZE

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer
from broker_core.client.pull_consumer import PullConsumer
from mqadmin.commands.dashboard import ClusterTarget, StoreTarget
from tests.client.conftest import create_topic
from tests.remoting_broker import running_broker
from tui.app import DashboardApp

HERE = Path(__file__).resolve().parent
TOPIC, GROUP = "LiveTopic", "live_group"
NET_TOPIC, NET_GROUP = "NetLiveTopic", "net_live_group"


def _start_broker(store: Path, conf: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(HERE / "live_broker.py"), str(store), str(conf), TOPIC, GROUP,
                             "3", "40", "6", "80"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if json.loads(line or "{}").get("phase") != "ready":
        proc.kill()
        raise AssertionError(f"live broker did not start: {line!r} {proc.stderr.read()}")
    return proc


@run_async
async def test_live_lag_rises_then_drains_beside_a_running_broker(golden_store):
    store = golden_store("store-basic")
    # Offsets persisted every 200 ms (flushConsumerOffsetInterval), so a read-only look sees them soon.
    with store.conf.open("a", encoding="utf-8") as f:
        f.write("flushConsumerOffsetInterval=200\n")
    proc = _start_broker(store.dir, store.conf)
    try:
        app = DashboardApp(StoreTarget(store.dir, store.conf), refresh_s=0.25, call_timeout_s=10)
        seen: list[int] = []
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            deadline = time.monotonic() + 120  # generous: CI machines are shared
            while time.monotonic() < deadline:
                await pilot.pause(0.25)
                if app.lost is not None:
                    continue  # the broker may be mid-write of a config file: the next refresh retries
                rows = by_first(app, "#groups")
                if GROUP in rows:
                    seen.append(number(rows[GROUP][1]))
                if seen and max(seen) >= 40 and seen[-1] == 0:
                    break
            print("lag seen:", seen, "failed refreshes:", app.poller.total_failures)
            assert seen, "the dashboard never showed the live group"
            peak = max(seen)
            assert peak >= 40, f"the lag never rose: {seen}"
            assert seen[-1] == 0, f"the lag did not drain: {seen}"
            assert seen.index(peak) < len(seen) - 1
            # The lag sparkline followed it: it rose at least as high and ends at zero. (It records every
            # refresh, the loop above samples the table between them: a refresh it missed may hold a
            # higher value, 97 against a sampled 89 in one CI run.)
            values = app.history.lag_values(GROUP)
            assert max(values) >= peak and values[-1] == 0, (values, seen)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()


def _network_load(namesrv: str, broker_addr: str, ready: threading.Event, go: threading.Event,
                  stop: threading.Event, errors: list[BaseException]) -> None:
    """Once ``go`` is set: our remoting producer (up to 80 msg/s for 2 s: as many messages as 40 msg/s for
    4 s, in half the time) and a slow pull consumer (one message per queue every 0.15 s while the producer
    runs, then up to 32 at a time): the lag rises, then drains."""

    async def run_load() -> None:
        inst = MQClientInstance(namesrv)
        await create_topic(inst, broker_addr, NET_TOPIC, queues=2)
        producer = Producer(NET_GROUP + "_P", inst)
        consumer = PullConsumer(NET_GROUP, inst)
        await producer.start()
        await consumer.start()
        mqs = await consumer.fetch_subscribe_queues(NET_TOPIC)
        offsets = {mq.queue_id: 0 for mq in mqs}
        for mq in mqs:
            await consumer.update_consume_offset(mq, 0)
        ready.set()
        while not go.is_set() and not stop.is_set():
            await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        producing_until = loop.time() + 2

        async def produce() -> None:
            n = 0
            while loop.time() < producing_until and not stop.is_set():
                await producer.send(Message(NET_TOPIC, f"net-{n}".encode(), keys=f"net-{n}"))
                n += 1
                await asyncio.sleep(1 / 80)

        async def consume() -> None:
            while not stop.is_set():
                slow = loop.time() < producing_until
                for mq in mqs:
                    r = await consumer.pull(mq, "*", offsets[mq.queue_id], 1 if slow else 32)
                    if r.messages:
                        offsets[mq.queue_id] = r.next_begin_offset
                        await consumer.update_consume_offset(mq, offsets[mq.queue_id])
                await asyncio.sleep(0.15 if slow else 0.05)

        try:
            await asyncio.gather(produce(), consume())
        finally:
            await producer.shutdown()
            await consumer.shutdown()
            await inst.shutdown()

    try:
        asyncio.run(run_load())
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)
        ready.set()


@run_async
async def test_live_lag_rises_then_drains_over_the_network(tmp_path):
    """mqbroker on free ports, our remoting producer and a slow pull consumer, and the dashboard on
    ``-n`` (ClusterTarget: one remoting Admin kept across refreshes)."""
    with running_broker(tmp_path / "mqbroker") as b:
        ready, go, stop, errors = threading.Event(), threading.Event(), threading.Event(), []
        load = threading.Thread(target=_network_load, args=(b.namesrv_addr, b.broker_addr, ready, go, stop, errors),
                                daemon=True)
        load.start()
        try:
            assert ready.wait(60) and not errors, errors
            app = DashboardApp(ClusterTarget(b.namesrv_addr), refresh_s=0.25, call_timeout_s=10)
            seen: list[int] = []
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("3")
                await first_refresh(pilot)
                go.set()  # the producer starts once the dashboard watches
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not errors:
                    await pilot.pause(0.25)
                    if app.lost is not None:
                        continue
                    rows = by_first(app, "#groups")
                    if NET_GROUP in rows:
                        seen.append(number(rows[NET_GROUP][1]))
                    if seen and max(seen) >= 20 and seen[-1] == 0:
                        break
                snap = app.snapshot
                assert snap is not None and snap.identity.broker_addr == b.broker_addr
                # The dashboard's runtime-info keys travel over the wire like RocketMQ's own.
                status = snap.brokers[0].status
                assert {"commitLogFlushedOffset", "transactionHalfPending", "scheduleLevel_1"} <= status.keys()
                assert snap.brokers[0].positions.commit_log_max_offset > 0
                assert len(snap.brokers[0].delay_levels) == 18
            print("network lag seen:", seen)
            assert not errors, errors
            peak = max(seen, default=0)
            assert peak >= 20, f"the lag never rose: {seen}"
            assert seen[-1] == 0, f"the lag did not drain: {seen}"
            assert seen.index(peak) < len(seen) - 1
        finally:
            stop.set()
            load.join(30)
