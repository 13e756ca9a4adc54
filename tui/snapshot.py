"""One refresh's worth of Admin answers, and the history that turns successive refreshes into rates.

Why a module: every screen renders from the same immutable ``Snapshot`` (so they never disagree and
never call the Admin themselves), and rates (put/consume TPS, lag trend, time to drain) are derived
here from offsets over time. Deriving them from offsets works the same on a running cluster and on a
store directory opened read-only, where the broker's in-process counters are not visible.

A refresh reads its core (brokers, topics) all or nothing: without them nothing can be shown, and
their failure is what the poller reports as a lost broker. One exception: a topic the broker refuses
with NO_PERMISSION (a Normal ACL user may read only some of the topics the name server lists, the
cluster-name topic among them) is left out and named (``Snapshot.topics_refused``), as a refused group
is; one such topic used to fail every refresh. The other parts (a broker's runtime
figures, consumer groups, users and ACLs) each live in their own files, so one damaged file (an
acls.json cut short, say) must not blank every screen: such a part comes back empty with its error,
which the screens that show it print, and the rest of the refresh is shown as usual. A timeout is
never a part's failure: the session behind it is dropped. A call to one broker that times out (its
runtime info, a topic's or a group's figures on it, its users) marks that broker stuck
(``StuckBrokers``) and the refresh goes on without it; a timeout of a call to the name server, or of
the only broker, fails the whole refresh. That is why topics and groups are read one broker per call:
a timeout of a fan-out over several brokers could only blame the name server. A broker that refuses
the credentials (ACL on there, and no --ak/--sk or ones it does not know) is left out of the refresh
the same way, named with its refusal and what to do, and asked again in the next refresh.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from broker_core.auth.authentication import CHECK_SIGNATURE_FAILED, DATETIME_NULL, USERNAME_NULL
from broker_core.auth.model import Acl, User
from mqadmin.admin import Admin, BrokerIdentity, TopicInfo
from mqadmin.errors import AdminError, NoPermissionError, NotFoundError, UnreachableError
from mqadmin.figures import (
    DelayLevelInfo,
    GroupLag,
    StorePositionsInfo,
    TimerBacklogInfo,
    TransactionBacklogInfo,
    delay_levels_from,
    store_positions_from,
    timer_backlog_from,
    transaction_backlog_from,
)
from mqadmin.transport.values import ConsumeQueueStats, QueueStatus
from tui.errors import CallTimeout, describe_error

T = TypeVar("T")

HISTORY_POINTS = 300
"""Samples kept for sparklines and rates (five minutes at the default one-second refresh)."""

RATE_WINDOW = 10
"""Samples a rate is averaged over (smooths offsets that move in flush-sized steps)."""


@dataclass(frozen=True)
class TopicSnapshot:
    info: TopicInfo
    queues: list[QueueStatus]

    @property
    def name(self) -> str:
        return self.info.topic_name

    @property
    def messages(self) -> int:
        return sum(max(0, q.max_offset - q.min_offset) for q in self.queues)

    @property
    def max_offset_sum(self) -> int:
        return sum(q.max_offset for q in self.queues)

    @property
    def last_store_ms(self) -> int:
        return max((q.last_update_timestamp for q in self.queues), default=0)


@dataclass(frozen=True)
class BrokerView:
    """One broker's runtime info and the figures parsed from it; ``error`` says why the runtime info
    could not be read (then ``status`` is empty and the figures are not shown)."""

    identity: BrokerIdentity
    status: dict[str, str]
    error: str | None = None

    @property
    def name(self) -> str:
        return self.identity.broker_name

    @property
    def positions(self) -> StorePositionsInfo:
        return store_positions_from(self.status)

    @property
    def timer(self) -> TimerBacklogInfo | None:
        return timer_backlog_from(self.status)

    @property
    def delay_levels(self) -> list[DelayLevelInfo]:
        return delay_levels_from(self.status)

    @property
    def transactions(self) -> TransactionBacklogInfo:
        return transaction_backlog_from(self.status)


@dataclass(frozen=True)
class AclView:
    """One broker's users and ACLs. Why per broker: each broker keeps its own (nothing replicates
    them), so the first broker's alone hid the others'; ``auth_enabled`` says whether the broker
    checks them at all (None: its config could not be read), so an empty list is explained."""

    identity: BrokerIdentity
    users: list[User]
    acls: list[Acl]
    error: str | None = None
    auth_enabled: bool | None = None

    @property
    def name(self) -> str:
        return self.identity.broker_name


@dataclass(frozen=True)
class Snapshot:
    """Everything the six screens show, read in one refresh."""

    taken_ms: int
    brokers: list[BrokerView]
    topics: list[TopicSnapshot]
    groups: list[GroupLag]
    users: list[User]
    acls: list[Acl]
    groups_error: str | None = None
    """Why some or all consumer groups could not be read (those read are in ``groups``)."""
    acl_error: str | None = None
    """Why the users or ACLs could not be read (e.g. a damaged config/acls.json), naming the broker
    when there are several."""
    acl_views: list[AclView] = field(default_factory=list)
    """Every broker's users and ACLs (``users``/``acls`` are all of them together)."""
    left_out: list[BrokerIdentity] = field(default_factory=list)
    """Brokers left out of this refresh as not answering (stuck) or refusing the credentials (why: their
    ``BrokerView.error``): their queues, messages and lag are in no figure of it, which the screens
    showing totals say."""
    topics_refused: list[str] = field(default_factory=list)
    """Topics listed by the name server that no broker answering would let this user read (NO_PERMISSION):
    not in ``topics``."""
    topics_in_part: list[str] = field(default_factory=list)
    """Topics in ``topics`` without the queues of a broker that refused them (NO_PERMISSION there)."""

    @property
    def topics_problem(self) -> str | None:
        """One line on the topics left out for want of permission (None when there are none)."""
        parts = []
        if self.topics_refused:
            total = len(self.topics) + len(self.topics_refused)
            parts.append(f"{len(self.topics_refused)} of {total} topics not shown: no permission to read "
                         f"{_some(self.topics_refused)}")
        if self.topics_in_part:
            parts.append(f"{len(self.topics_in_part)} shown without the queues of a broker that refuses them "
                         f"(no permission): {_some(self.topics_in_part)}")
        return "; ".join(parts) if parts else None

    @property
    def refusing(self) -> frozenset[str]:
        """Addresses of the brokers left out because they refused the credentials (not stuck: each refresh
        asks them again), as opposed to not answering."""
        return frozenset(b.identity.broker_addr for b in self.brokers
                         if b.error is not None and b.error.startswith(REFUSED_PREFIX))

    @property
    def identity(self) -> BrokerIdentity:
        """The first broker (the one ACL and message queries go to when none is named)."""
        return self.brokers[0].identity

    @property
    def many_brokers(self) -> bool:
        """More than one broker: queue rows then name their broker (queue ids repeat across brokers)."""
        return len(self.brokers) > 1

    def topic(self, name: str) -> TopicSnapshot | None:
        return next((t for t in self.topics if t.name == name), None)

    def group(self, name: str) -> GroupLag | None:
        return next((g for g in self.groups if g.group == name), None)

    @property
    def status_error(self) -> str | None:
        """Why the runtime info of some brokers cannot be read, in one line (None when all were read)."""
        failed = [b for b in self.brokers if b.error is not None]
        if not failed:
            return None
        if len(self.brokers) == 1:
            return failed[0].error
        return "; ".join(f"{b.name}: {b.error}" for b in failed)

    @property
    def total_lag(self) -> int:
        return sum(g.total_lag for g in self.groups)


