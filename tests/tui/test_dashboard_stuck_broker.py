"""The dashboard beside a broker that accepts connections but answers nothing (stopped with SIGSTOP):
one-off reads answer from the other brokers and name the one left out, never stalling the refresh;
a timeout names the broker; the screens say which broker their figures exclude."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from textual.widgets import Input, Select
from tui_helpers import QuietAdmin, by_first, first_refresh, run_async, text_of, wait_until
from tui_seed import SIZE

from mqadmin.admin import Admin, BrokerIdentity
from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.connect import open_remote_admin
from mqadmin.errors import UnreachableError
from mqadmin.figures import GroupLag, QueueLag
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import QueueStatus, SubscriptionGroupInfo
from tests.remoting_broker import BrokerProcess, running_broker
from tui.app import DashboardApp
from tui.poller import Poller
from tui.screens.consumers import ConsumersScreen
from tui.screens.messages import ANY_BROKER, MessagesScreen
from tui.screens.overview import OverviewScreen

TIMEOUT_S = 2.0
BOTH = "OnBoth"
KEY = "order-7"
LAGGING = "LagOnBoth"


@dataclass
class Cluster:
    a: BrokerProcess
    b: BrokerProcess
    admin: Admin


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """broker-a and broker-b (two mqbroker processes, one name server) with topic OnBoth on both and one
    message keyed order-7 on each: started once for the module (two process starts cost seconds).

    Each test only reads OnBoth, or writes topics and groups of its own; it stops broker-b only inside
    ``stopped``, which resumes it, and ``cluster`` checks that it answers again before the next test."""
    tmp_path = tmp_path_factory.mktemp("stuck")
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        admin = open_remote_admin(a.namesrv_addr)
        try:
            admin.update_topic(TopicInfo(BOTH, 1, 1, 6))
            for name in ("broker-a", "broker-b"):
                admin.send_message(BOTH, name.encode(), keys=KEY, broker_name=name, queue_id=0)
            yield Cluster(a, b, admin)
        finally:
            admin.close()


def _answering(c: Cluster) -> None:
    """Both brokers running (broker-b not left stopped) and answering their runtime info."""
    for p in (c.a, c.b):
        assert p.proc.poll() is None, f"{p.broker_name} exited:\n{p.log_text()[-3000:]}"
    os.kill(c.b.proc.pid, signal.SIGCONT)  # a test that failed inside ``stopped`` resumed it already
    for p in (c.a, c.b):
        assert c.admin.broker_status(p.broker_addr), f"{p.broker_name} ({p.broker_addr}) does not answer"


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Iterator[Cluster]:
    """The module's two brokers, both answering when the test starts and when it ends."""
    _answering(shared_cluster)
    yield shared_cluster
    _answering(shared_cluster)


@contextmanager
def stopped(b: BrokerProcess) -> Iterator[None]:
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)


async def _stuck(pilot, app: DashboardApp, b: BrokerProcess) -> None:  # noqa: ANN001
    await wait_until(pilot, lambda: app.poller.stuck.why(b.broker_addr) is not None, "broker-b left out")
    await wait_until(pilot, lambda: app.snapshot is not None and app.snapshot.brokers[1].error is not None,
                     "a refresh without broker-b")


async def _messages_screen_once_stuck(pilot, app: DashboardApp, b: BrokerProcess) -> MessagesScreen:  # noqa: ANN001
    """The Messages screen, opened once ``b`` (stopped) is left out of the refresh."""
    await _stuck(pilot, app, b)
    await pilot.press("5")
    await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen), "the messages screen")
    return app.screen


