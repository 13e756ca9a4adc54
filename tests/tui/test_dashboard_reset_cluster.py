"""The reset dialog on a cluster of two brokers: what it says must be what happened.

A reset refused by the second broker after the first was changed says what was changed (it said
"nothing changed"); an apply that outlives the dashboard's call timeout says its outcome is not known
yet, naming the broker it waits on, and shows the real outcome when it ends, even after the dialog was
closed (it said "nothing changed" and was then applied in full); one queue is reset on the broker
chosen in the form (queue ids repeat across brokers: it was reset on every broker, or refused).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.widgets import Button, Input, Select
from tui_helpers import click_shown, first_refresh, run_async, table_rows, wait_until, widget_text
from tui_seed import SIZE

from broker_core.auth.model import Acl
from mqadmin.admin import Admin
from mqadmin.commands.dashboard import ClusterTarget
from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import TopicInfo
from mqadmin.transport.values import SubscriptionGroupInfo
from tests.net.harness import Servers
from tests.remoting_broker import BrokerProcess, running_broker
from tui.app import DashboardApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.consumers import ConsumersScreen
from tui.screens.reset import ResetScreen

TOPIC, GROUP = "ResetTopic", "reset_group"
ROOT = {"username": "rocketmq", "password": "12345678"}
OPS, OPS_SECRET = "ops", "ops-secret-1"


def _seed(admin: Admin, queues: dict[str, int], topic: str = TOPIC, group: str = GROUP) -> None:
    """``topic`` with ``queues[broker]`` queues on each broker, one message per queue, and ``group``'s
    offsets at 0 on every queue (a reset to "now" moves each to 1)."""
    brokers = sorted(admin.brokers(), key=lambda x: x.broker_name)
    for b in brokers:
        n = queues[b.broker_name]
        admin.update_topic(TopicInfo(topic, n, n, 6), [b])
        for q in range(n):
            admin.send_message(topic, f"{b.broker_name}-{q}".encode(), broker_name=b.broker_name, queue_id=q)
    admin.update_sub_group(SubscriptionGroupInfo(group), brokers)
    admin.reset_offset_by_time(group, topic, 0, offset=None)


def _offsets(admin: Admin, topic: str = TOPIC, group: str = GROUP) -> dict[tuple[str, int], int]:
    """``group``'s offset on each (broker, queue) of ``topic``."""
    return {(c.broker_name, c.queue_id): c.consumer_offset
            for c in admin.reset_offset_by_time(group, topic, 0, dry_run=True).changes}


def _status(screen: ResetScreen) -> str:
    return widget_text(screen.query_one("#reset-status"))


async def _open_reset(pilot, group: str = GROUP) -> ResetScreen:  # noqa: ANN001
    app = pilot.app
    await first_refresh(pilot, 2)
    await pilot.press("3")
    await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen) and bool(app.screen.query("#groups"))
                     and group in [r[0] for r in table_rows(app, "#groups")], "screen 3 listing the group")
    rows = [r[0] for r in table_rows(app, "#groups")]
    table = app.screen.query_one("#groups")
    table.focus()
    table.move_cursor(row=rows.index(group))
    await pilot.press("r")
    await wait_until(pilot, lambda: isinstance(app.screen, ResetScreen) and bool(app.screen.query("#plan")),
                     "the reset dialog")
    return app.screen


async def _plan(pilot, screen: ResetScreen) -> None:  # noqa: ANN001
    await click_shown(pilot, screen.query_one("#plan", Button))
    await wait_until(pilot, lambda: screen.planned is not None or "failed" in _status(screen)
                     or "Cannot" in _status(screen), "the plan")


async def _apply(pilot, screen: ResetScreen) -> None:  # noqa: ANN001
    await click_shown(pilot, screen.query_one("#apply", Button))
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the confirmation")
    await pilot.press("y")
    await wait_until(pilot, lambda: pilot.app.screen is screen, "the reset dialog after the confirmation")


def _told(app) -> list[str]:  # noqa: ANN001
    """What the app tells the user from now on (run_test draws no toasts): notify()'s messages."""
    messages: list[str] = []
    notify = app.notify

    def recording(message: str, **kwargs):  # noqa: ANN003, ANN202
        messages.append(message)
        return notify(message, **kwargs)

    app.notify = recording
    return messages