# how a broker left out for refusing the credentials is described (its BrokerView.error starts so)
REFUSED_PREFIX = "refused: "


class AdminCall(Protocol):
    """How the poller runs one Admin call (on its worker thread, with its timeout); ``who`` names the
    broker the call goes to, for the timeout's message."""

    def __call__(self, fn: Callable[[Admin], T], who: str | None = None) -> Awaitable[T]: ...


class StuckBrokers:
    """Brokers whose call timed out (or could not connect), left out of every later call until one of
    them answers again. A broker the name server still lists but that refuses connections (its host
    rebooting, for up to the name server's 120 s channel expiry) blanked every refresh the same way.

    Why: a broker that hangs (SIGSTOP, a stalled disk) stays registered and answers nothing, so asking
    it in each refresh made every refresh wait out the timeout and fail: the healthy brokers' figures
    stopped with it. Now the refresh that meets the timeout marks the broker, the others carry on, and
    the poller probes the marked ones apart until each answers."""

    def __init__(self) -> None:
        self._why: dict[str, str] = {}

    def addrs(self) -> frozenset[str]:
        return frozenset(self._why)

    def why(self, addr: str) -> str | None:
        return self._why.get(addr)

    def add(self, addr: str, failure: CallTimeout | UnreachableError, at_ms: int) -> str:
        at = time.strftime("%H:%M:%S", time.localtime(at_ms / 1000))
        self._why[addr] = f"{failure.message} at {at}; left out of the refresh until it answers"
        return self._why[addr]

    def forget(self, addr: str) -> None:
        self._why.pop(addr, None)

    def keep_only(self, addrs: set[str]) -> None:
        """Forget brokers no longer registered (the name server dropped them: History says so)."""
        for addr in [a for a in self._why if a not in addrs]:
            del self._why[addr]