@run_async
async def test_a_key_query_answers_from_the_healthy_broker_and_names_the_stuck_one(cluster: Cluster):
    app = DashboardApp(ClusterTarget(cluster.a.namesrv_addr), refresh_s=0.3, call_timeout_s=TIMEOUT_S)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        with stopped(cluster.b):
            screen = await _messages_screen_once_stuck(pilot, app, cluster.b)
            screen.query_one("#mode", Select).value = "key"
            screen.query_one("#topic", Input).value = BOTH
            screen.query_one("#value", Input).value = KEY
            await pilot.pause()
            refreshes = app.poller.refreshes
            screen.search()
            await wait_until(pilot, lambda: "message(s)" in text_of(app, "#query-status")
                             or "did not answer" in text_of(app, "#query-status"), "the key query")
            status = text_of(app, "#query-status")
            assert status.startswith(f"{BOTH} by key {KEY}: 1 message(s); not searched: "
                                     f"broker-b ({cluster.b.broker_addr}) (not answering"), status
            assert [r.body for r in screen.results] == [b"broker-a"]
            await wait_until(pilot, lambda: app.poller.refreshes > refreshes + 1, "refreshes after the query")
            assert app.lost is None and app.poller.failures == 0


@run_async
async def test_reading_the_stuck_broker_says_it_is_not_answering_not_that_it_does_not_exist(cluster: Cluster):
    app = DashboardApp(ClusterTarget(cluster.a.namesrv_addr), refresh_s=0.3, call_timeout_s=TIMEOUT_S)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        with stopped(cluster.b):
            screen = await _messages_screen_once_stuck(pilot, app, cluster.b)
            await wait_until(pilot, lambda: screen.query_one("#broker", Select).display, "the broker choice")
            screen.query_one("#broker", Select).value = "broker-b"
            screen.query_one("#topic", Input).value = BOTH
            screen.query_one("#queue", Input).value = "0"
            for mode, value in (("browse", ""), ("offset", "0")):
                screen.query_one("#mode", Select).value = mode
                screen.query_one("#value", Input).value = value
                await pilot.pause()
                screen.search()
                await wait_until(pilot, lambda: not text_of(app, "#query-status").endswith("..."), f"the {mode}")
                status = text_of(app, "#query-status")
                assert "on broker-b" in status and status.endswith(
                    f": broker broker-b ({cluster.b.broker_addr}) is not answering: left out until it answers"), status


@run_async
async def test_topics_and_consumers_say_their_figures_exclude_the_stuck_broker(cluster: Cluster):
    app = DashboardApp(ClusterTarget(cluster.a.namesrv_addr), refresh_s=0.3, call_timeout_s=TIMEOUT_S)
    note = (f"exclude broker-b ({cluster.b.broker_addr}): not answering, left out until it answers")
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("2")
        await wait_until(pilot, lambda: by_first(app, "#topics").get(BOTH, [""] * 6)[5] == "2",
                         "OnBoth's two messages")
        assert not app.screen.query_one("#topics-left-out").has_class("-shown")
        with stopped(cluster.b):
            await _stuck(pilot, app, cluster.b)
            await wait_until(pilot, lambda: by_first(app, "#topics").get(BOTH, [""] * 6)[5] == "1",
                             "OnBoth without broker-b's message")
            assert text_of(app, "#topics-left-out") == f"Queues, messages and put TPS {note}"
            await pilot.press("3")
            await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen), "the consumers screen")
            await wait_until(pilot, lambda: text_of(app, "#groups-left-out") != "", "the consumers' note")
            assert text_of(app, "#groups-left-out") == f"Lag, queues, retry and DLQ depth {note}"
            await pilot.press("1")
            await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen), "the overview")
            rows = by_first(app, "#brokers")
            # version, up time and disk used of a broker that did not answer are unknown: "0.0 %" read as
            # an empty disk
            assert rows["broker-b"][3:6] == ["-", "-", "-"], rows
            assert rows["broker-a"][5].endswith(" %"), rows
            await pilot.press("3")
            await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen), "the consumers screen again")
        await wait_until(pilot, lambda: app.poller.stuck.why(cluster.b.broker_addr) is None, "broker-b back")
        await wait_until(pilot, lambda: not app.screen.query_one("#groups-left-out").has_class("-shown"),
                         "the consumers' note gone")