# ------------------------------------------------------------------ refused by the second broker


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """broker-a (no ACL) and broker-b (ACL 2.0: user ops may Sub/Get/List topics and groups, not Update);
    TOPIC with 2 queues on each, GROUP at 0 on every queue. Shared by the module's two tests: one only
    plans (refused), the other's apply is refused by broker-b, so neither needs the other's offsets."""
    s = Servers(tmp_path_factory.mktemp("acl"))
    try:
        s.add_broker("broker-a")
        s.add_broker("broker-b", props={"authenticationEnabled": "true", "authorizationEnabled": "true",
                                        "initAuthenticationUser": json.dumps(ROOT)})
        admin = open_remote_admin(s.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
        try:
            b = next(x for x in admin.brokers() if x.broker_name == "broker-b")
            admin.create_user(OPS, OPS_SECRET, broker_addrs=[b.broker_addr], read_back=False)
            admin.create_acl(Acl.of(f"User:{OPS}", ["Topic:*", "Group:*"], ["Sub", "Get", "List"]),
                             [b.broker_addr], read_back=False)
            _seed(admin, {"broker-a": 2, "broker-b": 2})
        finally:
            admin.close()
        yield s
    finally:
        s.close()


@run_async
async def test_a_reset_refused_by_the_second_broker_says_what_the_first_changed(acl_cluster: Servers):
    app = DashboardApp(ClusterTarget(acl_cluster.namesrv_addr, OPS, OPS_SECRET), refresh_s=0.5, call_timeout_s=20)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_reset(pilot)
        await _plan(pilot, screen)
        assert screen.planned is not None, _status(screen)
        await _apply(pilot, screen)
        await wait_until(pilot, lambda: "Reset" in _status(screen) or "Applied" in _status(screen), "the outcome")
        status = _status(screen)
        assert "nothing changed" not in status, status
        assert status.startswith("Reset failed part way: changed on broker-a ("), status
        assert "not changed on broker-b (" in status and f"User:{OPS} has no permission" in status, status
        assert screen.applied is None
    admin = open_remote_admin(acl_cluster.namesrv_addr, access_key=ROOT["username"], secret_key=ROOT["password"])
    try:
        assert _offsets(admin) == {("broker-a", 0): 1, ("broker-a", 1): 1, ("broker-b", 0): 0, ("broker-b", 1): 0}
    finally:
        admin.close()


@run_async
async def test_a_plan_refused_for_the_credentials_names_the_broker_and_what_to_do(acl_cluster: Servers):
    """Without --ak/--sk the plan said "Plan failed: username cannot be null.": no broker, no hint."""
    app = DashboardApp(ClusterTarget(acl_cluster.namesrv_addr), refresh_s=0.5, call_timeout_s=20)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_reset(pilot)
        await _plan(pilot, screen)
        b = next(x for x in app.snapshot.brokers if x.name == "broker-b").identity
        assert _status(screen) == (f"Plan failed: refused by {b.broker_addr}: username cannot be null. "
                                   "(give --ak/--sk of a user this broker knows)"), _status(screen)


# ------------------------------------------------------------------ one queue on the chosen broker


@pytest.fixture
def uneven_cluster(tmp_path: Path) -> Iterator[Servers]:
    """TOPIC with 4 queues on broker-a and 2 on broker-b, GROUP at 0 on every queue."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        s.add_broker("broker-b")
        admin = open_remote_admin(s.namesrv_addr)
        try:
            _seed(admin, {"broker-a": 4, "broker-b": 2})
        finally:
            admin.close()
        yield s
    finally:
        s.close()


@run_async
async def test_one_queue_is_reset_on_the_broker_chosen_in_the_form(uneven_cluster: Servers):
    app = DashboardApp(ClusterTarget(uneven_cluster.namesrv_addr), refresh_s=0.5, call_timeout_s=20)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_reset(pilot)
        broker = screen.query_one("#reset-broker", Select)
        await wait_until(pilot, lambda: broker.display, "the broker choice")
        screen.query_one("#reset-queue", Input).value = "3"
        await _plan(pilot, screen)
        # a queue id without a broker is refused, as mqadmin's -q without -b
        assert _status(screen).startswith("Cannot plan: a queue id needs a broker"), _status(screen)
        broker.value = "broker-a"
        await _plan(pilot, screen)
        assert screen.planned is not None, _status(screen)
        assert [r[:2] for r in table_rows(app, "#plan-table")] == [["broker-a", "3"]]
        await _apply(pilot, screen)
        await wait_until(pilot, lambda: screen.applied is not None or "failed" in _status(screen), "the reset")
        assert _status(screen).startswith("Applied: 1 queue(s)"), _status(screen)
    admin = open_remote_admin(uneven_cluster.namesrv_addr)
    try:
        moved = {k for k, v in _offsets(admin).items() if v}
        assert moved == {("broker-a", 3)}
    finally:
        admin.close()


@run_async
async def test_a_broker_not_in_the_plan_is_not_changed(tmp_path: Path):
    """The plan covered broker-a alone (the topic was on it only); broker-b got the topic before Apply.
    The apply went out without a broker address and reset broker-b too, which the plan never showed."""
    s = Servers(tmp_path)
    try:
        s.add_broker("broker-a")
        s.add_broker("broker-b")
        admin = open_remote_admin(s.namesrv_addr)
        try:
            a, b = sorted(admin.brokers(), key=lambda x: x.broker_name)
            admin.update_topic(TopicInfo(TOPIC, 1, 1, 6), [a])
            admin.send_message(TOPIC, b"a-0", broker_name="broker-a", queue_id=0)
            admin.update_sub_group(SubscriptionGroupInfo(GROUP), [a, b])
            admin.reset_offset_by_time(GROUP, TOPIC, 0, offset=None)
            app = DashboardApp(ClusterTarget(s.namesrv_addr), refresh_s=0.5, call_timeout_s=20)
            async with app.run_test(size=SIZE) as pilot:
                screen = await _open_reset(pilot)
                await _plan(pilot, screen)
                assert screen.planned is not None, _status(screen)
                assert [r[0] for r in table_rows(app, "#plan-table")] == ["broker-a"]
                admin.update_topic(TopicInfo(TOPIC, 1, 1, 6), [b])  # after the plan
                admin.send_message(TOPIC, b"b-0", broker_name="broker-b", queue_id=0)
                admin.reset_offset_by_time(GROUP, TOPIC, 0, offset=None, broker_addr=b.broker_addr)
                before = _offsets(admin)
                assert before == {("broker-a", 0): 0, ("broker-b", 0): 0}, before
                await _apply(pilot, screen)
                await wait_until(pilot, lambda: screen.applied is not None or "failed" in _status(screen),
                                 "the reset")
                assert _status(screen).startswith("Applied: 1 queue(s)"), _status(screen)
            assert _offsets(admin) == {("broker-a", 0): 1, ("broker-b", 0): 0}
        finally:
            admin.close()
    finally:
        s.close()


# ------------------------------------------------------------------ a broker that stops answering


@dataclass
class Stopping:
    """broker-a (it runs the name server) and broker-b, an Admin, and the topic and group of one test."""
    a: BrokerProcess
    b: BrokerProcess
    admin: Admin
    topic: str
    group: str


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """broker-a and broker-b as mqbroker processes (SIGSTOP needs a process), started once for the module:
    each test seeds a topic and group of its own (``stopping``) and resumes broker-b before it ends."""
    root = tmp_path_factory.mktemp("processes")
    with running_broker(root / "a") as a, \
            running_broker(root / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        yield a, b


def _answering(admin: Admin, *brokers: BrokerProcess) -> None:
    """Every broker running (not left stopped by a test) and answering its runtime info."""
    for p in brokers:
        assert p.proc.poll() is None, f"{p.broker_name} exited:\n{p.log_text()[-3000:]}"
        os.kill(p.proc.pid, signal.SIGCONT)  # a no-op unless a failed test left it stopped
        assert admin.broker_status(p.broker_addr), f"{p.broker_name} ({p.broker_addr}) does not answer"


_seeded = itertools.count(1)


@pytest.fixture
def stopping(two_processes: tuple[BrokerProcess, BrokerProcess]) -> Iterator[Stopping]:
    """The module's two processes with a topic of this test's own (1 queue on each broker) and its group
    at 0 on both queues: what one test resets is in no other test's plan."""
    a, b = two_processes
    n = next(_seeded)
    admin = open_remote_admin(a.namesrv_addr)
    try:
        _answering(admin, a, b)
        c = Stopping(a, b, admin, f"{TOPIC}{n}", f"{GROUP}_{n}")
        _seed(admin, {"broker-a": 1, "broker-b": 1}, c.topic, c.group)
        yield c
        _answering(admin, a, b)
    finally:
        admin.close()


@contextlib.asynccontextmanager
async def _applied_while_b_is_stopped(pilot, stopping: Stopping) -> AsyncIterator[tuple[ResetScreen, list[str]]]:  # noqa: ANN001
    """The group's reset planned, broker-b stopped (SIGSTOP; broker-a runs the name server) and Apply
    pressed: yields the dialog and what the app tells from just before the apply. broker-b is resumed
    when the block ends, however it ends, so a failing test leaves no stopped broker behind."""
    screen = await _open_reset(pilot, stopping.group)
    await _plan(pilot, screen)
    assert screen.planned is not None, _status(screen)
    told = _told(pilot.app)
    os.kill(stopping.b.proc.pid, signal.SIGSTOP)
    try:
        await _apply(pilot, screen)
        yield screen, told
    finally:
        os.kill(stopping.b.proc.pid, signal.SIGCONT)


@run_async
async def test_an_apply_that_outlives_the_timeout_says_unknown_then_its_real_outcome(stopping: Stopping):
    a, b, admin = stopping.a, stopping.b, stopping.admin
    app = DashboardApp(ClusterTarget(a.namesrv_addr), refresh_s=0.5, call_timeout_s=2.0)
    async with app.run_test(size=SIZE) as pilot:
        async with _applied_while_b_is_stopped(pilot, stopping) as (screen, _):
            await wait_until(pilot, lambda: _status(screen) != "Applying...", "the timeout")
        status = _status(screen)
        assert "nothing changed" not in status, status
        assert status.startswith("Outcome not known yet: the broker broker-b "
                                 f"({b.broker_addr}) did not answer within 2 s"), status
        assert "may still complete" in status, status
        await wait_until(pilot, lambda: status != _status(screen), "the real outcome")
        assert _status(screen).startswith("Applied: 2 queue(s)"), _status(screen)
        assert screen.applied is not None
    assert set(_offsets(admin, stopping.topic, stopping.group).values()) == {1}


@run_async
async def test_an_apply_still_running_when_the_dialog_closes_is_told_when_it_ends(stopping: Stopping):
    a, admin = stopping.a, stopping.admin
    app = DashboardApp(ClusterTarget(a.namesrv_addr), refresh_s=0.5, call_timeout_s=2.0)
    async with app.run_test(size=SIZE) as pilot:
        async with _applied_while_b_is_stopped(pilot, stopping) as (screen, told):
            assert _status(screen) == "Applying..."
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen), "the dialog closed")
        await wait_until(pilot, lambda: any("reset" in m for m in told[1:]), "the outcome told")
        assert "still being applied" in told[0], told
        assert told[-1].startswith("Applied: 2 queue(s) of group"), told
    assert set(_offsets(admin, stopping.topic, stopping.group).values()) == {1}


