"""What a client needs from a topic's route: writable queues to send to, readable queues to consume.

Why a client-side view: the name server answers TopicRouteData (brokers with addresses, queue datas
with counts and perm); producers need the *write* queues of brokers that have a master, consumers the
*read* queues, and both need "broker name -> master address". The wire body itself is decoded by the
protocol package; this module only interprets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .message_queue import MessageQueue

MASTER_ID = 0
PERM_READ = 4
PERM_WRITE = 2


@dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str]

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_addr(self) -> str | None:
        """The master if there is one, else the slave with the lowest id (as Java's selectBrokerAddr)."""
        master = self.master_addr()
        if master:
            return master
        for bid in sorted(self.broker_addrs):
            return self.broker_addrs[bid]
        return None


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, topic: str, data: Mapping[str, Any]) -> TopicRoute:
        """Accept both JSON dialects: brokerAddrs keys quoted ("0") or already ints."""
        qds = tuple(
            QueueData(str(q["brokerName"]), int(q.get("readQueueNums", 0)), int(q.get("writeQueueNums", 0)),
                      int(q.get("perm", 0)), int(q.get("topicSysFlag", 0)))
            for q in data.get("queueDatas") or [])
        bds = []
        for b in data.get("brokerDatas") or []:
            addrs_raw = b.get("brokerAddrs") or {}
            items = addrs_raw.items() if isinstance(addrs_raw, Mapping) else addrs_raw
            addrs = {int(k): str(v) for k, v in items}
            bds.append(BrokerData(str(b.get("cluster", "")), str(b["brokerName"]), addrs))
        return cls(topic, qds, tuple(bds), data.get("orderTopicConf"), data)

    def broker(self, broker_name: str) -> BrokerData | None:
        for b in self.broker_datas:
            if b.broker_name == broker_name:
                return b
        return None

    def master_addr(self, broker_name: str) -> str | None:
        b = self.broker(broker_name)
        return b.master_addr() if b else None

    def publish_queues(self) -> list[MessageQueue]:
        """Writable queues of brokers with a master, in broker order (queue ids 0..writeQueueNums-1)."""
        if self.order_topic_conf:
            return self._ordered_publish_queues(self.order_topic_conf)
        out: list[MessageQueue] = []
        for qd in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if not qd.perm & PERM_WRITE or not self.master_addr(qd.broker_name):
                continue
            out.extend(MessageQueue(self.topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
        return out

    def _ordered_publish_queues(self, conf: str) -> list[MessageQueue]:
        # orderTopicConf "brokerA:8;brokerB:8" fixes the broker order and queue counts of an order topic.
        out: list[MessageQueue] = []
        for item in conf.split(";"):
            name, _, count = item.partition(":")
            if name and count.isdigit():
                out.extend(MessageQueue(self.topic, name, i) for i in range(int(count)))
        return out

    def subscribe_queues(self) -> list[MessageQueue]:
        """Readable queues of every broker of the route."""
        out: list[MessageQueue] = []
        for qd in self.queue_datas:
            if qd.perm & PERM_READ:
                out.extend(MessageQueue(self.topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
        return sorted(out)