class _SlowReadAdmin(QuietAdmin):
    """One broker that answers the refresh at once; ``slow_read`` hangs until ``release`` (a one-off
    read that meets a broker not yet known to be stuck)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.left_out: frozenset[str] = frozenset()
        self.me = BrokerIdentity("DefaultCluster", "broker-a", "127.0.0.1:1001")

    def registered_brokers(self) -> list[BrokerIdentity]:
        return [self.me]

    def slow_read(self) -> str:
        self.release.wait(10)
        return "late"


@dataclass
class _Target:
    admin: _SlowReadAdmin
    description: str = "name server 127.0.0.1:9876"
    reopen_each_refresh: bool = False

    def open(self, writes: bool = False) -> _SlowReadAdmin:
        return self.admin


class _Asker:
    def __init__(self) -> None:
        self.answers: list[Poller.Answer] = []

    def post_message(self, message: Poller.Answer) -> bool:
        self.answers.append(message)
        return True


def test_a_one_off_read_that_hangs_does_not_hold_up_the_refresh():
    release = threading.Event()
    poller = Poller(None, _Target(_SlowReadAdmin(release)), call_timeout_s=0.5)  # type: ignore[arg-type]
    asker = _Asker()

    async def both() -> None:
        read = asyncio.get_running_loop().create_task(
            poller.ask(asker, "messages", lambda a: a.slow_read()))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)  # the read holds its session's worker now
        snap = await poller.refresh_once()  # was queued behind the read: it timed out with it
        assert [b.error for b in snap.brokers] == [None]
        await read

    try:
        asyncio.run(both())
    finally:
        release.set()
        poller.close()
    assert [a.error for a in asker.answers] == ["the broker (name server 127.0.0.1:9876) did not answer within 0.5 s"]


A = BrokerIdentity("DefaultCluster", "broker-a", "127.0.0.1:1001")
B = BrokerIdentity("DefaultCluster", "broker-b", "127.0.0.1:1002")


class _HangsOnBAdmin(QuietAdmin):
    """broker-b (listed first) answers its runtime info but hangs in ``hang`` (topic_info, topic_status,
    list_groups or group_lag: stopped between two calls of a refresh) until ``release``; each fan-out asks ``among``
    or every broker not left out, as the Admin does."""

    def __init__(self, release: threading.Event, hang: str) -> None:
        self.release = release
        self.hang = hang
        self.left_out: frozenset[str] = frozenset()

    def _each(self, what: str, among: list[BrokerIdentity] | None) -> list[BrokerIdentity]:
        brokers = among if among is not None else [b for b in (B, A) if b.broker_addr not in self.left_out]
        if what == self.hang and B in brokers:
            self.release.wait(10)
        return brokers

    def registered_brokers(self) -> list[BrokerIdentity]:
        return [B, A]

    def list_topics(self) -> list[str]:
        return ["T"]

    def topic_info(self, topic: str, among: list[BrokerIdentity] | None = None) -> TopicInfo:
        self._each("topic_info", among)
        return TopicInfo(topic, 1, 1, 6)

    def topic_status(self, topic: str, among: list[BrokerIdentity] | None = None) -> list[QueueStatus]:
        return [QueueStatus(b.broker_name, 0, 0, 10, 0) for b in self._each("topic_status", among)]

    def list_groups(self, among: list[BrokerIdentity] | None = None) -> list[str]:
        self._each("list_groups", among)
        return ["G"]

    def group_lag(self, group: str, among: list[BrokerIdentity] | None = None) -> GroupLag:
        return GroupLag(group, [QueueLag("T", b.broker_name, 0, 10, 4, 0, False, 0)
                                for b in self._each("group_lag", among)], 0, 0)


class _RefusesBAdmin(_HangsOnBAdmin):
    """broker-b is still registered but refuses connections in ``hang`` (its host rebooting)."""

    def _each(self, what: str, among: list[BrokerIdentity] | None) -> list[BrokerIdentity]:
        brokers = among if among is not None else [b for b in (B, A) if b.broker_addr not in self.left_out]
        if what == self.hang and B in brokers:
            raise UnreachableError(f"cannot connect to {B.broker_addr}: connection refused")
        return brokers


@pytest.mark.parametrize("hang", ["topic_info", "topic_status", "list_groups", "group_lag"])
def test_a_broker_that_times_out_on_a_topic_or_group_is_named_and_left_out(hang: str):
    release = threading.Event()
    poller = Poller(None, _Target(_HangsOnBAdmin(release, hang)), call_timeout_s=0.3)  # type: ignore[arg-type]
    try:
        snap = asyncio.run(poller.refresh_once())
    finally:
        release.set()
        poller.close()
    why = poller.stuck.why(B.broker_addr)
    assert why is not None and why.startswith(
        f"the broker broker-b ({B.broker_addr}) via name server 127.0.0.1:9876 did not answer within 0.3 s"), why
    b, a = snap.brokers
    assert a.error is None and b.error == why
    read_before = ["broker-b"] if hang in ("list_groups", "group_lag") else []  # its topic was read before it hung
    assert [(t.name, [q.broker_name for q in t.queues]) for t in snap.topics] == [("T", [*read_before, "broker-a"])]
    assert [(g.group, [q.broker_name for q in g.queues]) for g in snap.groups] == [("G", ["broker-a"])]


@pytest.mark.parametrize("hang", ["topic_info", "list_groups"])
def test_a_registered_broker_that_refuses_connections_is_named_and_left_out(hang: str):
    """Every refresh failed ("Refresh failed: cannot connect to ...: connection refused") and the
    healthy brokers' figures went with it, as long as the name server listed the broker."""
    poller = Poller(None, _Target(_RefusesBAdmin(threading.Event(), hang)), call_timeout_s=0.3)  # type: ignore[arg-type]
    try:
        snap = asyncio.run(poller.refresh_once())
    finally:
        poller.close()
    why = poller.stuck.why(B.broker_addr)
    assert why is not None and why.startswith(f"cannot connect to {B.broker_addr}: connection refused at "), why
    b, a = snap.brokers
    assert a.error is None and b.error == why
    assert [(g.group, [q.broker_name for q in g.queues]) for g in snap.groups] == [("G", ["broker-a"])]


