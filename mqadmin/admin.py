"""Admin: the one implementation of every operator question (CLI, dashboard, playbooks ask only this).

Why this module exists: ``mqadmin`` commands, the TUI and the playbooks must work the same on a local
store directory and on a running cluster. The operator logic — which brokers a command targets,
reset plans and dry runs, queue scans with filters and time ranges, queries by id/key, ACL copies and
explanations, the output records below — is written once here, over a request-level
``BrokerClient`` transport (``mqadmin.transport``): in process (``LocalBrokerClient``) or over TCP
(``RemotingBrokerClient``). ``mqadmin.connect.open_admin`` picks one from ``--store`` / ``-n``.
Methods take and return plain values and dataclasses — never a store, a Broker or a socket; failures
are ``mqadmin.errors`` exceptions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from mqadmin.errors import (
    AdminError,
    NoPermissionError,
    NotFoundError,
    SilentBrokersError,
    UnreachableError,
    UsageProblem,
    WrongTargetError,
)
from mqadmin.timefmt import now_ms
from mqadmin.transport.base import BrokerClient, MessageRecord, ProgressFn, StoreMaintenance, TopicInfo

if TYPE_CHECKING:  # start-up: the ACL model, its evaluator, the filter parser and the report records load in
    # the methods that use them
    from broker_core.auth.evaluator import Explanation
    from broker_core.auth.model import Acl, User
    from broker_core.remoting.bodies import ConsumeMessageDirectlyResult, ConsumerRunningInfo
    from broker_core.store.verify import LostRecord, VerifyReport
    from mqadmin.figures import (
        DelayLevelInfo,
        GroupLag,
        StorePositionsInfo,
        TimerBacklogInfo,
        TransactionBacklogInfo,
    )
    from mqadmin.reports import (
        ConsumerProgress,
        DecodedMessageId,
        DeleteTopicPlan,
        GroupQueueLag,
        GroupSummary,
        OffsetChange,
        QueueScan,
        ResetPlan,
        StatsAllRow,
        TraceView,
    )
    from mqadmin.transport.values import (
        ClientConnection,
        ConsumeQueueStats,
        ConsumeQueueView,
        ConsumerConnection,
        ConsumeStatsView,
        QueueStatus,
        SendResult,
        SubscriptionGroupInfo,
        TopicStatus,
    )
    from spark.rebuild import RebuildSummary

# ------------------------------------------------------------------------------------ value types

@dataclass(frozen=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int = 0


@dataclass(frozen=True)
class BrokerExplanation:
    """explainAcl's answer from one broker. Why per broker: each broker keeps its own users, ACLs and
    ``authorizationEnabled`` (nothing replicates them), so one broker's answer is not the cluster's.
    ``explanation`` is what the broker's policies decide; the broker applies it only when
    ``authorization_enabled`` (None: its config could not be read, the policies are taken to apply).
    ``error``: why this broker could not be asked (then ``explanation`` is None)."""

    broker: BrokerIdentity
    explanation: Explanation | None
    authorization_enabled: bool | None = None
    error: str | None = None

    @property
    def name(self) -> str:
        """The broker as an operator knows it (its address when it did not say its name)."""
        return self.broker.broker_name or self.broker.broker_addr

    @property
    def broker_allows(self) -> bool | None:
        """What the broker does with such a request now (None: it could not be asked)."""
        if self.explanation is None:
            return None
        return self.authorization_enabled is False or self.explanation.allowed

    @property
    def broker_reason(self) -> str:
        if self.explanation is None:
            return self.error or ""
        if self.authorization_enabled is False:
            return f"authorization is off on {self.name}: allowed"
        return self.explanation.reason


# ------------------------------------------------------------------------------------ the Admin

MASTER_ID = 0  # MixAll.MASTER_ID: a broker group's master; any other brokerId is a slave
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # the name server's KV namespace of ordered topics' orderConf
MAX_OFFSET_TIMESTAMP = -1  # skipAccumulatedMessage: "reset to the max offset"
PULL_BATCH = 32
LONG_MAX = 2**63 - 1
_SCAN_GOES_ON = ("FOUND", "NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL")
# a store status as the pull consumer sees it (PullMessageProcessor's mapping), for printMsg's lines
_PULL_STATUS = {"FOUND": "FOUND", "NO_MATCHED_MESSAGE": "NO_MATCHED_MSG", "MESSAGE_WAS_REMOVING": "NO_MATCHED_MSG",
                "OFFSET_OVERFLOW_ONE": "NO_NEW_MSG", "OFFSET_FOUND_NULL": "NO_NEW_MSG",
                "NO_MESSAGE_IN_QUEUE": "NO_NEW_MSG", "NO_MATCHED_LOGIC_QUEUE": "NO_NEW_MSG"}
_CONSUME_TYPES = {"CONSUME_PASSIVELY": "PUSH", "CONSUME_ACTIVELY": "PULL", "CONSUME_POP": "POP"}


T = TypeVar("T")
R = TypeVar("R")


def change_each(items: Iterable[T], change: Callable[[T], R], where: Callable[[T], str]) -> list[R]:
    """Make a change on each broker in turn, stopping at the first that fails. That failure then also
    names the broker that refused and the brokers already changed: Java's mqadmin has printed their
    success lines by the time it fails, and an operator must know which broker to look at and what is
    half done before running the command again. With one broker the command already named it."""
    todo = list(items)
    done: list[str] = []
    out: list[R] = []
    for item in todo:
        try:
            out.append(change(item))
        except AdminError as e:
            failed = e.refused_by(where(item)) if len(todo) > 1 else e
            raise failed.after_changes_on(done) from None
        done.append(where(item))
    return out


def merged_order_conf(current: str | None, entry: str) -> str:
    """``entry`` (``brokerName:n``) put into an orderConf ``current`` (``a:n;b:n``): that broker's entry
    replaced in place, or added at the end."""
    name = entry.split(":", 1)[0]
    out = [e for e in (current or "").split(";") if e.strip()]
    at = next((i for i, e in enumerate(out) if e.split(":", 1)[0] == name), None)
    if at is None:
        out.append(entry)
    else:
        out[at] = entry
    return ";".join(out)


def _addr(b: BrokerIdentity) -> str:
    return b.broker_addr


def _first_tps(value: str | None) -> float:
    """The first (10 s) rate of a runtime-info TPS text such as ``"30.0 5.0 0.5"``, as clusterList
    reads putTps; 0 when blank (a broker up for less than 10 s leaves every window empty: ``"  "``)."""
    fields = (value or "").split()
    return float(fields[0]) if fields else 0.0


def _same(addr: str) -> str:
    return addr


def each_answer(brokers: Iterable[BrokerIdentity], ask: Callable[[BrokerIdentity], R],
                unanswered: list[str] | None) -> list[R]:
    """``ask`` of each broker, in order. Without ``unanswered`` the first failure is raised. With it, a
    broker that fails (times out, refuses) is named there, "brokerName (brokerAddr): why", and the
    others' answers are kept, as Apache's mqadmin goes on past a broker that fails (MQAdminImpl's
    queryMessage, BrokerStatusSubCommand): one hung broker must not hide what the healthy ones hold.
    The caller shows the answers, then raises ``SilentBrokersError(unanswered)``. When the only broker
    asked fails, its failure is raised as it is: there is nothing else to show."""
    asked = list(brokers)
    out: list[R] = []
    for b in asked:
        try:
            out.append(ask(b))
        except AdminError as e:
            if unanswered is None or len(asked) == 1:
                raise
            unanswered.append(SilentBrokersError.entry(b.broker_name, b.broker_addr, e.message))
    return out


class Admin:
    """Operator logic over one ``BrokerClient``; ``maintenance`` is set for a store directory target.

    Commands that name a target (-c cluster, -b broker address, broker name) pass what
    ``check_target`` returned; without one a request goes to every broker that has the topic."""

    def __init__(self, client: BrokerClient, maintenance: StoreMaintenance | None = None,
                 clock: Callable[[], int] = now_ms) -> None:
        self.client = client
        self.maintenance = maintenance
        self.clock = clock
        self.left_out: frozenset[str] = frozenset()
        """Broker addresses ``brokers()`` leaves out, so no command fans out to them: the dashboard's
        brokers that stopped answering (one hung broker must not stall every refresh). mqadmin leaves
        none out."""

    # -- lifecycle ------------------------------------------------------------------------------------
    def close(self, failed: bool = False) -> None:
        """``failed``: the work done through this Admin failed (see ``BrokerClient.close``)."""
        self.client.close(failed)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(failed=exc_type is not None)

    @property
    def target(self) -> str:
        """What this Admin talks to, as messages name it (``store DIR`` / ``name server ADDR``)."""
        return self.client.target

    # -- brokers --------------------------------------------------------------------------------------
    def brokers(self) -> list[BrokerIdentity]:
        """Every broker group's master (lowest id) from the cluster info, by cluster then name, but those
        ``left_out``."""
        out = [b for b in self.registered_brokers() if b.broker_addr not in self.left_out]
        if not out:
            raise AdminError(f"every broker registered at {self.target} is left out (not answering)")
        return out

    def registered_brokers(self) -> list[BrokerIdentity]:
        """Every broker group's master, those ``left_out`` too."""
        info = self.client.cluster_info()
        out = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                data = info.broker_addr_table.get(name)
                if data is None or not data.broker_addrs:
                    continue
                bid = min(data.broker_addrs)
                out.append(BrokerIdentity(cluster, name, data.broker_addrs[bid], bid))
        if not out:
            raise AdminError(f"no broker is registered at {self.target}")
        return out

    def broker_members(self) -> list[BrokerIdentity]:
        """Every registered broker, slaves too: one per brokerAddrs entry, by cluster, name, then brokerId,
        as Apache's ClusterListSubCommand prints its rows (that is what #BID shows), but those
        ``left_out``. Commands that change or read a broker group keep to ``brokers()`` (the masters)."""
        info = self.client.cluster_info()
        out = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                data = info.broker_addr_table.get(name)
                for bid, addr in sorted(data.broker_addrs.items() if data is not None else []):
                    out.append(BrokerIdentity(cluster, name, addr, bid))
        if not out:
            raise AdminError(f"no broker is registered at {self.target}")
        answering = [b for b in out if b.broker_addr not in self.left_out]
        if not answering:
            raise AdminError(f"every broker registered at {self.target} is left out (not answering)")
        return answering

    def identity(self) -> BrokerIdentity:
        """The first broker (the only one of a store directory)."""
        return self.brokers()[0]

    def check_target(self, cluster_name: str | None = None, broker_addr: str | None = None,
                     broker_name: str | None = None, members: bool = False) -> list[BrokerIdentity]:
        """mqadmin's -c / -b / brokerName options: the brokers they select, or one line saying why none.
        A broker address alone over -n is the broker at that address, asked directly (see ``broker_at``).

        -c over a name server is the cluster's masters only (Apache's fetchMasterAddrByClusterName): a
        broker group whose master is gone is left out, not written through its slave, whose store and
        config are its master's copy; a cluster with no master at all is one line naming its slaves.
        ``members``: masters and slaves (fetchMasterAndSlaveAddrByClusterName, brokerStatus -c)."""
        if broker_addr is not None and cluster_name is None and broker_name is None and self.maintenance is None:
            return [self.broker_at(broker_addr.strip())]
        known = self.broker_members() if members else self.brokers()
        chosen = known
        if cluster_name is not None:
            chosen = [b for b in chosen if b.cluster_name == cluster_name.strip()]
            if not chosen:
                raise WrongTargetError(self._missing("cluster", cluster_name.strip(), known))
            if not members and self.maintenance is None:  # a store directory's one broker is the target
                chosen = self._masters_of(cluster_name.strip(), chosen)
        if broker_addr is not None:
            chosen = [b for b in chosen if b.broker_addr == broker_addr.strip()]
            if not chosen:
                raise self._not_there("broker address", broker_addr.strip(), known)
        if broker_name is not None:
            chosen = [b for b in chosen if b.broker_name == broker_name.strip()]
            if not chosen:
                raise self._not_there("broker", broker_name.strip(), known)
        return chosen

    def _masters_of(self, cluster_name: str, chosen: list[BrokerIdentity]) -> list[BrokerIdentity]:
        """``chosen`` (a cluster's groups, each by its master else lowest id) without the groups that
        have no master; none left: one line naming the slaves, instead of writing to them."""
        masters = [b for b in chosen if b.broker_id == MASTER_ID]
        if not masters:
            slaves = ", ".join(f"{b.broker_name} ({b.broker_addr}, brokerId {b.broker_id})" for b in chosen)
            raise WrongTargetError(f"cluster {cluster_name!r} has no master broker registered at {self.target}, "
                                   f"only slaves: {slaves}; a slave takes no writes (start its master, or "
                                   "name a broker with -b)")
        return masters

    def _not_there(self, what: str, value: str, known: list[BrokerIdentity]) -> AdminError:
        """Why no broker of ``known`` is ``value``. A broker ``left_out`` is registered but not answering:
        saying it is not found (naming only the others) sent the dashboard's user looking for a typo."""
        field_of = {"broker address": "broker_addr", "broker": "broker_name"}[what]
        if self.left_out:
            for b in self.registered_brokers():
                if b.broker_addr in self.left_out and getattr(b, field_of) == value:
                    return UnreachableError(f"broker {b.broker_name} ({b.broker_addr}) is not answering: "
                                            "left out until it answers")
        return WrongTargetError(self._missing(what, value, known))

    def broker_at(self, addr: str) -> BrokerIdentity:
        """The broker at ``addr`` (-b), named by its own config. Why not by the name server, as -c is:
        Apache's -b commands talk to that address directly, so they work while the name servers are
        down or before the broker has registered (a slave, a broker being set up); only a broker that
        does not answer at all is refused. One that answers but refuses the config request (ACL) is
        named by the name server when it can be, and the command's own request then says what it says."""
        try:
            conf = self.client.broker_config(addr)
        except UnreachableError as e:
            raise UnreachableError(f"broker {addr} cannot be reached: {e.message}") from None
        except UsageProblem:  # a malformed address: the operator's typo, not a refusal
            raise
        except AdminError:
            return self._registered_as(addr)
        broker_id = conf.get("brokerId", "0")
        return BrokerIdentity(conf.get("brokerClusterName", ""), conf.get("brokerName", ""), addr,
                              int(broker_id) if broker_id.isdigit() else 0)

    def _registered_as(self, addr: str) -> BrokerIdentity:
        """``addr`` as the name server registers it; a bare identity when it cannot say."""
        try:
            known = self.brokers()
        except AdminError:
            known = []
        return next((b for b in known if b.broker_addr == addr), BrokerIdentity("", "", addr))

    def _missing(self, what: str, value: str, known: list[BrokerIdentity]) -> str:
        if self.maintenance is not None and len(known) == 1:  # a store directory: name its config keys
            me = known[0]
            if what == "cluster":
                return (f"cluster {value!r} not found: this store's broker is in cluster {me.cluster_name!r} "
                        "(brokerClusterName in --config)")
            if what == "broker address":
                return (f"broker address {value!r} is not this store's broker ({me.broker_addr}); "
                        "to reach another broker use -n <namesrv>")
            return f"broker {value!r} not found: this store's broker is {me.broker_name!r} (brokerName in --config)"
        field_of = {"cluster": "cluster_name", "broker address": "broker_addr", "broker": "broker_name"}[what]
        names = sorted({getattr(b, field_of) for b in known})
        return f"{what} {value!r} not found at {self.target}; known: {', '.join(names)}"

    def _addr(self, broker_addr: str | None) -> str:
        return broker_addr if broker_addr is not None else self.identity().broker_addr

    def get_broker_config(self, broker_addr: str | None = None, next_start: bool = False) -> dict[str, str]:
        """GET_BROKER_CONFIG: the values the broker runs with. ``next_start``: its ACL keys, identity and
        ports as updateBrokerConfig wrote them to its config file, which take effect at its next start
        (a plan compares with those, or an update already written would be a change on every run)."""
        return self.client.broker_config(self._addr(broker_addr), next_start)

    def broker_status(self, broker_addr: str | None = None) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of one broker (the first when none is named)."""
        return dict(sorted(self.client.broker_runtime_info(self._addr(broker_addr)).items()))

    def cluster_list(self, cluster_name: str | None = None) -> list[dict[str, Any]]:
        """clusterList's rows: each registered broker's (slaves too) runtime figures as mqadmin prints them; a broker that did not
        answer has empty figures, ACTIVATED false and its failure under ``error``. With ``cluster_name``
        only that cluster's brokers (none when it has none), as Apache's ``clusterList -c``."""
        rows = []
        brokers = self.broker_members()
        if cluster_name is not None:
            brokers = [b for b in brokers if b.cluster_name == cluster_name.strip()]
        for me in brokers:
            try:
                info, error = self.broker_status(me.broker_addr), None
            except AdminError as e:  # a broker that does not answer keeps its row, as in Java's clusterList
                info, error = {}, e.message
            earliest = int(info.get("earliestMessageTimeStamp", "0") or 0)
            hours = (self.clock() - earliest) / 3_600_000 if earliest > 0 else 0.0

            def num(key: str, info: dict[str, str] = info) -> int:
                return int(info.get(key, "0") or 0)

            rows.append({
                "clusterName": me.cluster_name, "brokerName": me.broker_name, "brokerId": me.broker_id,
                "brokerAddr": me.broker_addr, "version": info.get("brokerVersionDesc", ""),
                "inTps": _first_tps(info.get("putTps")), "outTps": _first_tps(info.get("getTransferredTps")),
                "sendThreadPoolQueueSize": num("sendThreadPoolQueueSize"),
                "sendThreadPoolQueueHeadWaitTimeMills": num("sendThreadPoolQueueHeadWaitTimeMills"),
                "pullThreadPoolQueueSize": num("pullThreadPoolQueueSize"),
                "pullThreadPoolQueueHeadWaitTimeMills": num("pullThreadPoolQueueHeadWaitTimeMills"),
                "ackThreadPoolQueueSize": num("ackThreadPoolQueueSize"),
                "ackThreadPoolQueueHeadWaitTimeMills": num("ackThreadPoolQueueHeadWaitTimeMills"),
                "timerReadBehind": num("timerReadBehind"), "timerOffsetBehind": num("timerOffsetBehind"),
                "timerCongestNum": num("timerCongestNum"),
                "timerEnqueueTps": float(info.get("timerEnqueueTps", 0) or 0),
                "timerDequeueTps": float(info.get("timerDequeueTps", 0) or 0),
                "pageCacheLockTimeMills": num("pageCacheLockTimeMills"), "hours": hours,
                "space": float(info.get("commitLogDiskRatio", "0") or 0),
                "activated": info.get("brokerActive") == "true",
                "inTotalYest": num("msgPutTotalTodayMorning") - num("msgPutTotalYesterdayMorning"),
                "outTotalYest": num("msgGetTotalTodayMorning") - num("msgGetTotalYesterdayMorning"),
                "inTotalToday": num("msgPutTotalTodayNow") - num("msgPutTotalTodayMorning"),
                "outTotalToday": num("msgGetTotalTodayNow") - num("msgGetTotalTodayMorning"),
            })
            if error is not None:
                rows[-1]["error"] = error
        return rows

    # -- topics ---------------------------------------------------------------------------------------
    def list_topics(self) -> list[str]:
        """The name server's topic list, as Apache's topicList asks it (no broker is asked: one that
        hangs cannot fail the list)."""
        return self.client.all_topic_list()

    def _topic_candidates(self, topic: str) -> list[BrokerIdentity]:
        """The brokers to ask about ``topic``: those of its route, as Apache's tools ask (so a hung broker
        that does not serve the topic cannot fail or stall the command); every broker when the name
        server has no route for it (a topic just created, whose broker has not registered it yet)."""
        brokers = self.brokers()
        if len(brokers) == 1:  # a store directory, or a one-broker cluster: nothing to choose
            return brokers
        route = self.client.topic_route(topic)
        if route is None:
            return brokers
        names = {bd.broker_name for bd in route.broker_datas}
        return [b for b in brokers if b.broker_name in names] or brokers

    def _topic_brokers(self, topic: str, among: list[BrokerIdentity] | None = None
                       ) -> list[tuple[BrokerIdentity, TopicInfo]]:
        """The brokers (of ``among``, default the topic's candidates) that have ``topic``, with its config there."""
        out = []
        candidates = among if among is not None else self._topic_candidates(topic)
        for b in candidates:
            try:
                info = self.client.get_topic_config(b.broker_addr, topic)
            except AdminError as e:  # a broker's remark ("username cannot be null.") names no broker
                raise e.refused_by(b.broker_addr) if len(candidates) > 1 else e from None
            if info is not None:
                out.append((b, info))
        return out

    def _require_topic(self, topic: str, among: list[BrokerIdentity] | None = None
                       ) -> list[tuple[BrokerIdentity, TopicInfo]]:
        """The brokers of ``among`` (default the topic's candidates) with ``topic``; else NotFoundError.
        When the brokers given (-b, -c, a broker name) lack a topic the name server routes elsewhere,
        that is said, naming both: "not found in name server" sent the operator looking for a typo in
        the topic (Apache: "broker not exit or broker is not master!")."""
        found = self._topic_brokers(topic, among)
        if not found:
            elsewhere = self._routed_elsewhere(topic, among) if among else []
            if among and elsewhere:
                on = ", ".join(elsewhere)
                given = ", ".join(f"{b.broker_name} ({b.broker_addr})" if b.broker_name else b.broker_addr
                                  for b in among)
                raise NotFoundError(f"topic [{topic}] is not on broker{'s' if len(among) > 1 else ''} {given}; "
                                    f"the name server routes it to {on}")
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        return found

    def _routed_elsewhere(self, topic: str, among: list[BrokerIdentity]) -> list[str]:
        """The broker names the topic's route lists besides ``among``'s; none on a store directory (one
        broker) or when the name server cannot say (the not-found message is then the plain one)."""
        if self.maintenance is not None:
            return []
        try:
            route = self.client.topic_route(topic)
        except AdminError:
            return []
        given = {b.broker_name for b in among}
        return sorted({q.broker_name for q in route.queue_datas} - given) if route is not None else []

    def _routed_brokers(self, topic: str) -> list[tuple[BrokerIdentity, int]]:
        """(master, writeQueueNums) of each broker in the topic's route, as Apache's queryMessage and
        producer find them: from GET_ROUTEINFO_BY_TOPIC only. Why not GET_TOPIC_CONFIG: that needs
        Topic Get under ACL 2.0, which a consumer (Sub) or producer (Pub) account does not have.
        No route is "topic not found" (exit 3), as before. A store directory has no ACL and one broker:
        its topic config answers without building a route (a key query loads no route code). Brokers
        ``left_out`` are skipped like every fan-out's (a hung broker stalled the dashboard's key query);
        when they are all the route has, that is said."""
        if self.maintenance is not None:
            return [(b, info.write_queue_nums) for b, info in self._require_topic(topic)]
        route = self.client.topic_route(topic)
        if route is None or not route.queue_datas:
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        datas = {bd.broker_name: bd for bd in route.broker_datas}
        out = []
        for qd in route.queue_datas:
            bd = datas.get(qd.broker_name)
            if bd is None or not bd.broker_addrs:
                continue
            bid = min(bd.broker_addrs)
            out.append((BrokerIdentity(bd.cluster, bd.broker_name, bd.broker_addrs[bid], bid), qd.write_queue_nums))
        if not out:
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        answering = [(b, n) for b, n in out if b.broker_addr not in self.left_out]
        if not answering:
            names = ", ".join(f"{b.broker_name} ({b.broker_addr})" for b, _ in out)
            raise AdminError(f"topic [{topic}] is only on {names}, left out: not answering")
        return answering

    def topic_configs(self, broker: BrokerIdentity) -> dict[str, TopicInfo]:
        """Every topic's config on ``broker``, by name, in one GET_ALL_TOPIC_CONFIG (what Apache's
        fetchAllTopicConfig asks). Why: the dashboard read a config per topic (GET_TOPIC_CONFIG), 1,500
        requests a refresh at 1,500 topics. It authorizes no resource (authentication only, as Apache's
        broker), so it lists topics this user may not read: whether one may be read is still up to the
        read of its stats (:meth:`topic_status`)."""
        return {t.topic_name: t for t in self.client.get_all_topic_config(broker.broker_addr)}

    def topic_info(self, topic: str, among: list[BrokerIdentity] | None = None) -> TopicInfo:
        """The topic's config on the first broker (of ``among``, default its candidates) that has it."""
        return self._require_topic(topic, among)[0][1]

    def topic_status(self, topic: str, among: list[BrokerIdentity] | None = None) -> list[QueueStatus]:
        """The queues of :meth:`topic_stats` (every answering broker's)."""
        return self.topic_stats(topic, among).queues

    def topic_stats(self, topic: str, among: list[BrokerIdentity] | None = None) -> TopicStatus:
        """GET_TOPIC_STATS_INFO of every broker that has the topic (the broker's error when none has):
        their queues, and the topic's put TPS summed over them. ``among``: ask only those brokers
        (topicStatus -c: the cluster's, as Apache's), default the topic's candidates.

        Why summed: each broker counts only the puts it stored. Apache's broker fills topicPutTps the
        same way, but its examineTopicStats merges only the offset tables, so its topicStatus prints 0.0
        whatever the traffic."""
        from mqadmin.transport.values import TopicStatus

        rows: list[QueueStatus] = []
        put_tps = 0.0
        missing: NotFoundError | None = None
        for b in among if among is not None else self._topic_candidates(topic):
            try:
                got = self.client.topic_stats(b.broker_addr, topic)
            except NotFoundError as e:
                missing = e
                continue
            rows.extend(got.queues)
            put_tps += got.put_tps
        if not rows and missing is not None:
            raise missing
        return TopicStatus(rows, put_tps)

    def topic_route(self, topic: str) -> dict[str, Any]:
        route = self.client.topic_route(topic)
        if route is None:
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        return route.to_dict()

    def update_topic(self, topic: TopicInfo, targets: list[BrokerIdentity] | None = None) -> TopicInfo:
        """UPDATE_AND_CREATE_TOPIC on each target (default every broker); ``topic.attributes`` holds
        mqadmin's signed changes (+k=v / -k). Returns the topic as the first target stores it."""
        results = change_each(targets or self.brokers(),
                              lambda b: self.client.update_and_create_topic(b.broker_addr, topic), _addr)
        return results[0]

    def update_topic_list(self, topics: Sequence[TopicInfo], targets: list[BrokerIdentity]) -> None:
        """updateTopicList: UPDATE_AND_CREATE_TOPIC_LIST of every topic on each target in turn, one
        request a broker, as Apache's createAndUpdateTopicConfigList. Each broker applies the whole list
        or (one entry refused) none of it; a failure names the brokers already changed."""
        change_each(targets, lambda b: self.client.update_and_create_topic_list(b.broker_addr, topics), _addr)

    def order_conf_for(self, topic: str, write_queue_nums: int, targets: list[BrokerIdentity],
                       whole_cluster: bool) -> str:
        """The ORDER_TOPIC_CONFIG value updateTopic -o true writes, as Apache's createOrUpdateOrderConf:
        for a cluster (-c) ``name:n`` of each of its brokers; for one broker (-b) its ``name:n`` merged
        into the topic's current value (its own entry replaced, the other brokers' kept).

        Why read the name server here, before any broker is changed: the order conf is name server
        data, so a store directory (no name server) or a name server that does not answer fails the
        command while it has changed nothing, rather than after the topic was created."""
        if self.maintenance is not None:
            raise AdminError("-o/--order true sets the topic's orderConf, name server data (ORDER_TOPIC_CONFIG): "
                             "a store directory has no name server; use -n <namesrv>")
        current = self.client.get_kv_config(ORDER_TOPIC_CONFIG, topic)
        entries = [f"{b.broker_name}:{write_queue_nums}" for b in targets]
        if whole_cluster:
            return ";".join(entries)
        mine = targets[0].broker_name
        if not mine:
            raise AdminError(f"broker {targets[0].broker_addr} did not say its brokerName: cannot set its orderConf")
        return merged_order_conf(current, entries[0])

    def topic_update_problem(self, topic: TopicInfo, targets: list[BrokerIdentity]) -> str | None:
        """Why UPDATE_AND_CREATE_TOPIC of ``topic`` would be refused by one of ``targets`` (None: by none),
        judged before anything is sent with the broker's own rules and remarks: the name, queue numbers,
        perm, filter type, system topic names (validateSystemTopicWhenUpdateTopic), MIXED
        (enableMixedMessageType) and the attribute changes against the topic as each target has it.

        Why: updateTopicList sends the list to one broker after another, and a broker that refuses an
        entry of UPDATE_AND_CREATE_TOPIC_LIST writes none of it but says only its remark; checked here
        first, a bad entry is named by its place in the file and no broker is changed."""
        from broker_core.broker.errors import BrokerError
        from broker_core.broker.topic_attributes import (
            QUEUE_TYPE,
            alter_attributes,
            parse_attribute_modifications,
        )
        from broker_core.broker.topic_manager import topic_fields_problem
        from broker_core.broker.topic_validator import (
            REPLY_TOPIC_POSTFIX,
            SYSTEM_TOPIC_PREFIX,
            SYSTEM_TOPICS,
            validate_topic,
        )

        name = topic.topic_name
        bad = validate_topic(name)
        if bad:
            return bad
        bad = topic_fields_problem(topic.read_queue_nums, topic.write_queue_nums, topic.perm,
                                   topic.topic_filter_type, topic.topic_sys_flag)
        if bad:
            return bad
        try:
            mods = parse_attribute_modifications(dict(topic.attributes))
        except BrokerError as e:
            return f"attributes: {e.message}"
        for b in targets:
            conf = self.client.broker_config(b.broker_addr)
            if conf.get("validateSystemTopicWhenUpdateTopic", "true") == "true":
                cluster = conf.get("brokerClusterName", b.cluster_name)
                system = set(SYSTEM_TOPICS) | {cluster, conf.get("brokerName", b.broker_name),
                                               f"{cluster}_{REPLY_TOPIC_POSTFIX}"}
                if conf.get("traceTopicEnable") == "true":
                    system.add(conf.get("msgTraceTopicName", ""))
                if name in system or name.startswith(SYSTEM_TOPIC_PREFIX):
                    return f"The topic[{name}] is conflict with system topic."
            if conf.get("enableMixedMessageType", "false") != "true" and mods.get("+message.type") == "MIXED":
                return "attributes: MIXED message type is not supported."
            current = self.client.get_topic_config(b.broker_addr, name)
            try:  # queue.type may change while the topic has no messages, judged below
                new = alter_attributes(current is None, current.attributes if current else {}, mods,
                                       frozenset({QUEUE_TYPE.name}))
            except BrokerError as e:
                return f"attributes: {e.message}"
            if current is not None and (new.get(QUEUE_TYPE.name) or "SimpleCQ") != current.queue_type \
                    and any(q.max_offset > 0 for q in self.client.topic_stats(b.broker_addr, name).queues):
                return (f"attributes: attempt to update an unchangeable attribute. key: queue.type (topic {name} already has "
                        f"messages in a {current.queue_type} queue; delete the topic first to change its queue type)")
        return None

    def delete_topic(self, topic: str, cluster_name: str, dry_run: bool = False) -> DeleteTopicPlan:
        """What deleting the topic from the cluster's brokers removes; applied unless ``dry_run``."""
        from mqadmin.reports import DeleteTopicPlan

        found = self._require_topic(topic, self.check_target(cluster_name=cluster_name))
        queues = messages = 0
        groups: set[str] = set()
        for b, _ in found:
            for q in self.client.topic_stats(b.broker_addr, topic).queues:
                if q.max_offset > 0:
                    queues += 1
                    messages += q.max_offset - q.min_offset
            groups.update(self.client.query_topic_consume_by_who(b.broker_addr, topic))
        plan = DeleteTopicPlan(topic, cluster_name, queues, messages, sorted(groups), applied=False)
        if not dry_run:
            brokers = [b for b, _ in found]
            change_each(brokers, lambda b: self.client.delete_topic_in_broker(b.broker_addr, topic), _addr)
            try:
                self.client.delete_topic_in_namesrv(topic, cluster_name)
            except AdminError as e:
                # Java's order (brokers, then name servers: a broker still serving the topic would register
                # its route again); a name server failing now leaves the brokers' deletes done, which the
                # name server's own error ("cannot connect to name server X") did not say
                raise e.noting(f"topic {topic} already deleted on broker {', '.join(map(_addr, brokers))}; "
                               "its route stays in the name servers not named as changed") from None
            plan.applied = True
        return plan

    def delete_topic_route(self, topic: str, cluster_name: str, dry_run: bool = False) -> DeleteTopicPlan:
        """deleteTopic where no broker of the cluster has the topic but a name server still routes it
        there: a run whose name server delete failed after the brokers' (unreachable, refused). Apache's
        DeleteTopicSubCommand deletes in every name server without asking the brokers, so its re-run
        cleans such a route; so does this one. NotFoundError when a broker has the topic (delete_topic
        is the command for it) or no route names a broker of the cluster: nothing to delete."""
        from mqadmin.reports import DeleteTopicPlan

        targets = self.check_target(cluster_name=cluster_name)
        if self.maintenance is None and not self._topic_brokers(topic, targets):
            route = self.client.topic_route(topic)
            names = {b.broker_name for b in targets}
            if route is not None and any(q.broker_name in names for q in route.queue_datas):
                plan = DeleteTopicPlan(topic, cluster_name, 0, 0, [], applied=False)
                if not dry_run:
                    self.client.delete_topic_in_namesrv(topic, cluster_name)
                    plan.applied = True
                return plan
        raise NotFoundError(f"topic [{topic}] not found in {self.target}")

    # -- groups ---------------------------------------------------------------------------------------
    def list_groups(self, among: list[BrokerIdentity] | None = None) -> list[str]:
        """Subscription groups plus every group holding offsets on some topic; ``among``: of those brokers
        only (the dashboard lists one broker per call, so a timeout names it), default every broker."""
        groups: set[str] = set()
        for b in among if among is not None else self.brokers():
            groups.update(g.group_name for g in self.client.get_all_subscription_group(b.broker_addr))
            for t in self.client.get_all_topic_config(b.broker_addr):
                groups.update(self.client.query_topic_consume_by_who(b.broker_addr, t.topic_name))
        return sorted(groups)

    def topic_list_clusters(self) -> list[tuple[str | None, str, list[str]]]:
        """topicList -c: (cluster, topic, groups) for each name server topic but %RETRY%/%DLQ% ones, as
        Apache's TopicListSubCommand: the cluster is the one whose broker names hold the first broker of
        the topic's route (None, printed "null", when no cluster does), the groups those that the first
        broker of the route with an address says consume the topic. When the route cannot be had the
        cluster is "" and no group is asked; when the groups cannot be had there are none."""
        from broker_core.broker.topic_validator import DLQ_GROUP_TOPIC_PREFIX

        info = self.client.cluster_info()
        brokers = self.brokers()
        # a store directory, or a one-broker cluster: that broker is every listed topic's route (a store
        # directory makes a route by registering all its topics: asking it per topic would be quadratic)
        only = brokers[0] if len(brokers) == 1 else None
        rows: list[tuple[str | None, str, list[str]]] = []
        for topic in self.list_topics():
            if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                continue
            cluster: str | None = ""
            groups: list[str] = []
            try:
                if only is not None:
                    cluster, addr = only.cluster_name, only.broker_addr
                else:
                    cluster, addr = self._route_home(topic, info.cluster_addr_table)
                if addr is not None:
                    groups = self.client.query_topic_consume_by_who(addr, topic)
            except AdminError:  # as Apache's: a failed route or group query keeps what was found before it
                pass
            rows.append((cluster, topic, groups))
        return rows

    def _route_home(self, topic: str, clusters: dict[str, list[str]]) -> tuple[str | None, str | None]:
        """The cluster of the first broker of ``topic``'s route (None: in no cluster) and the address of
        the first broker of the route that has one (its master, else its lowest id)."""
        route = self.client.topic_route(topic)
        if route is None or not route.broker_datas:
            raise NotFoundError(f"No topic route info in name server for the topic: {topic}")
        first = route.broker_datas[0].broker_name
        cluster = next((c for c, names in clusters.items() if first in names), None)
        addr = next((bd.broker_addrs[min(bd.broker_addrs)] for bd in route.broker_datas if bd.broker_addrs), None)
        return cluster, addr

    def subscription_groups(self, broker: BrokerIdentity) -> list[str]:
        """The subscription groups ``broker`` has a config of, in one GET_ALL_SUBSCRIPTIONGROUP_CONFIG
        (sorted); the groups holding offsets without one are :meth:`topic_groups`'."""
        return sorted(g.group_name for g in self.client.get_all_subscription_group(broker.broker_addr))

    def topic_groups(self, topic: str, among: list[BrokerIdentity] | None = None) -> list[str]:
        """Groups holding offsets on ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO, stored part); ``among``: of
        those brokers only (the dashboard asks one broker per call), default the topic's candidates."""
        groups: set[str] = set()
        for b in among if among is not None else self._topic_candidates(topic):
            groups.update(self.client.query_topic_consume_by_who(b.broker_addr, topic))
        return sorted(groups)

    def get_sub_group(self, group: str) -> SubscriptionGroupInfo | None:
        """The group's subscription config on the first broker that has it, None when none has."""
        for b in self.brokers():
            found = self.client.get_subscription_group(b.broker_addr, group)
            if found is not None:
                return found
        return None

    def update_sub_group(self, config: SubscriptionGroupInfo,
                         targets: list[BrokerIdentity] | None = None) -> SubscriptionGroupInfo:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on each target, ``config`` as given: its attributes are
        signed changes (+k=v / -k) each broker applies to its current ones (none given: they stay), as
        Apache's updateSubGroup sends them. Nothing is read first or after (under ACL 2.0 that would
        need Group [Get], which Apache's command does not); the config sent is returned, which is what
        Apache's command prints."""
        change_each(targets or self.brokers(),
                    lambda b: self.client.update_and_create_subscription_group(b.broker_addr, config), _addr)
        return config

    def update_sub_group_list(self, configs: Sequence[SubscriptionGroupInfo], targets: list[BrokerIdentity]) -> None:
        """updateSubGroupList: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST of every config on each target in
        turn, one request a broker, as Apache's createAndUpdateSubscriptionGroupConfigList; whole configs,
        as update_sub_group sends its one. Each broker applies all or none."""
        change_each(targets, lambda b: self.client.update_and_create_subscription_group_list(b.broker_addr, configs),
                    _addr)

    def delete_sub_group(self, group: str, remove_offset: bool = False, delete_retry_topics: bool = False,
                         targets: list[BrokerIdentity] | None = None) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP on each target; with ``delete_retry_topics`` (mqadmin -c) its
        %RETRY% and %DLQ% topics go too, from the brokers and from the name server (Apache's
        adminExt.deleteTopic: a route left at the name server kept routing clients to a topic no broker
        has). Not found when every target answered it deleted nothing: no group and, with
        ``remove_offset``, no offsets (saying success would hide a mistyped name). The broker's answer
        says so, so the group is not read first (which ACL 2.0 would make need Group [Get]). Nor are the
        %RETRY%/%DLQ% topics: each is deleted outright, as Apache's adminExt.deleteTopic does (a broker
        deleting a topic it does not have answers SUCCESS); asking first needed Get on them, which an
        account allowed to delete them (Group:G, Topic:%DLQ%G) need not have.

        Returns warnings: a topic that could not be deleted once the group was (Apache's command
        deletes the group on every broker first, then the topics, and prints a topic's failure without
        failing: the group, what was asked for, is gone)."""
        chosen = targets or self.brokers()
        existed = any(change_each(
            chosen, lambda b: self.client.delete_subscription_group(b.broker_addr, group, remove_offset), _addr))
        warnings = self._delete_group_topics(group, chosen) if delete_retry_topics else []
        if not existed:  # groups live on brokers: name the ones asked, not the name server
            where = ", ".join(f"{b.broker_name} ({b.broker_addr})" for b in chosen)
            raise NotFoundError(f"subscription group [{group}] does not exist on broker{'s' if len(chosen) > 1 else ''} "
                                f"{where}")
        return warnings

    def _delete_group_topics(self, group: str, brokers: list[BrokerIdentity]) -> list[str]:
        """adminExt.deleteTopic of %RETRY%group then %DLQ%group (each: its brokers, then the name
        servers), stopping at the first refused, as Apache's command does; that one as a warning."""
        for topic in (f"%RETRY%{group}", f"%DLQ%{group}"):
            try:  # %DLQ% is a Topic resource under ACL 2.0 (%RETRY% is the group's), as in Apache
                change_each(brokers, lambda b, t=topic: self.client.delete_topic_in_broker(b.broker_addr, t), _addr)
                for cluster in sorted({b.cluster_name for b in brokers}):
                    self.client.delete_topic_in_namesrv(topic, cluster)
            except AdminError as e:
                return [f"subscription group {group} deleted, but topic {topic} not: {e.message}"]
        return []

    def _consume_stats(self, group: str, topic: str | None = None,
                       among: list[BrokerIdentity] | None = None) -> ConsumeStatsView:
        """GET_CONSUME_STATS of every broker (of ``among`` when given): their queues together and their
        consume TPS summed (a broker that has no stats of the group adds no rows and 0)."""
        from mqadmin.transport.values import ConsumeStatsView

        rows: list[ConsumeQueueStats] = []
        tps = 0.0
        for b in among if among is not None else self.brokers():
            view = self.client.consume_stats(b.broker_addr, group, topic)
            rows += view.rows
            tps += view.consume_tps
        return ConsumeStatsView(rows, tps)

    def consumer_progress(self, group: str, topic: str | None = None,
                          with_client_ip: bool = False) -> ConsumerProgress:
        """GET_CONSUME_STATS of every broker: broker vs group offset, lag and in-flight per queue, and the
        group's consume TPS; ``with_client_ip`` (consumerProgress -s) adds the IP of the client that holds
        each queue."""
        from mqadmin.reports import ConsumerProgress, ConsumerProgressRow

        view = self._consume_stats(group, topic)
        stats = view.rows
        if not stats:
            what = f"group [{group}]" + (f" on topic [{topic}]" if topic else "")
            raise NotFoundError(f"Not found the consumer group consume stats: {what} has no consume offsets "
                                f"in {self.target}")
        owners = self._queue_owner_ips(group) if with_client_ip else {}
        rows = []
        for s in stats:
            consumer = max(s.consumer_offset, 0)
            inflight = s.inflight or max(0, s.pull_offset - consumer)
            rows.append(ConsumerProgressRow(s.topic, s.broker_name, s.queue_id, s.broker_offset, consumer,
                                            inflight, s.last_timestamp,
                                            owners.get((s.topic, s.broker_name, s.queue_id), "")))
        return ConsumerProgress(rows, view.consume_tps)

    def _queue_owner_ips(self, group: str) -> dict[tuple[str, str, int], str]:
        """Which client IP holds each queue, from every online client's running info (its mqTable), as
        Apache's consumerProgress -s gathers it; empty when the group has no client online."""
        try:
            infos = self.consumer_running_infos(group)
        except NotFoundError:
            return {}
        return {(mq.topic, mq.broker_name, mq.queue_id): conn.client_id.split("@", 1)[0]
                for conn, info, _ in infos if info is not None for mq in info.mq_table}

    def retry_topic_groups(self) -> list[str]:
        """The groups Apache's consumerProgress lists without -g: one per ``%RETRY%`` topic (a POP v2
        retry topic ``%RETRY%group+topic`` names its group before the ``+``), in topic order."""
        groups: list[str] = []
        for topic in self.list_topics():
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                group = topic[len(RETRY_GROUP_TOPIC_PREFIX):].split("+", 1)[0]
                if group not in groups:
                    groups.append(group)
        return groups

    def group_summaries(self, unanswered: list[str] | None = None) -> list[GroupSummary]:
        """consumerProgress without -g: lag per group, and who is online (OFFLINE when nobody).

        ``unanswered``: see ``each_answer``; the groups are the name server's, their figures the
        answering brokers'. Each broker is asked about every group before the next broker, so a hung
        broker costs one timeout, not one per group, and adds nothing of a group it answered before
        it stopped."""
        from broker_core.remoting.mqversion import version_desc
        from mqadmin.reports import GroupSummary

        groups = self.retry_topic_groups()

        def ask(b: BrokerIdentity) -> list[tuple[ConsumeStatsView, ConsumerConnection | None]]:
            return [(self.client.consume_stats(b.broker_addr, g), self.client.consumer_connection(b.broker_addr, g))
                    for g in groups]

        answers = each_answer(self.brokers() if groups else [], ask, unanswered)
        out = []
        for i, group in enumerate(groups):
            diff, tps = 0, 0.0
            count, version, ctype, model = 0, "OFFLINE", "", ""
            for per_group in answers:
                view, conn = per_group[i]
                diff += sum(max(0, s.broker_offset - max(s.consumer_offset, 0)) for s in view.rows)
                tps += view.consume_tps
                if conn is not None and conn.connections:
                    count = max(count, len(conn.connections))
                    version = version_desc(min(c.version for c in conn.connections))  # V5_3_3, as Apache
                    ctype = _CONSUME_TYPES.get(conn.consume_type, conn.consume_type)
                    model = conn.message_model
            out.append(GroupSummary(group, count, version, ctype, model, tps, diff))
        return out

    # -- connections and settings of running brokers -------------------------------------------------
    def _not_online(self, who: str) -> NotFoundError:
        """Nobody of ``who`` is connected; on a store directory that is always so, and the error says so
        (as getConsumerStatus's does), since only a running broker has connected clients."""
        hint = " (a store directory has no connected clients; use -n <namesrv>)" if self.maintenance is not None else ""
        return NotFoundError(f"the {who} not online at {self.target}{hint}")

    def consumer_connection_info(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """consumerConnection: who of ``group`` is online (the first broker that knows, or ``broker_addr``)."""
        addrs = [broker_addr] if broker_addr else [b.broker_addr for b in self.brokers()]
        for addr in addrs:
            conn = self.client.consumer_connection(addr, group)
            if conn is not None and conn.connections:
                return conn
        raise self._not_online(f"consumer group[{group}]")

    def _online_consumers(self, group: str, broker_addr: str | None = None) -> tuple[str, ConsumerConnection]:
        """The first broker (or ``broker_addr``) where ``group`` has clients, and who they are."""
        addrs = [broker_addr] if broker_addr else [b.broker_addr for b in self.brokers()]
        for addr in addrs:
            conn = self.client.consumer_connection(addr, group)
            if conn is not None and conn.connections:
                return addr, conn
        raise self._not_online(f"consumer group[{group}]")

    def consumer_running_info(self, group: str, client_id: str, broker_addr: str | None = None,
                              jstack: bool = False) -> ConsumerRunningInfo:
        """consumerStatus -i: one client's running info, asked through a broker it is connected to."""
        addr, _ = self._online_consumers(group, broker_addr)
        return self.client.consumer_running_info(addr, group, client_id.strip(), jstack)

    def consumer_running_infos(self, group: str, broker_addr: str | None = None, jstack: bool = False
                               ) -> list[tuple[ClientConnection, ConsumerRunningInfo | None, str | None]]:
        """consumerStatus: every online client's running info, or why it could not be had (the others
        are still asked, as Apache does)."""
        addr, conn = self._online_consumers(group, broker_addr)
        out: list[tuple[ClientConnection, ConsumerRunningInfo | None, str | None]] = []
        for c in conn.connections:
            try:
                out.append((c, self.client.consumer_running_info(addr, group, c.client_id, jstack), None))
            except AdminError as e:
                out.append((c, None, e.message))
        return out

    def consume_status(self, topic: str, group: str, client_id: str | None = None
                       ) -> dict[str, dict[tuple[str, int], int]]:
        """getConsumerStatus: what each client of the group holds as its offset of each queue of
        ``topic``, via the first broker of the topic's route (as Apache asks)."""
        route = self.client.topic_route(topic)
        if route is None or not route.broker_datas:
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        addr = route.broker_datas[0].master_addr()
        if addr is None:
            raise AdminError(f"broker {route.broker_datas[0].broker_name} of topic [{topic}] has no master address")
        return self.client.consumer_status(addr, group, topic, client_id)

    def push_message(self, topic: str, msg_id: str, group: str, client_id: str
                     ) -> ConsumeMessageDirectlyResult | None:
        """queryMsgById -g -d: the message goes straight to that client's listener (CONSUME_MESSAGE_DIRECTLY
        through the broker that stored it). None when the client is not a push consumer."""
        info = self.consumer_running_info(group, client_id)
        if info.properties.get("PROP_CONSUME_TYPE") != "CONSUME_PASSIVELY":
            return None
        records = self.query_msg_by_id(topic, msg_id)
        if not records:
            raise NotFoundError(f"message not found: {msg_id}")
        r = records[0]
        brokers = self.brokers()
        stored = next((b.broker_addr for b in brokers if b.broker_addr == r.store_host), None)
        addr = stored or self._online_consumers(group)[0]
        return self.client.consume_message_directly(addr, group, client_id.strip(), topic, r.msg_id)

    def resend_message(self, topic: str, msg_id: str, producer_group: str = "ReSendMsgById",
                       unit_name: str | None = None) -> tuple[MessageRecord, SendResult] | None:
        """queryMsgById -s true: the stored message (body and properties, its UNIQ_KEY included) is
        sent again to its topic by ``producer_group``; None when no message has that id."""
        records = self.query_msg_by_id(topic, msg_id)
        if not records:
            return None
        r = records[0]
        return r, self.client.send_message(r.topic, r.body, dict(r.properties), producer_group=producer_group,
                                           unit_name=unit_name)

    def producer_connection_info(self, group: str, topic: str) -> list[ClientConnection]:
        """producerConnection: the group's online producers on the brokers of ``topic``."""
        found: dict[str, ClientConnection] = {}
        for b, _ in self._require_topic(topic):
            for c in self.client.producer_connection(b.broker_addr, group):
                found.setdefault(c.client_id, c)
        if not found:
            raise self._not_online(f"producer group[{group}]")
        return [found[k] for k in sorted(found)]

    def update_broker_config(self, properties: dict[str, str], targets: list[BrokerIdentity] | None = None
                             ) -> list[str]:
        """UPDATE_BROKER_CONFIG on each target (all brokers when none given); the addresses updated.
        Unknown keys are refused here, since a broker silently ignores them (a typo in a playbook must
        not pass as a change); black-listed keys go through so the broker refuses them as RocketMQ does."""
        from broker_core.broker.config_update import BLACK_LIST

        brokers = targets or self.brokers()
        # every target is read and checked before the first one is changed: a broker that does not answer
        # (or lacks a key) found half way left the cluster's brokers disagreeing
        for b in brokers:
            try:
                known = set(self.client.broker_config(b.broker_addr)) | set(BLACK_LIST)
            except AdminError as e:
                raise (e.refused_by(b.broker_addr) if len(brokers) > 1 else e).noting("nothing was changed") from None
            unknown = sorted(set(properties) - known)
            if unknown:
                raise AdminError(f"unknown broker config key(s) for {b.broker_name}: {', '.join(unknown)} "
                                 "(getBrokerConfig lists them); nothing was changed")

        def update(b: BrokerIdentity) -> str:
            self.client.update_broker_config(b.broker_addr, dict(properties))
            return b.broker_addr

        return change_each(brokers, update, _addr)

    def update_topic_perm(self, topic: str, perm: int, targets: list[BrokerIdentity]
                          ) -> list[tuple[BrokerIdentity, int, TopicInfo | None]]:
        """updateTopicPerm: per target (old perm, the topic as now stored, or None when unchanged)."""
        def update(found: tuple[BrokerIdentity, TopicInfo]) -> tuple[BrokerIdentity, int, TopicInfo | None]:
            b, info = found
            if info.perm == perm:
                return b, info.perm, None
            wanted = dataclasses.replace(info, perm=perm, attributes={})  # no attribute change
            return b, info.perm, self.client.update_and_create_topic(b.broker_addr, wanted)

        return change_each(self._require_topic(topic, targets), update, lambda found: found[0].broker_addr)

    def topic_cluster_list(self, topic: str) -> list[str]:
        """topicClusterList: the clusters of the brokers in the topic's route."""
        route = self.client.topic_route(topic)
        if route is None or not route.broker_datas:
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        return sorted({b.cluster for b in route.broker_datas})

    def consumer_configs(self, group: str) -> list[tuple[BrokerIdentity, SubscriptionGroupInfo]]:
        """getConsumerConfig: the group's config on every broker that has it."""
        out = []
        for b in self.brokers():
            cfg = self.client.get_subscription_group(b.broker_addr, group)
            if cfg is not None:
                out.append((b, cfg))
        if not out:
            raise NotFoundError(f"subscription group [{group}] does not exist in {self.target}")
        return out

    def allocate_mq(self, topic: str, client_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """allocateMQ: how AllocateMessageQueueAveragely splits the topic's readable queues among ``client_ids``."""
        from broker_core.client.allocate import allocate_averagely
        from broker_core.remoting.bodies import MessageQueue

        route = self.client.topic_route(topic)
        if route is None:
            raise NotFoundError(f"topic [{topic}] not found in {self.target}")
        mqs = [MessageQueue(topic=topic, broker_name=q.broker_name, queue_id=i)
               for q in route.queue_datas if q.perm & 4 for i in range(q.read_queue_nums)]
        return {cid: [{"brokerName": m.broker_name, "queueId": m.queue_id, "topic": m.topic}
                      for m in allocate_averagely(cid, mqs, client_ids)] for cid in client_ids}

    def query_consume_queue(self, topic: str, queue_id: int, index: int, count: int,
                            broker_addr: str | None = None) -> ConsumeQueueView:
        """queryCq: units of one queue on ``broker_addr`` (default: the first broker with the topic)."""
        among = None if broker_addr is None else self.check_target(broker_addr=broker_addr)
        b, _ = self._require_topic(topic, among)[0]
        return self.client.query_consume_queue(b.broker_addr, topic, queue_id, index, count)

    def topic_write_queues(self, topic: str) -> list[tuple[BrokerIdentity, int]]:
        """(broker, writeQueueNums) of every broker in the topic's route (checkMsgSendRT spreads over them,
        as a producer does: a Pub account can run it)."""
        return self._routed_brokers(topic)

    def broker_consume_stats(self, broker_addr: str, diff_level: int = 0, order_only: bool = False,
                             timeout_millis: int | None = None) -> list[GroupQueueLag]:
        """brokerConsumeStats: every group's queues on one broker with a stored offset and lag >= diff_level.

        One GET_BROKER_CONSUME_STATS request, as Apache's fetchConsumeStatsInBroker: ``order_only``
        (-o true) is its isOrder (only topics whose config is ordered) and ``timeout_millis`` (-t) its
        timeout, so a broker that does not answer fails the command in that time. Why not a request
        per group: that was GET_CONSUME_STATS a group, which an account with Apache's Cluster [Get]
        alone may not send, and a wait that grew with the number of groups. ``broker_addr`` is asked
        directly, with no request before (check_target's would wait its own timeout); a malformed or
        (on a store directory) foreign address is refused by the transport, as there."""
        import time

        from mqadmin.reports import GroupQueueLag

        started = time.monotonic()
        try:
            stats = self.client.broker_consume_stats(
                broker_addr, order_only, None if timeout_millis is None else timeout_millis / 1000)
        except UnreachableError as e:
            if timeout_millis is not None and time.monotonic() - started >= timeout_millis / 1000:
                raise self._consume_stats_timeout(broker_addr, timeout_millis) from None
            raise UnreachableError(f"broker {broker_addr} cannot be reached: {e.message}") from None
        rows: list[GroupQueueLag] = []
        for group, per_topic in stats.groups:
            for s in (row for view in per_topic for row in view.rows):
                consumer = max(s.consumer_offset, 0)
                if s.broker_offset - consumer < diff_level or s.last_timestamp <= 0:
                    continue  # Apache prints only queues with a last-consumed time
                rows.append(GroupQueueLag(group, s.topic, s.broker_name, s.queue_id, s.broker_offset, consumer,
                                          s.last_timestamp))
        return sorted(rows, key=lambda r: (r.group, r.topic, r.broker_name, r.queue_id))

    @staticmethod
    def _consume_stats_timeout(broker_addr: str, timeout_millis: int | None) -> UnreachableError:
        return UnreachableError(f"brokerConsumeStats: broker {broker_addr} did not answer within {timeout_millis} ms "
                                "(-t/--timeoutMillis)")

    def user_metadata(self, targets: list[BrokerIdentity], special_topic: bool = False
                      ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """exportMetadata: user topics (retry/DLQ only with ``special_topic``) and user groups of the
        targets, queue counts summed over brokers as Apache does. System topics and groups are left out."""
        from broker_core.broker.topic_validator import (
            DLQ_GROUP_TOPIC_PREFIX,
            REPLY_TOPIC_POSTFIX,
            RETRY_GROUP_TOPIC_PREFIX,
            SYSTEM_GROUPS,
            SYSTEM_TOPIC_PREFIX,
            SYSTEM_TOPICS,
        )

        system_groups = {name for name, _ in SYSTEM_GROUPS}
        # the broker's own system topics: its cluster's and its name's topics, the cluster's reply topic
        internal = ({b.cluster_name for b in targets} | {b.broker_name for b in targets}
                    | {f"{b.cluster_name}_{REPLY_TOPIC_POSTFIX}" for b in targets})
        topics: dict[str, dict[str, Any]] = {}
        groups: dict[str, dict[str, Any]] = {}
        for b in targets:
            for t in self.client.get_all_topic_config(b.broker_addr):
                name = t.topic_name
                if name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX) or name in internal:
                    continue
                if not special_topic and name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                    continue
                d = t.to_dict()
                d.pop("queueType", None)
                if name in topics:
                    d["readQueueNums"] += topics[name]["readQueueNums"]
                    d["writeQueueNums"] += topics[name]["writeQueueNums"]
                topics[name] = d
            for g in self.client.get_all_subscription_group(b.broker_addr):
                if g.group_name in system_groups:
                    continue
                d = g.to_dict()
                if g.group_name in groups:
                    d["retryQueueNums"] += groups[g.group_name]["retryQueueNums"]
                groups[g.group_name] = d
        return dict(sorted(topics.items())), dict(sorted(groups.items()))

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        self.client.put_kv_config(namespace, key, value)

    def get_kv_config(self, namespace: str, key: str) -> str:
        value = self.client.get_kv_config(namespace, key)
        if value is None:
            raise NotFoundError(f"No config item, Namespace: {namespace} Key: {key}")
        return value

    def delete_kv_config(self, namespace: str, key: str) -> None:
        self.client.delete_kv_config(namespace, key)

    def query_msg_trace(self, msg_id: str, trace_topic: str = "RMQ_SYS_TRACE_TOPIC", begin: int = 0,
                        end: int | None = None, max_num: int = 64) -> list[TraceView]:
        """queryMsgTraceById: trace messages keyed by ``msg_id`` in the trace topic, decoded; only the
        contexts about that message are kept (TraceView.decodeFromTraceTransData)."""
        from broker_core.store.codec.trace_data import TraceDataError, decode_trace_data
        from mqadmin.reports import TraceView

        records = self.query_msg_by_key(trace_topic, msg_id, max_num, begin, self.clock() if end is None else end)
        if not records:
            raise NotFoundError(f"no trace data of message {msg_id} in {trace_topic}")
        views: list[TraceView] = []
        for r in records:
            try:
                contexts = decode_trace_data(r.body.decode("utf-8", errors="replace"))
            except TraceDataError as e:
                raise AdminError(f"trace message {r.msg_id} in {trace_topic}: {e}") from None
            client = r.born_host.rsplit(":", 1)[0]
            for ctx in contexts:
                bean = ctx.beans[0]
                if bean.msg_id != msg_id:
                    continue
                views.append(TraceView(ctx.trace_type.value, ctx.group_name, client, ctx.time_stamp, ctx.cost_time,
                                       "success" if ctx.success else "failed", bean.msg_id, bean.offset_msg_id,
                                       bean.topic, bean.tags, bean.keys, bean.store_host))
        return views

    def stats_all(self, topic: str | None = None, active_only: bool = False) -> list[StatsAllRow]:
        """statsAll: per topic (retry and DLQ topics left out) the masters' put TPS over the last minute
        and puts over the last day, and per consumer group its lag and get figures. With
        ``active_only`` only lines with traffic in the last day, as Apache's -a. The figures are a
        running broker's counters (VIEW_BROKER_STATS_DATA): a store directory's transport refuses them,
        and is asked even when no topic is listed, so statsAll on a store always says so."""
        from broker_core.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS
        from broker_core.broker.topic_validator import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
        from mqadmin.reports import StatsAllRow

        def figures(addrs: list[str], name: str, key: str) -> tuple[float, int]:
            tps, day = 0.0, 0
            for addr in addrs:
                data = self.client.view_broker_stats_data(addr, name, key)
                if data is not None:
                    tps += data[0].tps
                    day += next((w.sum for w in (data[2], data[1], data[0]) if w.sum), 0)  # compute24HourSum
            return tps, day

        rows: list[StatsAllRow] = []
        names = [name for name in self.list_topics()
                 if not name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
                 and (not topic or name == topic)]
        if not names:  # nothing to count, but a target without counters must still say it has none
            self.client.view_broker_stats_data(self.identity().broker_addr, TOPIC_PUT_NUMS, topic or "")
        for name in names:
            route = self.client.topic_route(name)
            if route is None:
                continue
            masters = [a for b in route.broker_datas if (a := b.master_addr()) is not None]
            in_tps, in_day = figures(masters, TOPIC_PUT_NUMS, name)
            groups = sorted({g for a in masters for g in self.client.query_topic_consume_by_who(a, name)})
            if not groups:
                if not active_only or in_day > 0:
                    rows.append(StatsAllRow(name, None, 0, in_tps, 0.0, in_day, 0))
                continue
            for g in groups:
                out_tps, out_day = figures(masters, GROUP_GET_NUMS, f"{name}@{g}")
                lag = 0
                for a in masters:
                    lag += sum(s.broker_offset - max(s.consumer_offset, 0)
                               for s in self.client.consume_stats(a, g, name).rows)
                if not active_only or in_day > 0 or out_day > 0:
                    rows.append(StatsAllRow(name, g, max(lag, 0), in_tps, out_tps, in_day, out_day))
        return rows

    def set_consume_mode(self, topic: str, group: str, mode: str, pop_share_queue_num: int,
                         cluster_name: str | None = None, broker_addr: str | None = None) -> list[str]:
        """setConsumeMode on ``broker_addr`` or every master of ``cluster_name``: the addresses set."""
        targets = self.check_target(cluster_name, broker_addr)
        if cluster_name is not None and broker_addr is None:
            targets = [b for b in targets if b.broker_id == 0] or targets
        change_each(targets, lambda b: self.client.set_message_request_mode(b.broker_addr, topic, group, mode,
                                                                              pop_share_queue_num), _addr)
        return [b.broker_addr for b in targets]

    def maintain_store(self, what: str, cluster_name: str | None = None, broker_addr: str | None = None
                       ) -> list[tuple[BrokerIdentity, str]]:
        """cleanExpiredCQ / deleteExpiredCommitLog / cleanUnusedTopic on ``broker_addr``, the masters of
        ``cluster_name``, or every broker: (broker, what it did)."""
        calls = {"cleanExpiredCQ": self.client.clean_expired_consume_queue,
                 "deleteExpiredCommitLog": self.client.delete_expired_commit_log,
                 "cleanUnusedTopic": self.client.clean_unused_topic}
        call = calls[what]
        targets = self.check_target(cluster_name, broker_addr) if cluster_name or broker_addr else self.brokers()
        return change_each(targets, lambda b: (b, call(b.broker_addr)), _addr)

    def operate_write_perm(self, broker_name: str, wipe: bool) -> list[tuple[str, int | None, str | None]]:
        """wipeWritePerm/addWritePerm on every name server given: (namesrv, topics changed, or None and
        the failure). As Apache, one name server failing does not stop the others."""
        addrs = self.client.namesrv_addrs()
        if not addrs:
            self.client.operate_write_perm_of_broker("", broker_name, wipe)  # the target's own refusal
        out: list[tuple[str, int | None, str | None]] = []
        for addr in addrs:
            try:
                out.append((addr, self.client.operate_write_perm_of_broker(addr, broker_name, wipe), None))
            except AdminError as e:
                out.append((addr, None, e.message))
        return out

    def namesrv_configs(self) -> list[tuple[str, dict[str, str] | None, str | None]]:
        """getNamesrvConfig: (namesrv, its settings, or None and the failure) for every name server given.
        Unlike Apache (the first failure ends the command), the others are still asked and shown."""
        return self._each_namesrv(self.client.get_namesrv_config)

    def update_namesrv_config(self, key: str, value: str) -> list[tuple[str, None, str | None]]:
        """updateNamesrvConfig ``key=value`` on every name server given: (namesrv, None, the failure or
        None). As Apache's updateNameServerConfig, each name server gets it whatever the others answer."""
        return self._each_namesrv(lambda addr: self.client.update_namesrv_config(addr, {key: value}))

    def _each_namesrv(self, call: Callable[[str], T]) -> list[tuple[str, T | None, str | None]]:
        addrs = self.client.namesrv_addrs()
        if not addrs:
            call("")  # a store directory: the transport's own refusal (it has no name server)
        out: list[tuple[str, T | None, str | None]] = []
        for addr in addrs:
            try:
                out.append((addr, call(addr), None))
            except AdminError as e:
                out.append((addr, None, e.message))
        return out

    # -- offsets --------------------------------------------------------------------------------------
    def _require_group(self, broker: BrokerIdentity, group: str) -> None:
        """The group exists on ``broker``; else NotFoundError naming that broker (a group made on one
        broker of a cluster only was reported missing with no word of where)."""
        if self.client.get_subscription_group(broker.broker_addr, group) is None:
            raise NotFoundError(f"Group {group} does not exist on broker {broker.broker_name} ({broker.broker_addr})")

    def reset_offset_by_time(self, group: str, topic: str, timestamp: int, force: bool = True,
                             queue_id: int | None = None, offset: int | None = None, dry_run: bool = False,
                             broker_addr: str | None = None) -> ResetPlan:
        """resetOffsetByTime: per queue, the offset stored at ``timestamp`` (-1: the max offset) or the
        exact ``offset``. Planned from reads on every broker with the topic (or ``broker_addr``), applied
        unless ``dry_run`` as Apache's ResetOffsetByTimeCommand does: one INVOKE_BROKER_TO_RESET_OFFSET per
        broker with the real timestamp and queueId -1 (or the one queue), the broker's table kept as the
        result. A broker in server-side mode (useServerSideResetOffset, the default) ignores isForce, so
        a "-f false" reset moves a group forward too, as with Java's mqadmin; one in client mode tells the
        live consumers, and with none online the offsets are committed here (Apache's fallback)."""
        from mqadmin.reports import ResetPlan

        among = None if broker_addr is None else self.check_target(broker_addr=broker_addr)
        found = self._topic_brokers(topic, among)
        if not found:
            raise NotFoundError(f"Topic {topic} does not exist")
        changes: list[OffsetChange] = []
        brokers: list[BrokerIdentity] = []
        for b, info in found:
            try:
                changes.extend(self._plan_reset_on(b, info, group, topic, timestamp, queue_id, offset))
            except AdminError as e:  # a broker's remark ("username cannot be null.") names no broker
                raise e.refused_by(b.broker_addr) if len(found) > 1 else e from None
            brokers.append(b)
        plan = ResetPlan(group, topic, timestamp, force, changes, applied=False)
        if not dry_run:
            def reset_on(b: BrokerIdentity) -> list[OffsetChange]:
                return self._reset_on_broker(b, group, topic, timestamp, force, queue_id, offset,
                                             [c for c in changes if c.broker_name == b.broker_name])

            done = change_each(brokers, reset_on, lambda b: b.broker_addr)
            plan.changes = [c for part in done for c in part]
            plan.applied = True
        return plan

    def _plan_reset_on(self, b: BrokerIdentity, info: TopicInfo, group: str, topic: str, timestamp: int,
                       queue_id: int | None, offset: int | None) -> list[OffsetChange]:
        """One broker's part of a reset plan: each queue's max, the group's offset and where it goes."""
        from mqadmin.reports import OffsetChange

        changes: list[OffsetChange] = []
        addr = b.broker_addr
        self._require_group(b, group)
        if queue_id is not None:
            if queue_id < 0 or queue_id >= max(info.read_queue_nums, info.write_queue_nums):
                raise AdminError(f"queueId[{queue_id}] is illegal, topic:[{topic}] has "
                                 f"{info.read_queue_nums} read queues")
            qids = [queue_id]
        else:
            qids = list(range(info.read_queue_nums))
        for qid in qids:
            hi = self.client.get_max_offset(addr, topic, qid)
            if offset is not None:
                lo = self.client.get_min_offset(addr, topic, qid)
                if offset < lo or offset > hi:
                    raise AdminError(f"Target offset {offset} not in consume queue range [{lo}-{hi}] "
                                     f"(topic {topic}, queue {qid})")
                ts_off = offset
            elif timestamp < 0:
                ts_off = hi
            else:
                ts_off = self.client.search_offset(addr, topic, qid, timestamp)
            old = self.client.query_consumer_offset(addr, group, topic, qid)
            changes.append(OffsetChange(b.broker_name, qid, hi, old, ts_off, ts_off))
        return changes

    def _reset_on_broker(self, b: BrokerIdentity, group: str, topic: str, timestamp: int, force: bool,
                         queue_id: int | None, offset: int | None, planned: list[OffsetChange]) -> list[OffsetChange]:
        """One broker's reset; the queues as the broker reports them moved (its table, not the plan: a
        client-mode broker applies isForce and covers the write queues)."""
        from mqadmin.reports import OffsetChange

        # one request for the whole topic (queueId -1), as Apache sends a time; an offset goes to each queue
        # by itself (a whole-topic request carries no offset: the broker would read the time, -1, the end)
        if queue_id is not None:
            queues = [queue_id]
        else:
            queues = [c.queue_id for c in planned] if offset is not None else [-1]
        table: dict[int, int] = {}
        for qid in queues:
            part = self.client.reset_offset(b.broker_addr, group, topic, timestamp, force, qid, offset)
            if part is None:  # client mode, no consumer online: Apache's mqadmin commits the offsets itself
                return self._commit_reset(b, group, topic, force, planned)
            table.update(part)
        by_queue = {c.queue_id: c for c in planned}
        out = []
        for qid, new in sorted(table.items()):
            was = by_queue.get(qid)
            out.append(dataclasses.replace(was, reset_offset=new) if was is not None else OffsetChange(
                b.broker_name, qid, self.client.get_max_offset(b.broker_addr, topic, qid),
                self.client.query_consumer_offset(b.broker_addr, group, topic, qid), new, new))
        return out

    def _commit_reset(self, b: BrokerIdentity, group: str, topic: str, force: bool,
                      planned: list[OffsetChange]) -> list[OffsetChange]:
        """ResetOffsetByTimeOldCommand.resetOffset: UPDATE_CONSUMER_OFFSET per queue; without ``force``
        a queue only moves backwards (a queue the group never committed takes the new offset)."""
        out = []
        for c in planned:
            moves = force or c.consumer_offset < 0 or c.timestamp_offset <= c.consumer_offset
            if moves:
                self.client.commit_consumer_offset(b.broker_addr, group, topic, c.queue_id, c.timestamp_offset)
            out.append(dataclasses.replace(c, reset_offset=c.timestamp_offset if moves else c.consumer_offset))
        return out

    def skip_accumulated_message(self, group: str, topic: str, force: bool = True,
                                 dry_run: bool = False) -> ResetPlan:
        return self.reset_offset_by_time(group, topic, MAX_OFFSET_TIMESTAMP, force, dry_run=dry_run)

    def clone_group_offset(self, src_group: str, dest_group: str, topic: str) -> ResetPlan:
        """CLONE_GROUP_OFFSET on every broker of the topic's route. Each queue the source holds an offset
        of is reported with what the DESTINATION holds afterwards, read back from the broker: the broker
        keeps a pending server-side reset of the destination (and answers it first, as Apache's
        queryOffset), so "copied" is only true where the two agree (status "applied", else "notApplied";
        the plan is applied only when no queue is notApplied). Reporting the source's offsets told the user
        the clone had moved a group whose consumers would start at the reset offset.

        A user the broker refuses to read the destination's offsets to (ACL: Update on it without Get) still
        clones, as Apache's tool, which needs only the source's consume stats and Update on the
        destination: those queues are "notReadBack" (offsets -1), not a failed clone."""
        from mqadmin.reports import OffsetChange, ResetPlan

        found = self._topic_brokers(topic)
        if not found:
            raise NotFoundError(f"Topic {topic} does not exist")
        changes = []
        for b, info in found:
            addr = b.broker_addr
            self._require_group(b, src_group)
            qids = range(max(info.read_queue_nums, info.write_queue_nums))
            before = self._dest_offsets(addr, dest_group, topic, qids)
            source = {q: self.client.query_consumer_offset(addr, src_group, topic, q) for q in qids}
            self.client.clone_group_offset(addr, src_group, dest_group, topic)
            held_now = before and self._dest_offsets(addr, dest_group, topic, qids)
            for q in qids:
                if source[q] < 0:
                    continue
                if not held_now:
                    changes.append(OffsetChange(b.broker_name, q, self.client.get_max_offset(addr, topic, q), -1,
                                                source[q], -1, "notReadBack"))
                    continue
                held = held_now[q]
                changes.append(OffsetChange(b.broker_name, q, self.client.get_max_offset(addr, topic, q), before[q],
                                            source[q], held, "applied" if held == source[q] else "notApplied"))
        return ResetPlan(dest_group, topic, 0, True, changes, applied=all(c.status != "notApplied" for c in changes))

    def _dest_offsets(self, addr: str, group: str, topic: str, qids: range) -> dict[int, int]:
        """``group``'s offsets of ``topic``'s queues at ``addr``, or {} when the broker will not let this user
        read them (NO_PERMISSION: an ACL user with Update but not Get on the clone's destination)."""
        try:
            return {q: self.client.query_consumer_offset(addr, group, topic, q) for q in qids}
        except NoPermissionError:
            return {}

    # -- messages -------------------------------------------------------------------------------------
    def query_msg_by_id(self, topic: str, msg_id: str, unanswered: list[str] | None = None) -> list[MessageRecord]:
        """An offset msgId is read at its commitlog offset (on the broker it names, else each broker);
        anything else, or an id that does not match there, falls back to the unique key (Apache's
        viewMessage does the same, also when the read fails).

        ``unanswered``: see ``each_answer``. A broker that does not answer is named there and asked
        nothing more for this id (not again by the unique-key fallback, and not again for a later id
        that adds to the same list), so a message held on a healthy broker is found during another's
        outage at the cost of one timeout. When the broker the id names answers, no other is asked."""
        from broker_core.store.codec.message_id import decode_offset_msg_id

        text = msg_id.strip()
        try:
            decoded = decode_offset_msg_id(text)
        except ValueError:
            decoded = None
        silent: set[str] = set()  # addresses that did not answer, before and during this id

        def known_silent(b: BrokerIdentity) -> bool:
            return b.broker_addr in silent or (unanswered is not None and any(
                e.startswith(SilentBrokersError.entry(b.broker_name, b.broker_addr, "")) for e in unanswered))

        if decoded is not None:
            brokers = self.brokers()
            host = f"{decoded.store_host[0]}:{decoded.store_host[1]}"
            named = [b for b in brokers if b.broker_addr == host]
            asked = [b for b in named or brokers if not known_silent(b)]
            for b in asked:
                try:
                    r = self.client.view_message(b.broker_addr, decoded.commit_log_offset)
                except AdminError as e:
                    if unanswered is None or len(brokers) == 1:  # nothing else to show: its own failure
                        raise
                    unanswered.append(SilentBrokersError.entry(b.broker_name, b.broker_addr, e.message))
                    silent.add(b.broker_addr)
                    continue
                if r is not None and r.commit_log_offset == decoded.commit_log_offset \
                        and r.msg_id.upper() == text.upper():
                    return [r]
        if unanswered is None:
            return self.query_msg_by_unique_key(topic, text, 32)
        routed = [b for b, _ in self._routed_brokers(topic)]
        found: list[MessageRecord] = []
        for b in routed:
            if known_silent(b):
                continue
            try:
                found.extend(self.client.query_message(b.broker_addr, topic, text, 32, 0, LONG_MAX, unique_key=True))
            except AdminError as e:
                if len(routed) == 1 and not silent:  # the only broker asked: its own failure
                    raise
                unanswered.append(SilentBrokersError.entry(b.broker_name, b.broker_addr, e.message))
        return sorted(found, key=lambda r: r.store_timestamp)

    def query_msg_by_key(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
                         end: int = LONG_MAX, unanswered: list[str] | None = None) -> list[MessageRecord]:
        """QUERY_MESSAGE by key on every broker with the topic: messages whose KEYS has the token ``key``.
        ``unanswered``: see ``each_answer`` (a key held on a healthy broker is found during another's outage)."""
        brokers = [b for b, _ in self._routed_brokers(topic)]
        found = each_answer(brokers, lambda b: self.client.query_message(b.broker_addr, topic, key, max_num, begin, end),
                            unanswered)
        return [r for records in found for r in records]

    def query_msg_by_unique_key(self, topic: str, key: str, max_num: int = 32,
                                unanswered: list[str] | None = None) -> list[MessageRecord]:
        """QUERY_MESSAGE by unique key on every broker of the topic's route (a Sub account can run it).
        ``unanswered``: see ``each_answer``."""
        brokers = [b for b, _ in self._routed_brokers(topic)]
        found = each_answer(brokers, lambda b: self.client.query_message(b.broker_addr, topic, key, max_num, 0,
                                                                          LONG_MAX, unique_key=True), unanswered)
        return sorted((r for records in found for r in records), key=lambda r: r.store_timestamp)

    def query_msg_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageRecord:
        b = self.check_target(broker_name=broker_name)[0]
        (_, info), = self._require_topic(topic, [b])
        if queue_id not in self._queue_ids(info):  # not found (3), as printMsgByQueue says it
            raise NotFoundError(f"queue {queue_id} of topic [{topic}] does not exist")
        got = self.client.read_queue(b.broker_addr, topic, queue_id, offset, 1)
        if got.status != "FOUND" or not got.messages:
            raise NotFoundError(f"no message at offset {offset} of {topic}/{queue_id} on {broker_name}: "
                                f"{got.status} (queue holds [{got.min_offset}, {got.max_offset}))")
        return got.messages[0]

    @staticmethod
    def _check_expression(sub_expression: str | None) -> str:
        """The tag expression, refused here with the CLI's message before any request is sent."""
        from broker_core.broker.filter import FilterSyntaxError, build_filter

        expression = sub_expression or "*"
        try:
            build_filter("TAG", expression)
        except FilterSyntaxError as e:
            raise AdminError(f"invalid subExpression {sub_expression!r}: {e}") from None
        return expression

    def _scan_queue(self, b: BrokerIdentity, topic: str, qid: int, span: tuple[int, int, int, int],
                    expression: str, progress: ProgressFn | None, max_num: int | None = None) -> QueueScan:
        """Read [begin, end) of one queue in pulls of 32, as mqadmin's pull consumer does."""
        from mqadmin.reports import QueueScan

        lo, hi, begin, end = span
        scan = QueueScan(b.broker_name, topic, qid, lo, hi, begin, end)
        offset = begin
        status = "NO_MATCHED_MESSAGE"
        while offset < end and (max_num is None or len(scan.messages) < max_num):
            want = PULL_BATCH if max_num is None else min(PULL_BATCH, max_num - len(scan.messages))
            got = self.client.read_queue(b.broker_addr, topic, qid, offset, want, expression)
            status = got.status
            for r in got.messages:
                if r.queue_offset >= end:
                    break
                scan.messages.append(r)
            pull_status = _PULL_STATUS.get(status, "OFFSET_ILLEGAL")
            if pull_status == "NO_MATCHED_MSG" or (pull_status != "FOUND" and status not in _SCAN_GOES_ON):
                scan.pull_notes.append((pull_status, got.next_begin_offset))
            if got.next_begin_offset <= offset:
                break
            offset = got.next_begin_offset
            if progress is not None:
                progress(min(offset, end) - begin, max(end - begin, 1))
            if status not in _SCAN_GOES_ON:
                break
        scan.status = status
        return scan

    def _span(self, addr: str, topic: str, qid: int, begin_ts: int | None,
              end_ts: int | None) -> tuple[int, int, int, int]:
        """(queue min, queue max, first offset, end offset) of a queue for an optional time range."""
        lo = self.client.get_min_offset(addr, topic, qid)
        hi = self.client.get_max_offset(addr, topic, qid)
        begin, end = lo, hi
        if begin_ts is not None:
            begin = max(lo, self.client.search_offset(addr, topic, qid, begin_ts))
        if end_ts is not None:
            end = min(hi, self.client.search_offset(addr, topic, qid, end_ts))
        return lo, hi, begin, end

    @staticmethod
    def _queue_ids(info: TopicInfo) -> list[int]:
        return list(range(max(info.read_queue_nums, info.write_queue_nums)))

    def print_msg_by_queue(self, topic: str, broker_name: str, queue_id: int, sub_expression: str = "*",
                           begin_timestamp: int | None = None, end_timestamp: int | None = None,
                           progress: ProgressFn | None = None) -> QueueScan:
        b = self.check_target(broker_name=broker_name)[0]
        (_, info), = self._require_topic(topic, [b])
        if queue_id not in self._queue_ids(info):
            raise NotFoundError(f"queue {queue_id} of topic [{topic}] does not exist")
        span = self._span(b.broker_addr, topic, queue_id, begin_timestamp, end_timestamp)
        return self._scan_queue(b, topic, queue_id, span, self._check_expression(sub_expression), progress)

    def iter_print_msg(self, topic: str, sub_expression: str = "*", begin_timestamp: int | None = None,
                       end_timestamp: int | None = None, progress: ProgressFn | None = None) -> Iterator[QueueScan]:
        found = self._require_topic(topic)
        expression = self._check_expression(sub_expression)
        for b, info in found:
            for qid in self._queue_ids(info):
                span = self._span(b.broker_addr, topic, qid, begin_timestamp, end_timestamp)
                yield self._scan_queue(b, topic, qid, span, expression, progress)

    def send_message(self, topic: str, body: bytes, keys: str | None = None, tags: str | None = None,
                     broker_name: str | None = None, queue_id: int | None = None, msg_trace: bool = False
                     ) -> SendResult:
        """SEND_MESSAGE_V2 (the broker adds UNIQ_KEY; the transport picks the queue unless given)."""
        if broker_name is not None:
            self.check_target(broker_name=broker_name)
        props: dict[str, str] = {}
        if keys:
            props["KEYS"] = keys
        if tags:
            props["TAGS"] = tags
        props["WAIT"] = "true"
        return self.client.send_message(topic, body, props, broker_name, queue_id, msg_trace=msg_trace)

    def consume_message(self, topic: str, group: str, broker_name: str | None = None,
                        queue_id: int | None = None, offset: int | None = None,
                        begin_timestamp: int | None = None, end_timestamp: int | None = None,
                        max_num: int = 128) -> list[QueueScan]:
        """A pull consumer's read (mqadmin consumeMessage): nothing is committed.

        ``offset`` (-o) starts the read no earlier than the queue's min offset and the begin time's offset,
        as Apache's executeByCondition takes max(minOffset or searchOffset(begin), offset): an offset below
        what retention kept reads from the oldest message kept, not OFFSET_ILLEGAL. A negative ``offset`` is
        still refused, as a pull at it is (the dashboard's "browse a queue" from -5 says so)."""
        if offset is not None and offset < 0:
            raise AdminError(f"queueOffset must be >= 0, got {offset}")
        found = self._require_topic(topic)
        if broker_name is not None:
            chosen = {b.broker_name for b in self.check_target(broker_name=broker_name)}
            found = [(b, i) for b, i in found if b.broker_name in chosen]
        now = self.clock()
        for name, ts in (("beginTimestamp", begin_timestamp), ("endTimestamp", end_timestamp)):
            if ts is not None and ts > now:
                raise AdminError(f"{name} {ts} is in the future (now is {now})")
        scans = []
        remaining = max_num
        for b, info in found:
            qids = self._queue_ids(info)
            if queue_id is not None:
                if queue_id not in qids:
                    raise NotFoundError(f"queue {queue_id} of topic [{topic}] does not exist")
                qids = [queue_id]
            for qid in qids:
                if remaining <= 0:
                    break
                lo, hi, begin, end = self._span(b.broker_addr, topic, qid, begin_timestamp, end_timestamp)
                if offset is not None:  # Apache's executeByCondition: -o only moves the start further on
                    begin = max(begin, offset)
                scans.append(self._consume_queue(b, topic, qid, (lo, hi, begin, end), remaining))
                remaining -= len(scans[-1].messages)
        return scans

    def _consume_queue(self, b: BrokerIdentity, topic: str, qid: int, span: tuple[int, int, int, int],
                       max_num: int) -> QueueScan:
        """One queue of consumeMessage. A begin past the end is not read at all (the command says "no
        matched msg", as Apache's does for an offset beyond maxOffset); a queue with nothing to read
        gets the NO_NEW_MSG that Apache's loop, which always pulls at least once, reports for it."""
        from mqadmin.reports import QueueScan

        lo, hi, begin, end = span
        if begin > end:
            return QueueScan(b.broker_name, topic, qid, lo, hi, begin, end, status="NO_MATCHED_MSG")
        scan = self._scan_queue(b, topic, qid, span, "*", None, max_num)
        if not scan.messages and not scan.pull_notes:
            scan.pull_notes.append(("NO_NEW_MSG", begin))
        return scan

    def decode_message_id(self, msg_id: str) -> DecodedMessageId:
        from mqadmin.msgid import decode_message_id

        return decode_message_id(msg_id, self.clock)

    def message_tracks(self, record: MessageRecord) -> list[dict[str, Any]]:
        """Apache's messageTrackDetail, per group holding offsets on the message's topic: NOT_ONLINE (with
        the broker's refusal as exceptionDesc) when no consumer of the group is connected, PULL for a pull
        consumer, CONSUMED / CONSUMED_BUT_FILTERED / NOT_CONSUME_YET for a push consumer by its committed
        offset and its subscription's tags, UNKNOWN otherwise (a pop consumer)."""
        try:  # the route, not GET_TOPIC_CONFIG (Topic Get): as Apache finds the topic's brokers
            found = self._routed_brokers(record.topic)
        except NotFoundError:
            return []
        stored_on = [b for b, _ in found if b.broker_addr == record.store_host]
        addr = (stored_on[0] if stored_on else found[0][0]).broker_addr
        tracks = []
        for group in self.client.query_topic_consume_by_who(addr, record.topic):
            track: dict[str, Any] = {"consumerGroup": group, "trackType": "UNKNOWN", "exceptionDesc": None}
            tracks.append(track)
            conn = self.client.consumer_connection(addr, group)
            if conn is None or not conn.connections:
                track["trackType"] = "NOT_ONLINE"
                track["exceptionDesc"] = f"CODE:206 DESC:the consumer group[{group}] not online"
            elif conn.consume_type == "CONSUME_ACTIVELY":
                track["trackType"] = "PULL"
            elif conn.consume_type == "CONSUME_PASSIVELY":
                committed = self.client.query_consumer_offset(addr, group, record.topic, record.queue_id)
                if committed <= record.queue_offset:
                    track["trackType"] = "NOT_CONSUME_YET"
                else:
                    track["trackType"] = "CONSUMED"
                    for sub in conn.subscriptions:
                        tags = {t.strip() for t in sub.sub_string.split("||") if t.strip()} \
                            if sub.expression_type in ("", "TAG") else {"*"}
                        if sub.topic == record.topic and tags and "*" not in tags and record.tags not in tags:
                            track["trackType"] = "CONSUMED_BUT_FILTERED"
        return tracks

    # -- ACL 2.0 --------------------------------------------------------------------------------------
    def _acl_addrs(self, broker_addrs: list[str] | None) -> list[str]:
        return broker_addrs if broker_addrs else [b.broker_addr for b in self.brokers()]

    def create_user(self, username: str, password: str, user_type: str | None = None,
                    broker_addrs: list[str] | None = None, read_back: bool = True) -> User | None:
        """AUTH_CREATE_USER on each broker (default all); the user as the first one stores it (None
        when it cannot be read back, see ``_stored_user``; None unread without ``read_back``: mqadmin's
        printed lines do not need it, and a refused read-back is one more Deny in the audit log)."""
        from broker_core.auth.model import User, UserStatus, UserType

        try:
            utype = UserType.parse(user_type) if user_type is not None else UserType.NORMAL
        except ValueError as e:
            raise AdminError(str(e)) from None
        addrs = self._acl_addrs(broker_addrs)
        change_each(addrs, lambda addr: self.client.create_user(addr, User(username, password, utype,
                                                                           UserStatus.ENABLE)), _same)
        return self._stored_user(addrs[0], username) if read_back else None

    def _stored_user(self, addr: str, username: str) -> User | None:
        """The user as ``addr`` stores it after a change, for --json only; None when it cannot be read.
        Why best-effort: the change's answer is its success (Apache sends nothing more), and
        AUTH_GET_USER needs Cluster Get, which a delegated admin with only Update (or a super user
        who just demoted itself) does not have: the command must not fail after the change was made."""
        try:
            return self.client.get_user(addr, username.strip())
        except AdminError:
            return None

    def update_user(self, username: str, password: str | None = None, user_type: str | None = None,
                    user_status: str | None = None, broker_addrs: list[str] | None = None,
                    read_back: bool = True) -> User | None:
        """AUTH_UPDATE_USER on each broker; the user read back as ``create_user`` does."""
        addrs = self._acl_addrs(broker_addrs)
        change_each(addrs, lambda addr: self.client.update_user(addr, username, password, user_type, user_status),
                    _same)
        return self._stored_user(addrs[0], username) if read_back else None

    def delete_user(self, username: str, broker_addrs: list[str] | None = None) -> None:
        change_each(self._acl_addrs(broker_addrs), lambda addr: self.client.delete_user(addr, username), _same)

    def get_user(self, username: str, broker_addr: str | None = None) -> User | None:
        return self.client.get_user(self._addr(broker_addr), username)

    def list_users(self, filter_text: str | None = None, broker_addr: str | None = None) -> list[User]:
        return self.client.list_users(self._addr(broker_addr), filter_text)

    def create_acl(self, acl: Acl, broker_addrs: list[str] | None = None, read_back: bool = True) -> Acl | None:
        """AUTH_CREATE_ACL (create or merge) on each broker; the merged ACL as the first one stores it
        (None when it cannot be read back, see ``_stored_acl``; None unread without ``read_back``)."""
        addrs = self._acl_addrs(broker_addrs)
        change_each(addrs, lambda addr: self.client.create_acl(addr, acl), _same)
        return self._stored_acl(addrs[0], acl) if read_back else None

    def _stored_acl(self, addr: str, acl: Acl) -> Acl | None:
        """The subject's ACL as ``addr`` stores it after a change, for --json only; None when it cannot
        be read. Best-effort for the reason of ``_stored_user`` (AUTH_GET_ACL needs Cluster Get)."""
        try:
            return self.client.get_acl(addr, acl.subject.key)
        except AdminError:
            return None

    def update_acl(self, acl: Acl, broker_addrs: list[str] | None = None, read_back: bool = True) -> Acl | None:
        """AUTH_UPDATE_ACL on each broker; the ACL read back as ``create_acl`` does."""
        addrs = self._acl_addrs(broker_addrs)
        change_each(addrs, lambda addr: self.client.update_acl(addr, acl), _same)
        return self._stored_acl(addrs[0], acl) if read_back else None

    def delete_acl(self, subject: str, resource: str | None = None, broker_addrs: list[str] | None = None) -> None:
        change_each(self._acl_addrs(broker_addrs), lambda addr: self.client.delete_acl(addr, subject, resource),
                    _same)

    def get_acl(self, subject: str, broker_addr: str | None = None) -> Acl | None:
        return self.client.get_acl(self._addr(broker_addr), subject)

    def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None,
                  broker_addr: str | None = None) -> list[Acl]:
        return self.client.list_acls(self._addr(broker_addr), subject_filter, resource_filter)

    def copy_users_to(self, target: Admin, usernames: list[str] | None = None, source_addr: str | None = None,
                      target_addr: str | None = None) -> list[str]:
        """copyUser: each user is created on the target, or updated in every field when it exists there.

        Every named user is read from the source before anything is written: one that does not exist
        is not found (exit 3) and nothing is copied, rather than failing half way with the users
        before it already on the target (Apache's CopyUsersSubCommand also reads them all first)."""
        src, dst = self._addr(source_addr), target._addr(target_addr)
        names = ([u.username for u in self.client.list_users(src)] if usernames is None
                 else [n.strip() for n in usernames])
        users = {name: self._user_or_none(src, name) for name in names}
        missing = [name for name, user in users.items() if user is None]
        if missing:
            what = f"The user {missing[0]} is not exist" if len(missing) == 1 else \
                f"The users {', '.join(missing)} are not exist"
            raise NotFoundError(f"{what}; nothing was copied")
        copied = []
        for name, user in ((n, u) for n, u in users.items() if u is not None):
            if target.client.get_user(dst, name) is None:
                target.client.create_user(dst, user)
            else:
                target.client.update_user(dst, name, user.password, user.user_type.value, user.user_status.value)
            copied.append(name)
        return copied

    def _user_or_none(self, addr: str, username: str) -> User | None:
        """AUTH_GET_USER; None for a user that is not there, whether the broker answers with no user or
        refuses with "The user is not exist" (Java's broker does the latter)."""
        try:
            return self.client.get_user(addr, username)
        except WrongTargetError:  # the broker is not there: not a missing user
            raise
        except NotFoundError:
            return None

    def copy_acls_to(self, target: Admin, subjects: list[str] | None = None, progress: ProgressFn | None = None,
                     source_addr: str | None = None, target_addr: str | None = None) -> list[str]:
        """copyAcl: each subject's ACL merged into the target's (whose user must exist there).

        Every ACL is read, and every subject's user looked up on the target, before anything is
        written: a user missing there is not found (exit 3) and nothing is copied. The copy used to
        write the ACLs before it and then fail, printing none of them (as copy_users_to does)."""
        src, dst = self._addr(source_addr), target._addr(target_addr)
        wanted = subjects if subjects is not None else [a.subject.key for a in self.client.list_acls(src)]
        acls = [acl for acl in (self.client.get_acl(src, subject) for subject in wanted) if acl is not None]
        missing = [acl.subject.key for acl in acls if target._user_or_none(dst, acl.subject.name) is None]
        if missing:
            raise NotFoundError(f"The subject of {', '.join(missing)} is not exist on the target; nothing was copied")
        copied = []
        for i, acl in enumerate(acls, 1):
            target.client.create_acl(dst, acl)
            copied.append(acl.subject.key)
            if progress is not None:
                progress(i, len(acls))
        return copied

    def explain_acl(self, subject: str, resource: str, actions: list[str], source_ip: str | None,
                    broker_addr: str | None = None) -> Explanation:
        """Which entry of the subject's ACL decides (and why), evaluated here from the broker's user
        and ACL with the broker's own evaluator — so the answer is the broker's, over any transport.

        A subject, resource, action list or source IP that does not parse is the caller's mistake, not
        a failure of the question: UsageProblem (exit 2), before any broker is asked. The source IP
        must be one address (IPv4 or IPv6, a ``:port`` is dropped as the broker drops it): a policy
        entry may name a CIDR, a client never comes from one, and ``999.1.1.1`` used to be evaluated
        as if it were an address."""
        import ipaddress

        from broker_core.auth.authorization import AuthorizationContext, source_ip_of
        from broker_core.auth.errors import AuthError
        from broker_core.auth.evaluator import evaluate

        if not [a for a in actions if a.strip()]:
            raise UsageProblem("no action given: -a/--actions names one or more of Pub, Sub, Create, Update, "
                               "Delete, Get, List, All")
        if source_ip is not None:
            ip = source_ip_of(source_ip)
            try:
                ipaddress.ip_address(ip or "")
            except ValueError:
                raise UsageProblem(f"invalid source IP {source_ip!r}: expected one IPv4 or IPv6 address") from None
        try:
            ctx = AuthorizationContext(subject, resource, actions, source_ip)
        except AuthError as e:
            raise UsageProblem(e.message) from None
        except ValueError as e:  # an unknown action or resource type: the parser's own words, no type name
            raise UsageProblem(str(e)) from None
        addr = self._addr(broker_addr)
        subj = ctx.subject
        user = self._user_or_none(addr, subj.name) if subj is not None else None  # Java's broker: "not exist"
        acl = self.client.get_acl(addr, subj.key) if subj is not None and user is not None else None
        return evaluate(subj, user, acl, ctx.resource, ctx.actions, ctx.source_ip)

    def explain_acl_each(self, subject: str, resource: str, actions: list[str], source_ip: str | None,
                         brokers: list[BrokerIdentity] | None = None) -> list[BrokerExplanation]:
        """``explain_acl`` on each broker (default every broker), with whether that broker checks
        authorization at all. Asking the first broker only answered "user does not exist" for a user
        another broker allows, and "Deny" from a broker with authorization off, which serves everyone.
        A broker that cannot be asked (it refuses the credentials, say) keeps its error and the others
        still answer; malformed input is refused (UsageProblem) before any broker is asked."""
        out = []
        for b in self.brokers() if brokers is None else brokers:
            try:
                x = self.explain_acl(subject, resource, actions, source_ip, b.broker_addr)
            except UsageProblem:
                raise
            except AdminError as e:
                out.append(BrokerExplanation(b, None, error=e.message))
                continue
            out.append(BrokerExplanation(b, x, self._authorization_enabled(b.broker_addr)))
        return out

    def _authorization_enabled(self, addr: str) -> bool | None:
        """The broker's ``authorizationEnabled`` (absent: false, the broker's default); None when its
        config cannot be read."""
        try:
            config = self.client.broker_config(addr)
        except AdminError:
            return None
        return config.get("authorizationEnabled", "false").strip().lower() == "true"

    # -- store maintenance (a store directory target only) --------------------------------------------
    def _maintenance(self, what: str) -> StoreMaintenance:
        if self.maintenance is None:
            raise AdminError(f"{what} works on a store directory: give --store DIR (it cannot run over -n)")
        return self.maintenance

    def verify_store(self, progress: ProgressFn | None = None) -> VerifyReport:
        return self._maintenance("verifyStore").verify_store(progress)

    def lost_found_records(self) -> list[LostRecord]:
        return self._maintenance("verifyStore --lostFound").lost_found_records()

    def rebuild_store(self, parts: list[str], master: str, verify: bool, config_file: str | None = None,
                      progress: Callable[[str, int, int], None] | None = None, force: bool = False
                      ) -> RebuildSummary:
        return self._maintenance("rebuildStore").rebuild_store(parts, master, verify, config_file, progress, force)

    # -- dashboard figures (issue 14; parsed from runtime info in mqadmin.figures) -------------------
    # mqadmin.figures is imported in these methods: only the dashboard asks, not every command's start-up.
    def store_positions(self, broker_addr: str | None = None) -> StorePositionsInfo:
        from mqadmin.figures import store_positions_from

        return store_positions_from(self.broker_status(broker_addr))

    def timer_backlog(self, broker_addr: str | None = None) -> TimerBacklogInfo | None:
        from mqadmin.figures import timer_backlog_from

        return timer_backlog_from(self.broker_status(broker_addr))

    def delay_levels(self, broker_addr: str | None = None) -> list[DelayLevelInfo]:
        from mqadmin.figures import delay_levels_from

        return delay_levels_from(self.broker_status(broker_addr))

    def transaction_backlog(self, broker_addr: str | None = None) -> TransactionBacklogInfo:
        from mqadmin.figures import transaction_backlog_from

        return transaction_backlog_from(self.broker_status(broker_addr))

    def group_lag(self, group: str, among: list[BrokerIdentity] | None = None,
                  dlq_queues: list[QueueStatus] | None = None) -> GroupLag:
        """GET_CONSUME_STATS of every broker (of ``among`` when given: the dashboard asks one broker per
        call, so a timeout names it) for ``group``: its retry topics' lag (%RETRY%group and pop's
        %RETRY%group_topic / group+topic) and its %DLQ% size are counted apart from the topics it consumes.
        ``dlq_queues``: the %DLQ% topic's queues on those brokers when the caller has read them already
        ([] when they have no such topic): the dashboard reads every topic's stats in a refresh, and a
        GET_TOPIC_STATS_INFO a group and broker again was 300 more requests at 300 groups."""
        dlq = f"%DLQ%{group}"
        rows = self._consume_stats(group, among=among).rows
        try:
            dlq_depth = sum(max(0, q.max_offset - q.min_offset)
                            for q in (self.topic_status(dlq, among) if dlq_queues is None else dlq_queues))
        except NotFoundError:
            dlq_depth = 0
        return _group_lag_of(group, rows, dlq_depth)

    def broker_group_stats(self, broker: BrokerIdentity) -> dict[str, list[ConsumeQueueStats]]:
        """Every subscription group's consume stats rows on ``broker`` from one GET_BROKER_CONSUME_STATS
        (317), sorted as GET_CONSUME_STATS' (topic, queue). Why: a GET_CONSUME_STATS a group was 300
        requests a refresh at 300 groups.

        The answer is Apache's fetchAllConsumeStatsInBroker, not a GET_CONSUME_STATS a group: it lists
        a topic's write queues (not its read queues), leaves out a topic the group's online consumers do
        not subscribe to, and says 0 for a queue never committed on (:meth:`group_lags_from` asks those).
        The caller compares the topics with what it knows and reads a group whose figures would differ
        with :meth:`group_lag`. Cluster [Get] under ACL 2.0, which a Normal user lacks: NoPermissionError,
        and the caller asks group by group."""
        stats = self.client.broker_consume_stats(broker.broker_addr, False)
        return {group: sorted((row for view in per_topic for row in view.rows),
                              key=lambda r: (r.topic, r.broker_name, r.queue_id))
                for group, per_topic in stats.groups}

    def group_lags_from(self, broker: BrokerIdentity, stats: dict[str, list[ConsumeQueueStats]]
                        ) -> dict[str, GroupLag]:
        """Each group's lag on ``broker`` from its :meth:`broker_group_stats` rows, as :meth:`group_lag`
        shows it but for the %DLQ% depth (0: the caller has it from the topics' stats). A consumer offset
        of 0 is asked (QUERY_CONSUMER_OFFSET), as GET_CONSUME_STATS' reader asks it, so a queue never
        committed on shows -1 as there."""
        return {group: _group_lag_of(group, [
                    dataclasses.replace(r, consumer_offset=self.client.query_consumer_offset(
                        broker.broker_addr, group, r.topic, r.queue_id)) if r.consumer_offset == 0 else r
                    for r in rows], 0)
                for group, rows in stats.items()}


def _group_lag_of(group: str, rows: Iterable[ConsumeQueueStats], dlq_depth: int) -> GroupLag:
    """``group``'s consume stats rows as the dashboard shows them: its retry topics' lag (%RETRY%group and
    pop's %RETRY%group_topic / group+topic) apart from the topics it consumes."""
    from mqadmin.figures import GroupLag, QueueLag

    retry = f"%RETRY%{group}"
    queues, retry_depth = [], 0
    for s in rows:
        if s.topic == retry or s.topic.startswith((f"{retry}_", f"{retry}+")):
            retry_depth += max(0, s.broker_offset - max(s.consumer_offset, 0))
            continue
        queues.append(QueueLag(s.topic, s.broker_name, s.queue_id, s.broker_offset, s.consumer_offset,
                               s.inflight, s.blocked, s.last_timestamp))
    return GroupLag(group, queues, retry_depth, dlq_depth)
