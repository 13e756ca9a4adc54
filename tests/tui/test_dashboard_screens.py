"""Pilot tests: every screen on copies of Apache RocketMQ's golden stores shows what the manifests say."""

from __future__ import annotations

from collections import Counter

from golden_helpers import load_manifest
from textual.widgets import Input
from tui_helpers import by_first, first_refresh, number, run_async, table_rows, text_of
from tui_seed import DASH_GROUP_OFFSETS, SIZE, seed_acl, seed_consumers

from tui.screens.acl import AclScreen
from tui.screens.consumers import ConsumersScreen
from tui.screens.help import HelpScreen
from tui.screens.messages import MessagesScreen
from tui.screens.overview import OverviewScreen
from tui.screens.timers import TimersScreen
from tui.screens.topic_detail import TopicScreen
from tui.screens.topics import TopicsScreen


@run_async
async def test_overview_shows_broker_store_positions_and_backlogs(golden_store):
    store = golden_store("store-timer")
    manifest = load_manifest("store-timer")
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        assert isinstance(pilot.app.screen, OverviewScreen)
        broker = table_rows(pilot.app, "#brokers")[0]
        assert broker[:4] == ["broker-a", "127.0.0.1:10911", "DefaultCluster", "V5_3_3"]
        assert broker[-1] == "read-only store"
        figures = {k: v for k, v in table_rows(pilot.app, "#figures")}
        assert figures["Commitlog range"] == f"[0, {manifest['commitLogMaxOffset']:,})"
        assert figures["Flushed position"].startswith(f"{manifest['commitLogMaxOffset']:,} (0 B not flushed")
        assert figures["Timer messages pending"] == "6"
        assert figures["Dispatch behind"] == "0 B"


@run_async
async def test_topics_screen_lists_golden_topics_and_drills_into_queue_offsets(golden_store):
    store = golden_store("store-basic")
    manifest = load_manifest("store-basic")
    seed_consumers(store)
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(pilot.app.screen, TopicsScreen)
        topics = by_first(pilot.app, "#topics")
        per_topic = Counter(m["topic"] for m in manifest["messages"])
        for topic in ("GoldenTopicA", "GoldenTopicB"):
            row = topics[topic]
            assert row[1] == "SimpleCQ"
            assert number(row[5]) == per_topic[topic] == 100
        # '/' filters the table; Enter on the remaining row opens the topic.
        await pilot.press("slash", *"TopicB", "enter")
        await pilot.pause()
        assert [r[0] for r in table_rows(pilot.app, "#topics")] == ["GoldenTopicB"]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(pilot.app.screen, TopicScreen)
        queues = by_first(pilot.app, "#queues")
        expected = manifest["queues"]["GoldenTopicB"]
        assert set(queues) == set(expected)
        for qid, q in expected.items():
            assert (number(queues[qid][1]), number(queues[qid][2])) == (q["minOffset"], q["maxOffset"])
        last_stored = max(m["storeTimestamp"] for m in manifest["messages"]
                          if m["topic"] == "GoldenTopicB" and m["queueId"] == 0)
        from tui.format import when

        assert queues["0"][4] == when(last_stored)
        assert "fifo_group" in text_of(pilot.app, "#consumed-by")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(pilot.app.screen, TopicsScreen)