class _LeftOut(Exception):
    """A call to one broker timed out and that broker joined the stuck ones (``_Brokers.ask``)."""


class _Brokers:
    """One refresh's calls aimed at one broker each. Why: a timeout then names its broker (a fan-out's
    blamed the name server), the broker joins ``stuck`` and the refresh goes on with the others,
    instead of every refresh failing on it; with a single broker its timeout fails the refresh, as ever.
    The brokers left out are fixed for the refresh (a probe answering meanwhile counts from the next)."""

    def __init__(self, call: AdminCall, stuck: StuckBrokers, registered: list[BrokerIdentity],
                 taken_ms: int) -> None:
        self.call = call
        self.stuck = stuck
        self.registered = registered
        self.taken_ms = taken_ms
        self.why = {b.broker_addr: why for b in registered if (why := stuck.why(b.broker_addr)) is not None}

    def answering(self) -> list[BrokerIdentity]:
        return [b for b in self.registered if b.broker_addr not in self.why]

    async def ask(self, b: BrokerIdentity, fn: Callable[[Admin], T]) -> T:
        """``fn`` (a call to ``b`` alone); raises ``_LeftOut`` once ``b`` timed out and was left out."""
        try:
            return await self.call(fn, who_is(b))
        except (CallTimeout, UnreachableError) as e:  # hung, or still registered but refusing connections
            if len(self.registered) == 1:
                raise
            self.why[b.broker_addr] = self.stuck.add(b.broker_addr, e, self.taken_ms)
            raise _LeftOut(b.broker_addr) from None

    def refused(self, b: BrokerIdentity, why: str) -> None:
        """Leave ``b`` out of this refresh: it refused the credentials (ACL on there, and no --ak/--sk,
        or ones it does not know). Every call to it would be refused alike, and one refused topic read
        failed the whole refresh ("Refresh failed: username cannot be null.", no broker named) while the
        other brokers were readable. Not stuck: the next refresh asks it again (its users may change)."""
        self.why[b.broker_addr] = f"{REFUSED_PREFIX}{with_credentials_hint(why)}"

    def on(self, b: BrokerIdentity) -> AdminCall:
        """``ask`` as an ``AdminCall`` (for ``_part``)."""
        return lambda fn, who=None: self.ask(b, fn)

    def check_some_answer(self) -> None:
        """Fail the refresh, naming every broker and why, when none is left to ask."""
        if not self.answering():
            raise AdminError("; ".join(f"{b.broker_name}: {self.why[b.broker_addr]}" for b in self.registered))


_CREDENTIALS_REFUSED = (USERNAME_NULL, CHECK_SIGNATURE_FAILED, DATETIME_NULL)
_USER_REFUSED = re.compile(r"\bUser:\S* is (?:not found|disabled)\.")


def credentials_refused(message: str) -> bool:
    """Whether ``message`` is a broker's refusal of the request's credentials (its authentication, the
    same words as Apache's broker), as opposed to a refusal of what was asked."""
    return any(m in message for m in _CREDENTIALS_REFUSED) or _USER_REFUSED.search(message) is not None


def with_credentials_hint(message: str) -> str:
    """``message``, with what to do when it is a refusal of the credentials."""
    return f"{message} (give --ak/--sk of a user this broker knows)" if credentials_refused(message) else message


def who_is(b: BrokerIdentity) -> str:
    """``b`` as a timeout names it (see ``AdminSession.call``)."""
    return f"the broker {b.broker_name} ({b.broker_addr})"


SWEEP_TOPICS = 64
"""Topics a refresh asks each broker which groups hold offsets on (QUERY_TOPIC_CONSUME_BY_WHO), in turn."""


REFUSED: list[str] = []
"""A sweep answer: the broker would not say who consumes the topic (NO_PERMISSION); no group is taken
from it, and no group's topics are known for sure while one stands (``GroupSweep.topics_of``)."""


