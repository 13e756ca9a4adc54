"""The one poller: it owns the Admin session, runs every Admin call off the UI thread with a timeout,
and turns the answers into Textual messages.

Why: screens never call the Admin (a slow broker must not freeze the UI, and a screen must not hold
a connection); they render ``Refreshed`` snapshots and send one-off questions through ``ask``, whose
answer comes back as an ``Answer`` message to the widget that asked. A broker that stops answering
is left out of the refreshes (shown as stuck) and probed apart until it answers again, so the other
brokers' figures go on. One-off reads (a key query, a browse) run on their own session, leaving out
the stuck brokers too: one that hangs fails only that read, never the refresh. A read aimed at one
broker (``ask(on=...)``), or a query asked of each broker of a route in turn (``ask_each_broker``),
names the broker that times out and leaves it out as stuck, as a refresh does. A refresh whose core (brokers, topics) fails or times out becomes ``ConnectionLost`` (the app shows a banner) and the poller retries
with a growing pause; a part that cannot be read (a damaged acls.json, say) is reported by the
snapshot itself, so the rest of the refresh still shows.
On a store directory the Admin is reopened every refresh, so a broker writing beside us is seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from textual.message import Message
from textual.message_pump import MessagePump

from mqadmin.admin import Admin, BrokerIdentity
from mqadmin.errors import AdminError, UnreachableError
from tui.errors import CallTimeout, describe_error
from tui.snapshot import GroupSweep, Snapshot, StuckBrokers, collect_snapshot, who_is

T = TypeVar("T")

MAX_RETRY_PAUSE_S = 10.0


class AdminTarget(Protocol):
    """Where the dashboard looks: opens an Admin (read-only for watching, writable for a reset)."""

    description: str
    reopen_each_refresh: bool

    def open(self, writes: bool = False) -> Admin: ...


class AdminSession:
    """One Admin opened lazily on one worker thread; calls run there in order, each with a timeout."""

    def __init__(self, target: AdminTarget, writes: bool = False) -> None:
        self.target = target
        self.writes = writes
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-admin")
        self._admin: Admin | None = None
        self.broken = False

    def _run(self, fn: Callable[[Admin], T]) -> T:
        if self._admin is None:
            self._admin = self.target.open(self.writes)
        return fn(self._admin)

    def _release(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            admin.close()

    async def call(self, fn: Callable[[Admin], T], timeout: float, who: str | None = None) -> T:
        """``who``: the broker the call goes to, when one is (a timeout then names it: with several
        brokers behind a name server, naming the name server does not say which one is stuck)."""
        future = asyncio.get_running_loop().run_in_executor(self._executor, self._run, fn)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the call's result when the
            # task is cancelled just as the call completes, and the cancellation is lost (the refresh
            # loop then ran on after the dashboard had quit, and the process never exited)
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            self.broken = True  # the thread may still be inside the call: never reuse this session
            what = f"{who} via {self.target.description}" if who else f"the broker ({self.target.description})"
            raise CallTimeout(what, timeout) from None

    async def call_to_end(self, fn: Callable[[Admin], T], timeout: float, slow: Callable[[str], None],
                          who: Callable[[], str | None] = lambda: None) -> T:
        """``fn``, waited for until it ends: after ``timeout`` ``slow`` is told why the wait goes on (naming
        ``who()``, the broker the call is on then, when known). Why not ``call``: a change cannot be
        stopped once sent (the thread carries on with the next broker), so giving up the wait only hid
        what it did: a timed-out reset said "nothing changed" and was then applied in full."""
        future = asyncio.get_running_loop().run_in_executor(self._executor, self._run, fn)
        try:
            async with asyncio.timeout(timeout):  # see ``call``; shielded: the wait goes on after it
                return await asyncio.shield(future)
        except TimeoutError:
            self.broken = True
            slow(CallTimeout(who() or f"the broker ({self.target.description})", timeout).message)
        return await future

    async def release(self) -> None:
        """Close the Admin after the calls queued so far (the next call reopens it)."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._release)

    def close(self) -> None:
        """Close without waiting: a call stuck on a dead broker must not hold up the UI."""
        try:
            self._executor.submit(self._release)
        except RuntimeError:
            pass
        self._executor.shutdown(wait=False)


