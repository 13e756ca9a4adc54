"""A lost store or a slow broker shows the banner and is retried; the UI keeps answering meanwhile."""

from __future__ import annotations

import threading
import time

from tui_helpers import run_async, text_of
from tui_seed import SIZE, Store

from mqadmin.admin import Admin
from mqadmin.commands.dashboard import StoreTarget
from tui.app import DashboardApp
from tui.screens.topics import TopicsScreen
from tui.widgets.banner import ConnectionBanner


async def _until(pilot, cond, what: str, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def _banner(app: DashboardApp) -> ConnectionBanner:
    return app.screen.query_one(ConnectionBanner)


@run_async
async def test_store_that_disappears_shows_the_banner_and_recovers_when_it_is_back(golden_store):
    store: Store = golden_store("store-basic")
    app = store.app(refresh_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.snapshot is not None, "the first refresh")
        moved = store.dir.with_name("moved-away")
        store.dir.rename(moved)
        try:
            await _until(pilot, lambda: _banner(app).has_class("-lost"), "the banner")
            assert "does not exist" in text_of(app, "ConnectionBanner")
            assert "retrying in" in text_of(app, "ConnectionBanner")
            # The last snapshot stays on screen and keys still work while the poller retries.
            await pilot.press("2")
            await pilot.pause()
            assert isinstance(app.screen, TopicsScreen) and _banner(app).has_class("-lost")
            assert app.screen.query_one("#topics").row_count > 0
        finally:
            moved.rename(store.dir)
        app.action_refresh_now()
        await _until(pilot, lambda: not _banner(app).has_class("-lost"), "the banner to go")
        assert app.lost is None


class SlowTarget(StoreTarget):
    """A broker that stops answering until ``answer`` is set (e.g. stuck in a long GC or a full disk)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.dir, store.conf, description="slow broker")
        self.answer = threading.Event()
        self.answer.set()

    def open(self, writes: bool = False) -> Admin:
        self.answer.wait(30)
        return super().open(writes)


@run_async
async def test_a_call_that_does_not_answer_times_out_without_freezing_the_ui(golden_store):
    store: Store = golden_store("store-basic")
    target = SlowTarget(store)
    app = DashboardApp(target, refresh_s=0.1, call_timeout_s=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.snapshot is not None, "the first refresh")
        target.answer.clear()
        await _until(pilot, lambda: _banner(app).has_class("-lost"), "the timeout banner")
        assert "did not answer within 1 s" in text_of(app, "ConnectionBanner")
        started = time.monotonic()
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, TopicsScreen)
        assert time.monotonic() - started < 2.0  # keys are handled while the broker hangs
        target.answer.set()
        app.action_refresh_now()
        await _until(pilot, lambda: not _banner(app).has_class("-lost"), "recovery")