class GroupSweep:
    """Which groups hold offsets on each topic of each broker, asked a slice of topics a refresh.

    Why: a group is listed when it has a subscription config (one GET_ALL_SUBSCRIPTIONGROUP_CONFIG a
    broker) or holds offsets on some topic (a group deleted without its offsets, offsets cloned to a new
    group); the latter took a QUERY_TOPIC_CONSUME_BY_WHO per topic, 1,500 requests in every refresh at
    1,500 topics. Apache's broker serves no request listing every group that holds offsets, so the
    answers are kept here: a topic is asked in the first refresh that sees it (the first screen lists
    every group, as ever), then ``per_refresh`` topics a broker again each refresh, oldest answer first, so a group that starts (or stops)
    holding offsets without a config shows up (or goes) within topics / ``per_refresh`` refreshes; one
    with a config at once. ``per_refresh`` None asks every topic each refresh (the one-off read of a
    caller that keeps no sweep). The answers also say which topics a group holds offsets on, which
    decides whether GET_BROKER_CONSUME_STATS' rows are its figures (``_same_as_group_read``)."""

    def __init__(self, per_refresh: int | None = SWEEP_TOPICS) -> None:
        self.per_refresh = per_refresh
        self._answers: dict[str, dict[str, list[str] | str]] = {}
        """broker address -> topic -> the groups holding offsets on it, or why the broker refused to say."""
        self._topics: dict[str, frozenset[str]] = {}
        """broker address -> its topics when last swept (an answer of each is needed to know a group's)."""

    def due(self, addr: str, topics: list[str]) -> list[str]:
        """The topics of ``topics`` to ask ``addr`` now: those never asked, then the longest unasked;
        answers of topics the broker no longer has are dropped."""
        self._topics[addr] = frozenset(topics)
        if addr not in self._answers:  # the first refresh lists every group, as it always did
            self._answers[addr] = {}
            return list(topics)
        known = self._answers[addr]
        present = set(topics)
        for gone in [t for t in known if t not in present]:
            del known[gone]
        new = [t for t in topics if t not in known]  # all at once: until then no group's topics are known
        return new + list(known) if self.per_refresh is None else new + list(known)[:self.per_refresh]

    def answer(self, addr: str, topic: str, groups: list[str] | str) -> None:
        """Keep ``topic``'s answer (groups, or the refusal's one line) as the newest of ``addr``'s."""
        known = self._answers.setdefault(addr, {})
        known.pop(topic, None)
        known[topic] = groups

    def groups(self, addr: str) -> tuple[set[str], str | None]:
        """Every group holding offsets on ``addr`` as last answered, and the first refusal (then, as when
        the broker was asked every topic, its groups cannot be listed)."""
        groups: set[str] = set()
        for got in self._answers.get(addr, {}).values():
            if isinstance(got, str):
                return set(), got
            groups.update(got)  # REFUSED adds none
        return groups, None

    def topics_of(self, addr: str, group: str) -> frozenset[str] | None:
        """The topics ``group`` holds offsets on at ``addr`` as last answered; None until every topic of
        ``addr`` has been asked at least once (the set could still miss one)."""
        known = self._answers.get(addr)
        if known is None or not self._topics.get(addr, frozenset()) <= known.keys() \
                or any(got is REFUSED for got in known.values()):
            return None
        return frozenset(t for t, got in known.items() if not isinstance(got, str) and group in got)

    def keep_only(self, addrs: set[str]) -> None:
        for addr in [a for a in self._answers if a not in addrs]:
            del self._answers[addr]
            self._topics.pop(addr, None)