class Poller:
    """Refreshes every ``refresh_s`` and posts ``Refreshed`` / ``ConnectionLost`` to ``owner``."""

    @dataclass
    class Refreshed(Message):
        snapshot: Snapshot

    @dataclass
    class ConnectionLost(Message):
        reason: str
        retry_in_s: float

    @dataclass
    class Answer(Message):
        """The result of ``ask``: ``value`` or ``error`` (one line), tagged as the asker chose."""

        tag: str
        value: Any = None
        error: str | None = None

    def __init__(self, owner: MessagePump, target: AdminTarget, refresh_s: float = 1.0,
                 call_timeout_s: float = 5.0, clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.owner = owner
        self.target = target
        self.refresh_s = refresh_s
        self.call_timeout_s = call_timeout_s
        self.clock_ms = clock_ms
        self._session: AdminSession | None = None
        self._ask_session: AdminSession | None = None
        self.stuck = StuckBrokers()
        self.sweep = GroupSweep()
        """Which groups hold offsets where, asked a slice of topics a refresh (see ``GroupSweep``)."""
        self._probes: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self.failures = 0
        self.total_failures = 0
        self.refreshes = 0
        self.many_brokers = False
        """The last refresh saw several brokers: only then is a broker that times out left out (the only
        one's timeout fails the refresh, as it always did)."""

    def session(self) -> AdminSession:
        if self._session is None or self._session.broken:
            if self._session is not None:
                self._session.close()
            self._session = AdminSession(self.target)
        return self._session

    def _leaving_out_stuck(self, fn: Callable[[Admin], T], left_out: frozenset[str] | None = None
                           ) -> Callable[[Admin], T]:
        """``fn`` on an Admin that leaves the brokers stuck now (or ``left_out``) out of every fan-out."""
        left_out = self.stuck.addrs() if left_out is None else left_out

        def leaving_out_stuck(admin: Admin) -> T:
            admin.left_out = left_out
            return fn(admin)

        return leaving_out_stuck

    async def call(self, fn: Callable[[Admin], T], who: str | None = None) -> T:
        """``fn`` on the refresh session's Admin, which leaves the stuck brokers out of every fan-out."""
        return await self.session().call(self._leaving_out_stuck(fn), self.call_timeout_s, who)

    async def _ask_call(self, fn: Callable[[Admin], T], who: str | None = None,
                        left_out: frozenset[str] | None = None) -> T:
        """``fn`` on the session for one-off reads. Why not the refresh session: its one worker runs
        calls in turn, so a read stuck on a broker held every refresh call behind it until they timed
        out (the banner came up while the healthy brokers answered), and its timeout broke that session.
        ``who``: the broker ``fn`` goes to, named by its timeout; ``left_out``: the brokers its fan-outs
        leave out (default the stuck ones)."""
        if self._ask_session is None or self._ask_session.broken:
            if self._ask_session is not None:
                self._ask_session.close()
            self._ask_session = AdminSession(self.target)
        session = self._ask_session
        value = await session.call(self._leaving_out_stuck(fn, left_out), self.call_timeout_s, who)
        if self.target.reopen_each_refresh:
            await session.release()
        return value

    async def _ask_broker(self, b: BrokerIdentity, fn: Callable[[Admin], T],
                          left_out: frozenset[str] | None = None) -> T:
        """``fn``, a read of ``b`` alone: a timeout names ``b`` and, with several brokers, leaves it out
        as stuck (a key query that met a broker hung since the last refresh blamed the name server, and
        the next query waited out the same timeout again)."""
        try:
            return await self._ask_call(fn, who_is(b), left_out)
        except (CallTimeout, UnreachableError) as e:  # hung, or still registered but refusing connections
            if self.many_brokers and self.stuck.why(b.broker_addr) is None:  # not the Admin's "left out"
                self.stuck.add(b.broker_addr, e, self.clock_ms())
            raise

    async def _each_broker(self, route: Callable[[Admin], list[BrokerIdentity]],
                           fn: Callable[[Admin], list[T]]) -> tuple[list[T], list[str]]:
        """``fn`` asked of each broker of ``route`` (read first, from the name server) in turn, each alone
        (the others left out of its fan-out); returns what they found and the brokers not searched, as
        "name (address)": those stuck before, and those that timed out now (then left out as stuck).
        Why broker by broker: a query that fans out in one call timed out as a whole, naming no broker
        and dropping what the healthy brokers had found."""
        brokers, registered = await self._ask_call(lambda a: (route(a), a.registered_brokers()))
        everyone = frozenset(b.broker_addr for b in [*brokers, *registered])
        found: list[T] = []
        skipped: list[BrokerIdentity] = []
        for b in brokers:
            if self.stuck.why(b.broker_addr) is not None:
                skipped.append(b)
                continue
            try:
                found.extend(await self._ask_broker(b, fn, everyone - {b.broker_addr}))
            except (CallTimeout, UnreachableError):
                if not self.many_brokers:
                    raise
                skipped.append(b)
        if brokers and len(skipped) == len(brokers):
            raise AdminError("; ".join(f"{b.broker_name} ({b.broker_addr}): {self.stuck.why(b.broker_addr)}"
                                       for b in skipped))
        return found, [f"{b.broker_name} ({b.broker_addr})" for b in skipped]

    def _probe_stuck(self) -> None:
        """One probe in flight per stuck broker, each on its own session (a probe that hangs too must
        not hold up the refresh); the broker is asked again from the refresh after it answers."""
        for addr in self.stuck.addrs():
            task = self._probes.get(addr)
            if task is None or task.done():
                self._probes[addr] = asyncio.get_running_loop().create_task(self._probe(addr))

    async def _probe(self, addr: str) -> None:
        session = AdminSession(self.target)
        try:
            await session.call(lambda a: a.broker_status(addr), self.call_timeout_s, addr)
        except (CallTimeout, UnreachableError):
            return  # still stuck (or still refusing connections): the next refresh probes again
        except Exception:  # noqa: BLE001 - any answer, an error too, means it no longer hangs
            pass
        finally:
            session.close()
        self.stuck.forget(addr)

    def refresh_now(self) -> None:
        """Cut the current pause short (the 'retry now' / 'refresh now' actions)."""
        self._wake.set()

    async def refresh_once(self) -> Snapshot:
        self._probe_stuck()
        snap = await collect_snapshot(self.call, self.clock_ms(), self.stuck, self.sweep)
        self.many_brokers = snap.many_brokers
        if self.target.reopen_each_refresh and self._session is not None and not self._session.broken:
            await self._session.release()
        return snap

    async def run(self) -> None:
        """The refresh loop (run it as a Textual worker)."""
        while True:
            pause = self.refresh_s
            try:
                snap = await self.refresh_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any failure is a lost connection, shown and retried
                self.failures += 1
                self.total_failures += 1
                if self._session is not None:
                    self._session.close()
                    self._session = None
                pause = min(self.refresh_s * 2 ** min(self.failures - 1, 6), MAX_RETRY_PAUSE_S)
                self.owner.post_message(self.ConnectionLost(describe_error(e), pause))
            else:
                self.failures = 0
                self.refreshes += 1
                self.owner.post_message(self.Refreshed(snap))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):  # asyncio.timeout: see AdminSession.call
                async with asyncio.timeout(pause):
                    await self._wake.wait()

    async def ask(self, requester: MessagePump, tag: str, fn: Callable[[Admin], Any],
                  on: BrokerIdentity | None = None) -> None:
        """Run one Admin read for ``requester`` and post it the ``Answer`` (changes go through ``write``).
        ``on``: the broker a read goes to alone (its timeout names it and leaves it out, see ``_ask_broker``)."""
        await self._answer(requester, tag, lambda: self._ask_one(fn, on))

    async def write(self, fn: Callable[[Admin], T], slow: Callable[[str], None],
                    who: Callable[[], str | None] = lambda: None) -> T:
        """Run a change on its own writable Admin and wait until it ends, however long: past the call
        timeout ``slow`` is told (with the broker ``who()`` names, if any), then the wait goes on. The
        caller reports the real outcome, which a timeout cannot know (see ``AdminSession.call_to_end``)."""
        session = AdminSession(self.target, writes=True)
        try:
            value = await session.call_to_end(fn, self.call_timeout_s, slow, who)
            await session.release()
        finally:
            session.close()
        return value

    async def ask_each_broker(self, requester: MessagePump, tag: str, route: Callable[[Admin], list[BrokerIdentity]],
                              fn: Callable[[Admin], list[Any]]) -> None:
        """Ask ``fn`` (a read that would fan out over ``route``'s brokers) of each of them in turn and post
        ``requester`` the ``Answer``: (everything found, the brokers not searched) (see ``_each_broker``)."""
        await self._answer(requester, tag, lambda: self._each_broker(route, fn))

    async def _answer(self, requester: MessagePump, tag: str, read: Callable[[], Awaitable[Any]]) -> None:
        try:
            value = await read()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - reported to the asker as one line
            requester.post_message(self.Answer(tag, error=describe_error(e)))
            return
        requester.post_message(self.Answer(tag, value=value))

    async def _ask_one(self, fn: Callable[[Admin], Any], on: BrokerIdentity | None) -> Any:
        return await (self._ask_call(fn) if on is None else self._ask_broker(on, fn))

    def close(self) -> None:
        for task in self._probes.values():
            task.cancel()
        self._probes.clear()
        for session in (self._session, self._ask_session):
            if session is not None:
                session.close()
        self._session = self._ask_session = None