@run_async
async def test_quitting_while_a_reset_is_applied_asks_first(stopping: Stopping):
    """q during an apply closed the dashboard at once: the reset went on as the process exited, and its
    outcome was shown nowhere. Now q asks first; n keeps the dashboard, which then tells the outcome."""
    a, admin = stopping.a, stopping.admin
    app = DashboardApp(ClusterTarget(a.namesrv_addr), refresh_s=0.5, call_timeout_s=2.0)
    async with app.run_test(size=SIZE) as pilot:
        async with _applied_while_b_is_stopped(pilot, stopping) as (screen, told):
            await pilot.press("escape")  # the dialog closes; the apply goes on
            await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen), "the dialog closed")
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            assert "A reset is still being applied. Quit anyway?" in widget_text(app.screen.query_one("#question"))
            await pilot.press("n")
            await wait_until(pilot, lambda: isinstance(app.screen, ConsumersScreen), "the dashboard again")
            assert app.is_running
        await wait_until(pilot, lambda: any(m.startswith("Applied: 2 queue(s)") for m in told), "the outcome")
        await pilot.press("q")  # nothing being applied: quits at once
        await wait_until(pilot, lambda: not app.is_running, "the app to quit")
    assert set(_offsets(admin, stopping.topic, stopping.group).values()) == {1}
