"""Name server route data: which brokers form which cluster and which queues each serves per topic.

Why: clients find brokers through routes (GET_ROUTEINFO_BY_TOPIC), mqadmin lists clusters
(GET_BROKER_CLUSTER_INFO), and brokers keep themselves in the table by REGISTER_BROKER every 30 s
(dropped after 120 s of silence). The table and its rules live here, socket-free, so the asyncio
name server only translates requests, and an in-process Admin builds the same route for one local
broker (``Broker.registration()`` registered into a ``RouteInfoManager``) instead of faking it.
JSON shapes (``to_dict``) are RocketMQ's TopicRouteData / ClusterInfo field names. BrokerData and
ClusterInfo are defined in ``cluster_info`` (mqadmin needs them without the route table) and named here too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from broker_core.store.topic_config import PERM_READ, PERM_WRITE

from .cluster_info import MASTER_ID, BrokerData, ClusterInfo

log = logging.getLogger("rmqops.namesrv")

BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000  # RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
REGISTER_BROKER_INTERVAL_MS = 30_000  # registerBrokerToNameServer period (brokers)
ADDRESS_CONFLICT_LOG_INTERVAL_MS = 60_000  # one warning a minute while two brokers take turns


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"brokerDatas": [b.to_dict() for b in self.broker_datas],
                               "filterServerTable": dict(self.filter_server_table)}
        if self.order_topic_conf is not None:  # fastjson leaves a null field out
            out["orderTopicConf"] = self.order_topic_conf
        out["queueDatas"] = [q.to_dict() for q in self.queue_datas]
        return out


@dataclass(frozen=True, slots=True)
class TopicQueueConfig:
    """The part of a TopicConfig the name server keeps (REGISTER_BROKER's topicConfigTable)."""

    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0
    order: bool = False


@dataclass(slots=True)
class BrokerRegistration:
    """REGISTER_BROKER's header and body: who the broker is and which topics it serves."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int = MASTER_ID
    ha_server_addr: str = ""
    topics: list[TopicQueueConfig] = field(default_factory=list)
    data_version: int = 0
    # REGISTER_BROKER's heartbeatTimeoutMillis (the broker's brokerChannelExpiredTime): how long this
    # broker may stay silent before it expires; None takes the name server's own setting
    heartbeat_timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    master_addr: str
    ha_server_addr: str


@dataclass(slots=True)
class _LiveBroker:
    cluster_name: str
    broker_name: str
    broker_id: int
    last_update_timestamp: int
    data_version: int
    ha_server_addr: str
    channel: Hashable | None
    heartbeat_timeout_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS

    def expired(self, now: int) -> bool:
        """Java's scanNotActiveBroker: last registration + this broker's own timeout has passed."""
        return self.last_update_timestamp + self.heartbeat_timeout_ms < now


class RouteInfoManager:
    """The name server's tables (RouteInfoManager): clusters, brokers, topic queues, live brokers."""

    def __init__(self, clock: Callable[[], int],
                 broker_channel_expired_time_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS,
                 delete_topic_with_broker_registration: bool = False) -> None:
        self.clock = clock
        self.broker_channel_expired_time_ms = broker_channel_expired_time_ms
        # NamesrvConfig.deleteTopicWithBrokerRegistration (false, as RocketMQ): a registration that no
        # longer lists a topic takes the broker's queues of it out of the route only when true; else
        # topics leave by DELETE_TOPIC_IN_NAMESRV (deleteTopic) or with the last address of their broker
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self._brokers: dict[str, BrokerData] = {}
        self._clusters: dict[str, set[str]] = {}
        self._topic_queues: dict[str, dict[str, QueueData]] = {}
        self._live: dict[str, _LiveBroker] = {}
        self._conflicts_logged: dict[tuple[str, int], int] = {}  # (brokerName, brokerId) -> when last logged
        self._lock = threading.RLock()

    def register_broker(self, reg: BrokerRegistration, channel: Hashable | None = None) -> RegisterBrokerResult:
        """REGISTER_BROKER: add or refresh the broker and replace its topics' queue data (masters only)."""
        with self._lock:
            self._release_address_of_other_names(reg)
            self._clusters.setdefault(reg.cluster_name, set()).add(reg.broker_name)
            data = self._brokers.get(reg.broker_name)
            if data is None:
                data = BrokerData(reg.cluster_name, reg.broker_name)
                self._brokers[reg.broker_name] = data
            for bid, addr in list(data.broker_addrs.items()):  # one address per id (a restarted broker moves)
                if addr == reg.broker_addr and bid != reg.broker_id:
                    del data.broker_addrs[bid]
            current = data.broker_addrs.get(reg.broker_id)
            self._check_address_conflict(reg, current)
            data.broker_addrs[reg.broker_id] = reg.broker_addr
            prev = self._live.get(reg.broker_addr)
            # Java replaces queue data only when the broker's topic table changed (its DataVersion) or
            # on a first registration, so a wipeWritePerm/addWritePerm survives the periodic ones. A
            # first registration is also one that (re)takes its name and id: after a broker of the same
            # name came and went (its unregistering took the name's queues), or moved to a new address.
            changed = (current != reg.broker_addr or prev is None or reg.data_version == 0
                       or prev.data_version != reg.data_version)
            if reg.broker_id == MASTER_ID:
                self._update_queue_datas(reg, changed)
            timeout = reg.heartbeat_timeout_ms or self.broker_channel_expired_time_ms
            self._live[reg.broker_addr] = _LiveBroker(reg.cluster_name, reg.broker_name, reg.broker_id, self.clock(),
                                                      reg.data_version, reg.ha_server_addr, channel, timeout)
            master = data.master_addr() or ""
            ha = self._live[master].ha_server_addr if master in self._live else ""
            return RegisterBrokerResult(master, ha)

    def _update_queue_datas(self, reg: BrokerRegistration, changed: bool) -> None:
        """A master's topics into the route: all the registration carries when its topic table changed
        (after a topic change a broker sends only the topics changed), else (Java's
        isTopicConfigChanged) those the route has no queue data of this broker for. Why: a topic whose
        route was lost (DELETE_TOPIC_IN_NAMESRV to the name server alone, a name server restarted
        while the broker kept its DataVersion) comes back with the next periodic registration."""
        if changed and self.delete_topic_with_broker_registration:
            served = {t.topic_name for t in reg.topics}
            for topic, queues in list(self._topic_queues.items()):
                if topic not in served and reg.broker_name in queues:
                    del queues[reg.broker_name]
                    if not queues:
                        del self._topic_queues[topic]
        for t in reg.topics:
            queues = self._topic_queues.setdefault(t.topic_name, {})
            if changed or reg.broker_name not in queues:
                queues[reg.broker_name] = QueueData(reg.broker_name, t.read_queue_nums, t.write_queue_nums, t.perm,
                                                    t.topic_sys_flag)

    def _release_address_of_other_names(self, reg: BrokerRegistration) -> None:
        """One address is one broker: a registration from an address another broker name holds (the
        broker was renamed, updateBrokerConfig brokerName, and restarted there) unregisters that name's
        entry at the address. Why: liveness, expiry and unregistering go by address, so from now on they
        reach the new name only, and the old one kept the address and its topics' queues for good."""
        for other in [d for d in self._brokers.values() if d.broker_name != reg.broker_name]:
            for bid, addr in list(other.broker_addrs.items()):
                if addr == reg.broker_addr:
                    log.warning("broker %s (cluster %s) registered from %s, which broker %s (cluster %s, brokerId %d) "
                                "held: %s is taken out of the routes", reg.broker_name, reg.cluster_name, addr,
                                other.broker_name, other.cluster, bid, other.broker_name)
                    self.unregister_broker(other.cluster, addr, other.broker_name, bid)

    def _check_address_conflict(self, reg: BrokerRegistration, current: str | None) -> None:
        """A registration that takes the address of a broker name and id from another broker still
        alive. As RocketMQ, the newest registration wins; a broker that moved (restarted elsewhere)
        does that once. Two brokers given one brokerName and brokerId (a copied broker.conf) do it
        at every registration: clients are sent to either in turn, and the messages of one queue
        split between two stores with colliding offsets. RocketMQ says nothing; the operator reads
        it here, once a minute while it lasts."""
        if current is None or current == reg.broker_addr:
            return
        other = self._live.get(current)
        now = self.clock()
        if other is None or now - other.last_update_timestamp >= other.heartbeat_timeout_ms:
            return
        key = (reg.broker_name, reg.broker_id)
        if now - self._conflicts_logged.get(key, -ADDRESS_CONFLICT_LOG_INTERVAL_MS) < ADDRESS_CONFLICT_LOG_INTERVAL_MS:
            return
        self._conflicts_logged[key] = now
        log.warning("broker %s (cluster %s, brokerId %d) registered from %s while %s, registered under the same "
                    "name and id %.1f s ago, has not expired: if both are running, clients are sent to either "
                    "in turn and their messages split between two stores; give each broker its own brokerName",
                    reg.broker_name, reg.cluster_name, reg.broker_id, reg.broker_addr, current,
                    (now - other.last_update_timestamp) / 1000)

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """UNREGISTER_BROKER (a clean shutdown), or expiry: the broker's address and, when it was the
        last of its name, its queues and cluster membership go."""
        with self._lock:
            self._live.pop(broker_addr, None)
            data = self._brokers.get(broker_name)
            if data is None:
                return
            if data.broker_addrs.get(broker_id) == broker_addr:
                del data.broker_addrs[broker_id]
            if data.broker_addrs:
                return
            del self._brokers[broker_name]
            names = self._clusters.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self._clusters[cluster_name]
            for topic, queues in list(self._topic_queues.items()):
                queues.pop(broker_name, None)
                if not queues:
                    del self._topic_queues[topic]

    def scan_not_active_brokers(self) -> list[str]:
        """Brokers silent for longer than their own heartbeatTimeoutMillis (120 s when they sent none)
        are removed; returns their addresses (the caller closes channels)."""
        now = self.clock()
        with self._lock:
            gone = [(addr, b) for addr, b in self._live.items() if b.expired(now)]
            for addr, b in gone:
                self.unregister_broker(b.cluster_name, addr, b.broker_name, b.broker_id)
        return [addr for addr, _ in gone]

    def channel_closed(self, channel: Hashable) -> list[str]:
        """A broker's connection closed: unregister every broker that registered over it."""
        with self._lock:
            gone = [(addr, b) for addr, b in self._live.items() if b.channel is not None and b.channel == channel]
            for addr, b in gone:
                self.unregister_broker(b.cluster_name, addr, b.broker_name, b.broker_id)
        return [addr for addr, _ in gone]

    # -- queries ----------------------------------------------------------------------------------
    def pick_topic_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC; None is TOPIC_NOT_EXIST ("No topic route info in name server")."""
        with self._lock:
            queues = self._topic_queues.get(topic)
            if not queues:
                return None
            qds = [queues[n] for n in sorted(queues)]
            bds = [BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs), b.enable_acting_master)
                   for n in sorted(queues) if (b := self._brokers.get(n)) is not None]
            return TopicRouteData(qds, bds)

    def cluster_info(self) -> ClusterInfo:
        with self._lock:
            return ClusterInfo({n: BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs), b.enable_acting_master)
                                for n, b in self._brokers.items()},
                               {c: sorted(ns) for c, ns in self._clusters.items()})

    def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        with self._lock:
            return sorted(self._topic_queues)

    def topics_of_cluster(self, cluster_name: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER."""
        with self._lock:
            names = self._clusters.get(cluster_name, set())
            return sorted(t for t, qs in self._topic_queues.items() if names & qs.keys())

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the topic's queue data, of one cluster's brokers or everywhere."""
        with self._lock:
            queues = self._topic_queues.get(topic)
            if queues is None:
                return
            names = set(queues) if cluster_name is None else self._clusters.get(cluster_name, set())
            for n in names:
                queues.pop(n, None)
            if not queues:
                del self._topic_queues[topic]

    def operate_write_perm_of_broker(self, broker_name: str, wipe: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327): every topic queue of
        ``broker_name`` loses the write bit, or becomes read+write; returns how many topics changed
        (as Java counts: every topic the broker serves). Routes only: the broker's own configs stay.
        A wipe lasts until ADD_WRITE_PERM, this name server restarts, or the broker registers anew
        (after it expired, restarted or changed its brokerPermission: a first registration or a full
        one with a new DataVersion rewrites every topic). A topic the broker creates or updates
        meanwhile is registered alone (registerIncrementBrokerData), so that topic alone takes its
        own perm again, as on Apache's name server."""
        with self._lock:
            count = 0
            for queues in self._topic_queues.values():
                qd = queues.get(broker_name)
                if qd is None:
                    continue
                perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
                queues[broker_name] = replace(qd, perm=perm)
                count += 1
            return count

    def broker_addrs_of_cluster(self, cluster_name: str) -> list[str]:
        """Master addresses of a cluster's brokers (how ``updateTopic -c`` finds where to create)."""
        with self._lock:
            out = []
            for n in sorted(self._clusters.get(cluster_name, set())):
                b = self._brokers.get(n)
                if b is not None and b.master_addr():
                    out.append(b.master_addr() or "")
            return out