async def _query(pilot, app: DashboardApp, mode: str, value: str, broker: str = ANY_BROKER) -> str:  # noqa: ANN001
    """Run a query of OnBoth on the Messages screen (shown) and return its status line once answered."""
    screen = app.screen
    screen.query_one("#broker", Select).value = broker
    screen.query_one("#mode", Select).value = mode
    screen.query_one("#topic", Input).value = BOTH
    screen.query_one("#queue", Input).value = "0"
    screen.query_one("#value", Input).value = value
    await pilot.pause()
    screen.search()
    await wait_until(pilot, lambda: not text_of(app, "#query-status").endswith("..."), f"the {mode} query")
    return text_of(app, "#query-status")


async def _messages_screen(pilot, app: DashboardApp) -> MessagesScreen:  # noqa: ANN001
    await first_refresh(pilot)
    await pilot.press("5")
    await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen)
                     and app.screen.query_one("#broker", Select).display, "the messages screen with two brokers")
    return app.screen


@run_async
async def test_a_key_query_meeting_a_broker_hung_since_the_last_refresh_names_it_and_answers_from_the_other(
        cluster: Cluster):
    """It timed out as a whole: "the broker (name server ...) did not answer", the healthy broker's message
    lost, and the next query waited out the same timeout (nothing marked the broker stuck)."""
    # no refresh after the first: only the query itself can meet the hung broker
    app = DashboardApp(ClusterTarget(cluster.a.namesrv_addr), refresh_s=600, call_timeout_s=TIMEOUT_S)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _messages_screen(pilot, app)
        with stopped(cluster.b):
            status = await _query(pilot, app, "key", KEY)
            assert status.startswith(f"{BOTH} by key {KEY}: 1 message(s); not searched: "
                                     f"broker-b ({cluster.b.broker_addr}) (not answering"), status
            assert [r.body for r in screen.results] == [b"broker-a"]
            why = app.poller.stuck.why(cluster.b.broker_addr)
            assert why is not None and why.startswith(
                f"the broker broker-b ({cluster.b.broker_addr}) via name server {cluster.a.namesrv_addr} "
                f"did not answer within {TIMEOUT_S:g} s"), why
            # the next query leaves it out at once
            status = await _query(pilot, app, "uniq", "no-such-key")
            assert status.startswith(f"{BOTH} by unique key no-such-key: 0 message(s); not searched: "
                                     f"broker-b ({cluster.b.broker_addr})"), status