@run_async
async def test_consumers_screen_sorts_by_lag_and_shows_inflight_blocked_fifo_and_dlq(golden_store):
    store = golden_store("store-basic")
    seed_consumers(store)
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConsumersScreen)
        rows = table_rows(pilot.app, "#groups")
        lags = [number(r[1]) for r in rows]
        assert lags == sorted(lags, reverse=True)
        groups = {r[0]: r for r in rows}
        dash = groups["dash_group"]
        assert number(dash[1]) == sum(25 - o for o in DASH_GROUP_OFFSETS.values())
        fifo = groups["fifo_group"]
        assert (number(fifo[5]), number(fifo[6])) == (3, 1)  # in flight, blocked FIFO queues
        pop = groups["pop_group"]
        assert number(pop[5]) == 4 and number(pop[8]) == 1  # in flight, DLQ depth
        assert pop[9] == "GoldenTopicA"  # pop's own retry topic counts as retry, not as a topic
        # The highlighted group's queues follow the cursor.
        table = pilot.app.screen.query_one("#groups")
        table.focus()
        table.move_cursor(row=[r[0] for r in rows].index("dash_group"))
        await pilot.pause()
        queues = {number(r[1]): r for r in table_rows(pilot.app, "#group-queues")}
        assert {q: (number(r[2]), number(r[3]), number(r[4])) for q, r in queues.items()} == {
            q: (25, o, 25 - o) for q, o in DASH_GROUP_OFFSETS.items()}
        assert "Lag of dash_group: 60" in text_of(pilot.app, "#lag-label")
        table.move_cursor(row=[r[0] for r in rows].index("fifo_group"))
        await pilot.pause()
        blocked = [r for r in table_rows(pilot.app, "#group-queues") if r[6] == "BLOCKED"]
        assert len(blocked) == 1 and blocked[0][0] == "GoldenTopicB"


@run_async
async def test_timers_screen_shows_pending_timer_messages_and_due_histogram(golden_store):
    store = golden_store("store-timer")
    manifest = load_manifest("store-timer")
    delivered = {m["uniqKey"] for m in manifest["deliveredToRealTopic"]}
    pending = [m for m in manifest["messages"] if m["uniqKey"] not in delivered]
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("4")
        await pilot.pause()
        assert isinstance(pilot.app.screen, TimersScreen)
        assert text_of(pilot.app, "#timer-title") == f"Timer wheel: {len(pending)} pending"
        figures = {k: v for k, v in table_rows(pilot.app, "#timer-figures")}
        assert figures["Pending timer messages"] == str(len(pending)) == "6"
        assert figures["Lost to retention"] == "0"
        # Due in, from the screen's clock (5 s after the driver started): the manifest's delivery times.
        now = store.clock_ms
        expect = Counter()
        for m in pending:
            fires_in = m["timerOutMs"] + 1000 - now  # a slot fires at its end (timerPrecisionMs 1000)
            bucket = next(name for name, bound in (("next 10 s", 10_000), ("10 s - 1 min", 60_000),
                                                   ("1 - 10 min", 600_000), ("10 min - 1 h", 3_600_000),
                                                   ("later than 1 h", None)) if bound is None or fires_in <= bound)
            expect[bucket] += 1
        due = {r[0]: number(r[1]) for r in table_rows(pilot.app, "#due")}
        assert due == {b: expect.get(b, 0) for b in due}
        assert sum(due.values()) == 6
        levels = table_rows(pilot.app, "#delay-levels")
        assert [r[0] for r in levels] == [str(i) for i in range(1, 19)]
        assert {k for k, _ in table_rows(pilot.app, "#transactions")} >= {"Halves awaiting commit/rollback"}


