"""What a client reads from a topic's route: writable queues to send to, readable queues to consume.

Why a client-side view: the name server answers TopicRouteData (brokers with addresses, queue datas
with counts and perm; decoded by the protocol package). Producers need the *write* queues of brokers
that have a master, consumers the *read* queues, both need "broker name -> address".
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.remoting.bodies import BrokerData, MessageQueue, TopicRouteData

MASTER_ID = 0
PERM_READ = 4
PERM_WRITE = 2


def select_addr(broker: BrokerData) -> str | None:
    """The master if there is one, else the slave with the lowest id (Java's selectBrokerAddr)."""
    if MASTER_ID in broker.broker_addrs:
        return broker.broker_addrs[MASTER_ID]
    for bid in sorted(broker.broker_addrs):
        return broker.broker_addrs[bid]
    return None


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    data: TopicRouteData

    def broker(self, broker_name: str) -> BrokerData | None:
        for b in self.data.broker_datas:
            if b.broker_name == broker_name:
                return b
        return None

    def master_addr(self, broker_name: str) -> str | None:
        b = self.broker(broker_name)
        return b.broker_addrs.get(MASTER_ID) if b else None

    def addr(self, broker_name: str) -> str | None:
        b = self.broker(broker_name)
        return select_addr(b) if b else None

    def publish_queues(self) -> list[MessageQueue]:
        """Writable queues of brokers with a master, brokers by name, queue ids 0..writeQueueNums-1."""
        if self.data.order_topic_conf:
            return self._ordered_publish_queues(self.data.order_topic_conf)
        out: list[MessageQueue] = []
        for qd in sorted(self.data.queue_datas, key=lambda q: q.broker_name):
            if not qd.perm & PERM_WRITE or not self.master_addr(qd.broker_name):
                continue
            out.extend(MessageQueue(topic=self.topic, broker_name=qd.broker_name, queue_id=i)
                       for i in range(qd.write_queue_nums))
        return out

    def _ordered_publish_queues(self, conf: str) -> list[MessageQueue]:
        # orderTopicConf "brokerA:8;brokerB:8" fixes the broker order and queue counts of an order topic.
        out: list[MessageQueue] = []
        for item in conf.split(";"):
            name, _, count = item.partition(":")
            if name and count.isdigit():
                out.extend(MessageQueue(topic=self.topic, broker_name=name, queue_id=i) for i in range(int(count)))
        return out

    def subscribe_queues(self) -> list[MessageQueue]:
        """Readable queues of every broker of the route, in MessageQueue order."""
        out: list[MessageQueue] = []
        for qd in self.data.queue_datas:
            if qd.perm & PERM_READ:
                out.extend(MessageQueue(topic=self.topic, broker_name=qd.broker_name, queue_id=i)
                           for i in range(qd.read_queue_nums))
        return sorted(out)