@run_async
async def test_a_browse_meeting_a_broker_hung_since_the_last_refresh_names_that_broker(cluster: Cluster):
    app = DashboardApp(ClusterTarget(cluster.a.namesrv_addr), refresh_s=600, call_timeout_s=TIMEOUT_S)
    async with app.run_test(size=SIZE) as pilot:
        await _messages_screen(pilot, app)
        with stopped(cluster.b):
            status = await _query(pilot, app, "browse", "", broker="broker-b")
            assert status == (f"queue 0 of {BOTH} on broker-b from offset its start: the broker broker-b "
                              f"({cluster.b.broker_addr}) via name server {cluster.a.namesrv_addr} did not answer "
                              f"within {TIMEOUT_S:g} s"), status
            assert app.poller.stuck.why(cluster.b.broker_addr) is not None
            status = await _query(pilot, app, "browse", "", broker="broker-a")
            assert status.startswith(f"queue 0 of {BOTH} on broker-a from offset its start: 1 message(s)"), status


@run_async
async def test_a_broker_left_out_takes_its_lag_with_it_without_a_time_to_drain(cluster: Cluster):
    """The time to drain came from the group's total lag over whichever brokers answered: broker-b (21 of
    the 22 messages behind) left out, the total fell to 1 and read as consuming fast ("0s")."""
    a, b = sorted(cluster.admin.brokers(), key=lambda x: x.broker_name)
    # a topic of its own, like OnBoth (one message on each broker) plus 20 more on broker-b: the other
    # tests count OnBoth's messages
    cluster.admin.update_topic(TopicInfo(LAGGING, 1, 1, 6), [a, b])
    for name in ("broker-a", "broker-b"):
        cluster.admin.send_message(LAGGING, name.encode(), broker_name=name, queue_id=0)
    for i in range(20):
        cluster.admin.send_message(LAGGING, f"b-{i}".encode(), broker_name="broker-b", queue_id=0)
    cluster.admin.update_sub_group(SubscriptionGroupInfo("G1"), [a, b])
    cluster.admin.reset_offset_by_time("G1", LAGGING, 0, offset=None)  # nothing consumed: all 22 behind
    app = DashboardApp(ClusterTarget(cluster.a.namesrv_addr), refresh_s=0.3, call_timeout_s=TIMEOUT_S)
    async with app.run_test(size=SIZE) as pilot:
        await first_refresh(pilot)
        await pilot.press("3")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen)
                         and by_first(app, "#groups").get("G1", [""] * 5)[1] == "22", "G1's lag of 22")
        refreshes = app.poller.refreshes
        await wait_until(pilot, lambda: app.poller.refreshes >= refreshes + 3, "a few refreshes of G1")
        assert by_first(app, "#groups")["G1"][4] == "-"
        with stopped(cluster.b):
            await _stuck(pilot, app, cluster.b)
            await wait_until(pilot, lambda: by_first(app, "#groups")["G1"][1] == "1", "G1 without broker-b")
            refreshes = app.poller.refreshes
            while app.poller.refreshes < refreshes + 3:
                row = by_first(app, "#groups")["G1"]
                assert row[1:5] == ["1", row[2], "0.0", "-"], row
                await pilot.pause(0.05)