async def collect_snapshot(call: AdminCall, taken_ms: int, stuck: StuckBrokers | None = None,
                           sweep: GroupSweep | None = None) -> Snapshot:
    """Read every figure the dashboard shows through the Admin interface, one timed call per fact.

    The brokers and topics are the core (their failure fails the refresh); every other part that
    fails is kept as its one-line error in the snapshot (see the module docstring). A broker whose
    call times out joins ``stuck`` and is left out of the rest (``call`` leaves ``stuck`` out of every
    fan-out); the refresh fails only when no broker is left to ask. ``sweep``: the poller's, kept
    between refreshes (see ``GroupSweep``); without one every topic is asked for its groups.

    Requests a refresh makes to a broker: its runtime info, its topic configs (one GET_ALL_TOPIC_CONFIG),
    each topic's stats, its subscription groups, a slice of the groups-by-topic sweep, every group's
    consume stats in one GET_BROKER_CONSUME_STATS (GET_CONSUME_STATS of a group that answer would show
    otherwise, and of every group when it is refused: Cluster [Get]), its users, ACLs and config. A
    broker that does not serve the topic configs is asked per topic and group, as before. At 1,500
    topics and 300 groups that is ~1,900 requests instead of ~6,400."""
    stuck = StuckBrokers() if stuck is None else stuck
    sweep = GroupSweep(None) if sweep is None else sweep
    registered = await call(lambda a: a.registered_brokers())
    stuck.keep_only({b.broker_addr for b in registered})
    brokers = _Brokers(call, stuck, registered, taken_ms)
    statuses: dict[str, tuple[dict[str, str] | None, str | None]] = {}
    for b in brokers.answering():
        try:  # e.g. a damaged delayOffset.json: shown on the screens that use the runtime figures
            status = await _part(brokers.on(b), lambda a, addr=b.broker_addr: a.broker_status(addr))
        except _LeftOut:
            continue
        if status[1] is not None and credentials_refused(status[1]):
            brokers.refused(b, status[1])
            continue
        statuses[b.broker_addr] = status
    brokers.check_some_answer()
    sweep.keep_only({b.broker_addr for b in registered})
    configs: dict[str, dict[str, TopicInfo] | None] = {}
    for b in brokers.answering():
        try:  # one request for every topic's config; not served (an old broker): per topic, as before
            configs[b.broker_addr], _ = await _part(brokers.on(b), lambda a, b=b: a.topic_configs(b))
        except _LeftOut:
            continue
    topics: list[TopicSnapshot] = []
    topics_refused: list[str] = []
    topics_in_part: list[str] = []
    for name in await call(lambda a: a.list_topics()):
        topic, refused = await _read_topic(brokers, name, configs)
        if topic is not None:
            topics.append(topic)
            if refused:
                topics_in_part.append(name)
        elif refused:
            topics_refused.append(name)
    groups, groups_error = await _read_groups(brokers, configs, sweep, topics)
    read_acls: dict[str, AclView] = {}
    for b in brokers.answering():
        try:
            read_acls[b.broker_addr] = await _read_acl(brokers, b)
        except _LeftOut:
            continue
    brokers.check_some_answer()
    acl_views = [AclView(b, [], [], brokers.why[b.broker_addr]) if b.broker_addr in brokers.why
                 else read_acls[b.broker_addr] for b in registered]
    views = [BrokerView(b, {}, brokers.why[b.broker_addr]) if b.broker_addr in brokers.why
             else BrokerView(b, statuses[b.broker_addr][0] or {}, statuses[b.broker_addr][1]) for b in registered]
    failed = [v for v in acl_views if v.error is not None]
    acl_error = None if not failed else failed[0].error if len(acl_views) == 1 else \
        "; ".join(f"{v.name}: {v.error}" for v in failed)
    return Snapshot(taken_ms, views, topics, groups, [u for v in acl_views for u in v.users],
                    [a for v in acl_views for a in v.acls], groups_error, acl_error, acl_views,
                    [b for b in registered if b.broker_addr in brokers.why], topics_refused, topics_in_part)


