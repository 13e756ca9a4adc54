"""Live: the dashboard beside a running broker process with a producer and a slow consumer shows the
lag rise, then drain. Over a store directory (read-only, re-read each refresh) today; over the
network (-n) once the remoting server and client are on main."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tui_helpers import by_first, number, run_async
from tui_seed import SIZE

from mqadmin.commands.dashboard import StoreTarget
from tui.app import DashboardApp

HERE = Path(__file__).resolve().parent
TOPIC, GROUP = "LiveTopic", "live_group"


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
            # The lag sparkline followed it: it holds the peak and ends at zero.
            values = app.history.lag_values(GROUP)
            assert max(values) == peak and values[-1] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()


@pytest.mark.skip(reason="needs the network: the remoting server (broker_core/net, mqbroker listening on "
                         "namesrv/remoting ports) and `mqadmin -n` (mqadmin/transport/remoting.py "
                         "RemotingBrokerClient) are not on main yet, so there is no producer/consumer client "
                         "and no -n Admin to point the dashboard at")
def test_live_lag_rises_then_drains_over_the_network():
    """Same as above with mqbroker on free ports, our remoting producer and a slow pull consumer, and
    ``mqadmin dashboard -n 127.0.0.1:<namesrv>``; lands with issue 12."""