@run_async
async def test_messages_screen_queries_by_key_and_browses_a_queue_page_by_page(golden_store):
    store = golden_store("store-basic")
    manifest = load_manifest("store-basic")
    hot = next(q for q in manifest["keyQueries"] if q["key"] == "hot" and q["topic"] == "GoldenTopicB")
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("5")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, MessagesScreen)
        screen.query_one("#topic", Input).value = "GoldenTopicB"
        screen.query_one("#value", Input).value = "hot"
        await pilot.click("#search")
        await _wait_for(pilot, lambda: "message(s)" in text_of(pilot.app, "#query-status"))
        rows = table_rows(pilot.app, "#results")
        assert len(rows) == len(hot["expectedPhysicalOffsets"])
        assert all("hot" in r[4].split(" ") for r in rows)
        detail = str(screen.query_one("#message").record.keys)
        assert "hot" in detail.split(" ")

        # Browse queue 1 of GoldenTopicA: pages of 20 (25 messages: 20, then 5).
        from textual.widgets import Select

        screen.query_one("#mode", Select).value = "browse"
        screen.query_one("#value", Input).value = ""
        screen.query_one("#queue", Input).value = "1"
        screen.query_one("#topic", Input).value = "GoldenTopicA"
        # The key query's status also says "message(s)": clear it so the wait sees the browse's answer.
        from textual.widgets import Label
        screen.query_one("#query-status", Label).update("")
        screen.search()  # what the Search button does (a click can land on a passing notification)
        await _wait_for(pilot, lambda: "message(s)" in text_of(pilot.app, "#query-status"))
        first = [number(r[1]) for r in table_rows(pilot.app, "#results")]
        assert first == list(range(20))
        screen.query_one("#results").focus()
        await pilot.press("n")
        await _wait_for(pilot, lambda: number(table_rows(pilot.app, "#results")[0][1]) == 20)
        assert [number(r[1]) for r in table_rows(pilot.app, "#results")] == list(range(20, 25))
        expected_ids = [m["uniqKey"] or m["offsetMsgId"] for m in sorted(
            (m for m in manifest["messages"] if m["topic"] == "GoldenTopicA" and m["queueId"] == 1),
            key=lambda m: m["queueOffset"])][20:]
        assert [r[2] for r in table_rows(pilot.app, "#results")] == expected_ids
        # The body view cycles auto -> text -> json -> hex.
        await pilot.press("b", "b", "b")
        assert screen.query_one("#message").view == "hex"


@run_async
async def test_acl_screen_lists_users_policies_and_explains_a_decision(golden_store):
    store = golden_store("store-basic")
    seed_acl(store)
    async with store.app().run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("6")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, AclScreen)
        assert by_first(pilot.app, "#users")["alice"][1:] == ["Normal", "enable"]
        policies = table_rows(pilot.app, "#acls")
        assert ["User:alice", "Custom", "Topic:GoldenTopicB", "Pub", "10.0.0.0/8", "Deny"] in policies
        screen.query_one("#explain-subject", Input).value = "User:alice"
        screen.query_one("#explain-resource", Input).value = "Topic:GoldenTopicB"
        screen.query_one("#explain-actions", Input).value = "Pub"
        screen.query_one("#explain-ip", Input).value = "10.1.2.3"
        await pilot.click("#explain")
        await _wait_for(pilot, lambda: "Decision" in text_of(pilot.app, "#explanation"))
        text = text_of(pilot.app, "#explanation")
        assert "Decision: Deny" in text
        assert "Decided by: Custom Topic:GoldenTopicB [Pub] from 10.0.0.0/8 Deny" in text


@run_async
async def test_help_quit_and_palette_actions(golden_store):
    store = golden_store("store-basic")
    app = store.app()
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for name in ("Show Overview", "Show Topics", "Show Consumers", "Show Timers", "Show Messages", "Show ACL",
                     "Refresh now", "Help", "Filter rows"):
            assert name in titles
        await pilot.press("3")
        await pilot.pause()
        assert "Reset offsets" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def _wait_for(pilot, condition, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except (IndexError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("the screen did not show the answer in time")
        await pilot.pause(0.05)


@run_async
async def test_a_refresh_or_lost_connection_before_a_new_screen_is_composed_is_shown_once_it_is(golden_store):
    """Pressing a screen's key switches to it at once, but it is composed a moment later: a refresh or a
    lost connection arriving in between crashed the dashboard (NoMatches '#acl-problem' on AclScreen).
    The screen shows the latest snapshot and banner itself when it comes into view."""
    from tui.poller import Poller

    store = golden_store("store-basic")
    async with store.app().run_test(size=SIZE) as pilot:
        app = pilot.app
        await first_refresh(pilot)
        for mode in ("acl", "timers"):
            app.switch_mode(mode)
            assert not app.screen.is_mounted
            app.on_poller_refreshed(Poller.Refreshed(app.snapshot))
            app.on_poller_connection_lost(Poller.ConnectionLost("broker gone", 1.0))
            app.on_poller_refreshed(Poller.Refreshed(app.snapshot))
            await pilot.pause()
            assert app.crash is None and app.is_running
        assert isinstance(app.screen, TimersScreen)
        assert text_of(app, "#timer-title").startswith("Timer wheel:")