def _some(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` names, and how many more: a user allowed two topics of 1,500 needs one line."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


async def _read_topic(brokers: _Brokers, name: str, configs: dict[str, dict[str, TopicInfo] | None]
                      ) -> tuple[TopicSnapshot | None, bool]:
    """``name``'s config (the first broker's that has it) and its queues on every broker answering, one
    broker per call (see ``_Brokers``), and whether some broker refused it (NO_PERMISSION: this user may
    not read it there). The topic is None when no broker answering has it (deleted between the listing
    and the read, or only on a stuck broker) or lets it be read: not in this refresh. ``configs``: each
    broker's topic configs read in this refresh (None: they could not be, so its config is asked here):
    a broker without the topic is not asked, one with it only for the stats, whose refusal says whether
    this user may read the topic (GET_ALL_TOPIC_CONFIG lists every topic to anyone it authenticates).

    Why a refusal is not the refresh's failure: the name server lists every topic to anyone (the
    cluster-name topic too), and ACL lets a Normal user read only those its policies name; one refused
    topic failed every refresh and blanked every screen. A refusal of the credentials themselves, a
    timeout or a lost connection still fails it as before."""
    info: TopicInfo | None = None
    queues: list[QueueStatus] = []
    refused = False
    for b in brokers.answering():
        known = configs.get(b.broker_addr)
        if known is not None and name not in known:
            continue

        def read(a: Admin, b: BrokerIdentity = b, first: bool = info is None and known is None
                 ) -> tuple[TopicInfo | None, list[QueueStatus]]:
            return (a.topic_info(name, [b]) if first else None), a.topic_status(name, [b])
        try:
            got_info, got = await brokers.ask(b, read)
        except (NotFoundError, _LeftOut):
            continue
        except NoPermissionError as e:
            if credentials_refused(e.message):  # the user itself (deleted, disabled): as before
                raise
            refused = True
            continue
        info = info or got_info or (known[name] if known is not None else None)
        queues.extend(got)
    return (None if info is None else TopicSnapshot(info, queues)), refused


async def _read_acl(brokers: _Brokers, b: BrokerIdentity) -> AclView:
    """``b``'s users and ACLs (a damaged users.json / acls.json: its error, shown on the ACL screen) and
    whether it enforces them (from its config; unknown when that cannot be read)."""
    call = brokers.on(b)
    users, error = await _part(call, lambda a: a.list_users(broker_addr=b.broker_addr))
    acls: list[Acl] | None = None
    if error is None:
        acls, error = await _part(call, lambda a: a.list_acls(broker_addr=b.broker_addr))
    config, _ = await _part(call, lambda a: a.get_broker_config(b.broker_addr))
    enabled = None if config is None else any(
        config.get(k, "false").strip().lower() == "true" for k in ("authenticationEnabled", "authorizationEnabled"))
    return AclView(b, users or [], acls or [], error, enabled)


async def _part(call: AdminCall, fetch: Callable[[Admin], T],
                who: str | None = None) -> tuple[T | None, str | None]:
    """One part of a refresh: (its value, None), or (None, the one-line error) when it cannot be read.
    A timeout is not a part's failure: its session is dropped, and the caller decides (see the module
    docstring)."""
    try:
        return await call(fetch, who), None
    except (CallTimeout, _LeftOut):
        raise
    except Exception as e:  # noqa: BLE001 - kept as the part's error (see the module docstring)
        return None, describe_error(e)


async def _list_groups(brokers: _Brokers, b: BrokerIdentity, topics: dict[str, TopicInfo] | None,
                       sweep: GroupSweep) -> tuple[list[str] | None, str | None]:
    """``b``'s groups: its subscription groups (one request) and those the sweep found holding offsets
    there (see ``GroupSweep``), or (None, why) when they cannot be listed. Without its topic configs
    (``topics`` None), Admin.list_groups asks every topic, as before."""
    call = brokers.on(b)
    if topics is None:
        return await _part(call, lambda a: a.list_groups([b]))
    configured, why = await _part(call, lambda a: a.subscription_groups(b))
    if configured is None:
        return None, why
    for topic in sweep.due(b.broker_addr, sorted(topics)):
        try:
            sweep.answer(b.broker_addr, topic, await call(lambda a, t=topic: a.topic_groups(t, [b])))
        except NotFoundError:
            sweep.answer(b.broker_addr, topic, [])
        except (CallTimeout, _LeftOut):
            raise
        except NoPermissionError as e:
            # A Normal ACL user may read only some topics: a refused one is skipped, as the topic reads
            # skip it, so the groups it may read are still listed (one refusal hid every group). The
            # credentials themselves refused: as any failure, the groups cannot be listed.
            sweep.answer(b.broker_addr, topic, describe_error(e) if credentials_refused(e.message) else REFUSED)
        except Exception as e:  # noqa: BLE001 - as list_groups: a failure means the groups cannot be listed
            sweep.answer(b.broker_addr, topic, describe_error(e))
    holding, why = sweep.groups(b.broker_addr)
    return (None, why) if why is not None else (sorted(set(configured) | holding), None)


def _dlq_queues(group: str, b: BrokerIdentity, configs: dict[str, dict[str, TopicInfo] | None],
                read: dict[str, TopicSnapshot]) -> list[QueueStatus] | None:
    """``group``'s %DLQ% queues on ``b`` as this refresh read them ([] when ``b`` has no such topic), or
    None when they must be asked (``b``'s configs unknown, or the topic not read: refused, say, which
    the group's read then reports as before)."""
    known = configs.get(b.broker_addr)
    dlq = f"%DLQ%{group}"
    if known is None:
        return None
    if dlq not in known:
        return []
    topic = read.get(dlq)
    if topic is None or not any(q.broker_name == b.broker_name for q in topic.queues):
        return None
    return [q for q in topic.queues if q.broker_name == b.broker_name]


def _same_as_group_read(group: str, b: BrokerIdentity, rows: list[ConsumeQueueStats],
                        configs: dict[str, dict[str, TopicInfo] | None], sweep: GroupSweep) -> bool:
    """Whether ``group``'s rows of ``b``'s GET_BROKER_CONSUME_STATS are what its GET_CONSUME_STATS would
    say. That answer lists write queues and leaves out the topics online consumers do not subscribe to,
    so it is taken only when it holds every topic the sweep found the group's offsets on, no other, and
    each with as many read as write queues."""
    known = configs.get(b.broker_addr)
    topics = frozenset(r.topic for r in rows)
    if known is None or sweep.topics_of(b.broker_addr, group) != topics:
        return False
    return all(t in known and known[t].read_queue_nums == known[t].write_queue_nums for t in topics)


async def _read_groups(brokers: _Brokers, configs: dict[str, dict[str, TopicInfo] | None] | None = None,
                       sweep: GroupSweep | None = None, topics: list[TopicSnapshot] | None = None
                       ) -> tuple[list[GroupLag], str | None]:
    """The groups that can be read, and the first error of those that cannot (a damaged
    consumerOrderInfo.json fails every group's lag; one bad group must not hide the others, nor one
    broker refusing a group its parts on the other brokers: those are shown, and the error says so). The groups
    are listed, and each group's lag read, one broker per call (see ``_Brokers``: a broker that hangs
    between two calls of a refresh is named and left out, not blamed on the name server), and summed here.
    A group's %DLQ% depth comes from ``topics`` (this refresh's) where they hold it."""
    configs = {} if configs is None else configs
    sweep = GroupSweep(None) if sweep is None else sweep
    read = {t.name: t for t in topics or []}
    groups: list[GroupLag] = []
    listed: set[str] = set()
    listing_error = None
    for b in brokers.answering():
        try:  # e.g. a damaged subscriptionGroup.json: that broker's groups are missing, the others' shown
            some, why = await _list_groups(brokers, b, configs.get(b.broker_addr), sweep)
        except _LeftOut:
            continue
        if some is None:
            listing_error = listing_error or (why if len(brokers.registered) == 1 else f"{b.broker_name}: {why}")
            continue
        listed.update(some)
    if not listed:
        return groups, listing_error
    names = sorted(listed)
    in_broker: dict[str, dict[str, GroupLag]] = {}
    for b in brokers.answering():
        if configs.get(b.broker_addr) is None:
            continue
        try:  # refused (a Normal user lacks Cluster [Get]) or not served: group by group, as before
            stats, _ = await _part(brokers.on(b), lambda a, b=b: a.broker_group_stats(b))
            if stats is None:
                continue
            taken = {g: rows for g, rows in stats.items()
                     if g in listed and _same_as_group_read(g, b, rows, configs, sweep)}
            lags, _ = await _part(brokers.on(b), lambda a, b=b, taken=taken: a.group_lags_from(b, taken))
        except _LeftOut:
            continue
        if lags is not None:
            in_broker[b.broker_addr] = lags
    refused: set[str] = set()  # groups some broker answering would not report
    not_permitted: set[str] = set()  # of those, the ones refused to this user (NO_PERMISSION)
    shown_in_part = 0  # of those, the ones other brokers did report (shown with their queues only)
    error = None
    many = len(brokers.registered) > 1
    for name in names:
        parts: list[GroupLag] = []
        for b in brokers.answering():
            dlq = _dlq_queues(name, b, configs, read)
            fast = in_broker.get(b.broker_addr, {}).get(name)
            if fast is not None and dlq is not None:
                parts.append(GroupLag(name, fast.queues, fast.retry_depth,
                                      sum(max(0, q.max_offset - q.min_offset) for q in dlq)))
                continue
            try:
                parts.append(await brokers.ask(b, lambda a, n=name, b=b, dlq=dlq: a.group_lag(n, [b]) if dlq is None
                                               else a.group_lag(n, [b], dlq_queues=dlq)))
            except (NotFoundError, _LeftOut):
                continue
            except CallTimeout:
                raise
            except Exception as e:  # noqa: BLE001 - kept as the part's error; the other brokers' parts still count
                refused.add(name)
                if isinstance(e, NoPermissionError) and not credentials_refused(e.message):
                    not_permitted.add(name)
                why = describe_error(e)
                error = error or (f"{name} on {b.broker_name}: {why}" if many else why)
        if parts:
            shown_in_part += name in refused
            groups.append(GroupLag(name, [q for p in parts for q in p.queues], sum(p.retry_depth for p in parts),
                                   sum(p.dlq_depth for p in parts)))
    if error is not None and not shown_in_part and refused == not_permitted and len(refused) < len(names):
        # as refused topics: a Normal ACL user may read only some groups; those it may not are named
        return groups, f"{len(refused)} of {len(names)} groups not shown: no permission to read {_some(sorted(refused))}"
    if error is not None and (len(refused) < len(names) or shown_in_part):
        in_full = f" in full ({shown_in_part} shown with the other brokers' queues only)" if shown_in_part else ""
        error = f"{len(refused)} of {len(names)} groups cannot be read{in_full}: {error}"
    return groups, error if error is not None else listing_error


@dataclass
class Sample:
    at_s: float
    value: float


@dataclass
class Series:
    """A bounded time series of a counter or gauge, with a rate over the last samples."""

    points: deque[Sample] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))

    def add(self, at_s: float, value: float) -> None:
        self.points.append(Sample(at_s, value))

    def values(self) -> list[float]:
        return [p.value for p in self.points]

    def rate(self, window: int = RATE_WINDOW) -> float:
        """Change per second over the last ``window`` samples (0 with fewer than two)."""
        pts = list(self.points)[-window:]
        if len(pts) < 2 or pts[-1].at_s <= pts[0].at_s:
            return 0.0
        return (pts[-1].value - pts[0].value) / (pts[-1].at_s - pts[0].at_s)


class PerBroker:
    """Figures keyed by (what, broker), each its own series.

    Why per broker: the brokers that answer change (one restarts, one is killed, one hangs and is left
    out), and a sum over whichever answered jumps by a whole broker's figure when it comes back and
    drops by it when it goes. A key absent from a sample loses its series, so a broker coming back
    starts a fresh one instead of a rate across the gap, and one leaving takes no change with it."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], Series] = {}

    def add(self, at_s: float, values: dict[tuple[str, str], float]) -> None:
        for key in [k for k in self.series if k not in values]:
            del self.series[key]
        for key, value in values.items():
            self.series.setdefault(key, Series()).add(at_s, value)


class Counters(PerBroker):
    """Monotonic counters (offsets) per (what, broker); rates are summed per key. Summed over whichever
    brokers answered, a broker coming back showed 1,750 put TPS for 15/s. A counter going backwards (a
    store rebuilt, a topic recreated) counts as 0, not as a negative rate cancelling the other brokers'."""

    def rate(self, what: str | None = None, window: int = RATE_WINDOW) -> float:
        """Sum of the per-key rates (of ``what`` only when given), each at least 0."""
        return sum(max(0.0, s.rate(window)) for (w, _), s in self.series.items() if what is None or w == what)


class Gauges(PerBroker):
    """Gauges that rise and fall (a group's lag) per (what, broker); the trend is the signed sum of the
    per-key rates. Why per broker: a group's total lag over whichever brokers answered fell from 362 to
    2 when the broker holding most of it was left out, and that fall read as consuming fast ("drains in
    0s" for a group consuming nothing); per broker, that broker's series just ends."""

    def trend(self, what: str, window: int = RATE_WINDOW) -> float:
        """Change per second of ``what`` summed over the brokers in at least two of the last samples."""
        return sum(s.rate(window) for (w, _), s in self.series.items() if w == what)


class History:
    """Successive snapshots reduced to series: stored/consumed counters per broker and lag per group."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.put_tps = Series()
        self.get_tps = Series()
        self.topic_put = Counters()
        """Max offsets summed per (topic, broker)."""
        self.group_consumed = Counters()
        """Consumer offsets summed per (group, broker)."""
        self.group_lag: dict[str, Series] = {}
        """Total lag per group, as shown (the sparkline); rates come from ``group_broker_lag``."""
        self.group_broker_lag = Gauges()
        """Lag per (group, broker): the time to drain is derived from it (see ``Gauges``)."""
        self.seen_brokers: dict[str, BrokerIdentity] = {}
        """Every broker seen in a refresh so far, by name (the latest identity)."""
        self.missing_brokers: list[BrokerIdentity] = []
        """Brokers seen before but not in the latest refresh: a broker killed with kill -9 only drops
        out of the name server's table, so without this it vanished from the Overview unremarked."""

    def add(self, snap: Snapshot) -> None:
        now = self.clock()
        current = {b.name: b.identity for b in snap.brokers}
        self.missing_brokers = [b for name, b in self.seen_brokers.items() if name not in current]
        self.seen_brokers.update(current)
        put: dict[tuple[str, str], float] = {}
        for t in snap.topics:
            for q in t.queues:
                put[(t.name, q.broker_name)] = put.get((t.name, q.broker_name), 0) + q.max_offset
        consumed: dict[tuple[str, str], float] = {}
        lag: dict[tuple[str, str], float] = {}
        for g in snap.groups:
            for lq in g.queues:
                key = (g.group, lq.broker_name)
                consumed[key] = consumed.get(key, 0) + max(lq.consumer_offset, 0)
                lag[key] = lag.get(key, 0) + lq.diff
        self.topic_put.add(now, put)
        self.group_consumed.add(now, consumed)
        self.group_broker_lag.add(now, lag)
        self.put_tps.add(now, self.topic_put.rate(window=2))
        self.get_tps.add(now, self.group_consumed.rate(window=2))
        for g in snap.groups:
            self.group_lag.setdefault(g.group, Series()).add(now, g.total_lag)

    def topic_put_tps(self, topic: str) -> float:
        return self.topic_put.rate(topic)

    def group_consume_tps(self, group: str) -> float:
        return self.group_consumed.rate(group)

    def lag_values(self, group: str) -> list[float]:
        s = self.group_lag.get(group)
        return s.values() if s else []

    def drain_eta_s(self, group: str, lag: int) -> float | None:
        """Seconds until the lag reaches zero at the current trend; None when it does not shrink."""
        if lag <= 0:
            return 0.0
        trend = self.group_broker_lag.trend(group)
        if trend >= 0:
            return None
        return lag / -trend
