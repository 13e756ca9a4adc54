"""The name server's route table (RocketMQ's RouteInfoManager): clusters, brokers, topic queues,
broker liveness and the KV config.

Why apart from the socket code: registration, expiry and route building are rules (spec B.1) that
tests check directly; the name-server adapter (``namesrv``) only decodes frames into these calls.
Everything runs on the name server's event loop, so there are no locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.remoting.bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigBody,
    TopicRouteData,
)

log = logging.getLogger("rmqops.namesrv")

MASTER_ID = 0
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000  # namesrv drops a broker 120 s after its last registration


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str
    channel_id: str | None
    broker_name: str
    cluster: str
    broker_id: int


@dataclass(slots=True)
class RegisterResult:
    ha_server_addr: str | None
    master_addr: str | None
    order_topic_config: dict[str, str] = field(default_factory=dict)


class RouteInfoManager:
    def __init__(self, clock: Callable[[], int],
                 default_timeout_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS) -> None:
        self.clock = clock
        self.default_timeout_ms = default_timeout_ms
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.kv_config: dict[str, dict[str, str]] = {}

    # -- brokers -------------------------------------------------------------------------------
    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, data_version: DataVersion, topics: dict[str, TopicConfigBody],
                        timeout_ms: int | None = None, channel_id: str | None = None) -> RegisterResult:
        """REGISTER_BROKER: (re)record the broker, refresh its liveness, and let a master's topic table
        rewrite its queue data. Topics absent from the table are kept (deleteTopicWithBrokerRegistration
        is false in RocketMQ); DELETE_TOPIC_IN_NAMESRV removes them."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            bd = self.broker_addr_table[broker_name] = BrokerData(cluster=cluster, broker_name=broker_name)
        bd.cluster = cluster
        # one address holds one id: a restarted broker with a new id replaces its old entry
        for bid, addr in list(bd.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del bd.broker_addrs[bid]
        first = broker_addr not in self.broker_live_table
        bd.broker_addrs[broker_id] = broker_addr
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock(), timeout_ms if timeout_ms and timeout_ms > 0 else self.default_timeout_ms, data_version,
            ha_server_addr, channel_id, broker_name, cluster, broker_id)
        if broker_id == MASTER_ID or MASTER_ID not in bd.broker_addrs:
            for name, tc in topics.items():
                self.topic_queue_table.setdefault(name, {})[broker_name] = QueueData(
                    broker_name=broker_name, read_queue_nums=tc.read_queue_nums, write_queue_nums=tc.write_queue_nums,
                    perm=tc.perm, topic_sys_flag=tc.topic_sys_flag)
        if first:
            log.info("new broker registered, %s %s %s id=%d", cluster, broker_name, broker_addr, broker_id)
        master = bd.broker_addrs.get(MASTER_ID)
        result = RegisterResult(None, None, dict(self.kv_config.get(ORDER_TOPIC_CONFIG, {})))
        if broker_id != MASTER_ID and master is not None:
            live = self.broker_live_table.get(master)
            result.ha_server_addr = live.ha_server_addr if live else None
            result.master_addr = master
        return result

    def refresh(self, broker_addr: str) -> bool:
        """BROKER_HEARTBEAT / QUERY_DATA_VERSION keep a registered broker alive."""
        live = self.broker_live_table.get(broker_addr)
        if live is None:
            return False
        live.last_update_ms = self.clock()
        return True

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        live = self.broker_live_table.pop(broker_addr, None)
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None and bd.broker_addrs.get(broker_id) == broker_addr:
            del bd.broker_addrs[broker_id]
        if live is not None or bd is not None:
            log.info("broker unregistered, %s %s %s id=%d", cluster, broker_name, broker_addr, broker_id)
        self._drop_empty(broker_name, cluster)

    def _drop_empty(self, broker_name: str, cluster: str) -> None:
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None and bd.broker_addrs:
            return
        self.broker_addr_table.pop(broker_name, None)
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def _remove_live(self, broker_addr: str, why: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is None:
            return
        log.warning("broker %s (%s, %s) removed from routes: %s", broker_addr, live.broker_name, live.cluster, why)
        self.unregister_broker(live.cluster, broker_addr, live.broker_name, live.broker_id)

    def scan_not_active_broker(self) -> list[str]:
        """Drop brokers whose last registration is older than their timeout; returns their addresses."""
        now = self.clock()
        expired = [addr for addr, live in self.broker_live_table.items() if now - live.last_update_ms > live.timeout_ms]
        for addr in expired:
            self._remove_live(addr, f"no registration for more than {self.broker_live_table[addr].timeout_ms} ms")
        return expired

    def on_channel_destroy(self, channel_id: str) -> None:
        """A broker's connection closed: its registrations made over it are gone (as RocketMQ does)."""
        for addr in [a for a, live in self.broker_live_table.items() if live.channel_id == channel_id]:
            self._remove_live(addr, "its connection closed")

    # -- routes --------------------------------------------------------------------------------
    def pick_topic_route(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        route = TopicRouteData(queue_datas=[queues[name] for name in sorted(queues)])
        for name in sorted(queues):
            bd = self.broker_addr_table.get(name)
            if bd is not None:
                route.broker_datas.append(BrokerData(cluster=bd.cluster, broker_name=name,
                                                     broker_addrs=dict(sorted(bd.broker_addrs.items())),
                                                     enable_acting_master=bd.enable_acting_master))
        if not route.broker_datas:
            return None
        order_conf = self.kv_config.get(ORDER_TOPIC_CONFIG, {}).get(topic)
        if order_conf:
            route.order_topic_conf = order_conf
        return route

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={n: BrokerData(cluster=bd.cluster, broker_name=n, broker_addrs=dict(sorted(bd.broker_addrs.items())))
                               for n, bd in sorted(self.broker_addr_table.items())},
            cluster_addr_table={c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())})

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, q in self.topic_queue_table.items() if names & q.keys())

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the topic's queue data, only of that cluster's brokers when given."""
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        if cluster:
            for name in self.cluster_addr_table.get(cluster, set()):
                queues.pop(name, None)
        else:
            queues.clear()
        if not queues:
            del self.topic_queue_table[topic]

    # -- KV config -----------------------------------------------------------------------------
    def put_kv(self, namespace: str, key: str, value: str) -> None:
        self.kv_config.setdefault(namespace, {})[key] = value

    def get_kv(self, namespace: str, key: str) -> str | None:
        return self.kv_config.get(namespace, {}).get(key)

    def delete_kv(self, namespace: str, key: str) -> None:
        table = self.kv_config.get(namespace)
        if table is not None:
            table.pop(key, None)
            if not table:
                del self.kv_config[namespace]
