"""Pull consumer: the application chooses queues and offsets; the client pulls and stores offsets.

Why it exists beside the push consumer: operator tools (``mqadmin consumeMessage``, printMsg) and the
benchmark read given queues from given offsets without joining a rebalance; it registers with the
brokers as CONSUME_ACTIVELY so they still see the group online.
"""

from __future__ import annotations

import logging

from broker_core.remoting import RemotingCommand, ResponseCode
from broker_core.remoting.bodies import ConsumerData, MessageQueue, SubscriptionData

from .config_check import check_int
from .connection import RemotingConnection, RemotingError
from .consumer_api import ConsumerApi, PullResult
from .instance import BrokerError, MQClientInstance
from .subscription import build_subscription

log = logging.getLogger(__name__)


class PullConsumer:
    def __init__(self, group: str, instance: MQClientInstance) -> None:
        self.group = group
        self.instance = instance
        self.api = ConsumerApi(instance, group)
        self._subs: dict[str, SubscriptionData] = {}
        self._started = False
        self._heartbeat_sent: set[str] = set()  # brokers told of this group by this consumer

    async def start(self) -> None:
        self.instance.register_consumer(self.group, self)
        await self.instance.start()
        self._started = True

    async def shutdown(self) -> None:
        if self._started:
            self._started = False
            await self.instance.unregister(consumer_group=self.group)

    def heartbeat_data(self) -> ConsumerData:
        return ConsumerData(group_name=self.group, consume_type="CONSUME_ACTIVELY", message_model="CLUSTERING",
                            consume_from_where="CONSUME_FROM_LAST_OFFSET",
                            subscription_data_set=list(self._subs.values()))

    async def handle_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None:
        return None

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues; as Java's MQAdminImpl.fetchSubscribeMessageQueues, a topic the name
        server does not route, or whose route has no readable queue, is an error (BrokerError
        TOPIC_NOT_EXIST), not an empty list a caller reads as "nothing to pull" (a mistyped topic)."""
        route = await self.instance.get_route(topic)
        if route is None:
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST,
                              f"Can not find Message Queue for this topic, {topic}: the name server has no route")
        queues = route.subscribe_queues()
        if not queues:
            raise BrokerError(ResponseCode.TOPIC_NOT_EXIST, f"Can not find Message Queue for this topic, {topic}: "
                              "Namesrv return empty (no readable queue: its brokers' read permission is off)")
        return queues

    def subscribe(self, topic: str, expression: str | None = "*", expression_type: str = "TAG") -> None:
        """Declare the subscription the heartbeats carry (a SQL92 one lets the broker keep bloom bits for
        this group at dispatch); ``pull`` with the same expression uses it."""
        self._subs[topic] = build_subscription(topic, expression, expression_type)

    async def pull(self, mq: MessageQueue, expression: str | None, offset: int, max_nums: int = 32,
                   *, block_ms: int = 0, expression_type: str = "TAG") -> PullResult:
        """One pull; ``block_ms`` > 0 lets the broker hold it (long polling) until a message arrives."""
        # Java's pullSyncImpl checks ("offset < 0", "maxNums <= 0"), before anything is sent
        check_int("offset", offset, 0, None)
        check_int("max_nums", max_nums, 1, None, "maxNums")
        check_int("block_ms", block_ms, 0, None)
        sub = self._subs.get(mq.topic)
        if sub is None or sub.sub_string != (expression or "*") or (sub.expression_type or "TAG") != expression_type:
            sub = build_subscription(mq.topic, expression, expression_type)
            self._subs[mq.topic] = sub
        return await self.api.pull(mq, offset, max_nums, sub, suspend_ms=block_ms)

    async def fetch_consume_offset(self, mq: MessageQueue) -> int | None:
        return await self.api.query_consumer_offset(mq)

    async def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Commit at once. A commit never creates a group on the broker (a heartbeat or a pull does); Java's
        pull consumers heartbeat 1 s after start and persist offsets from 10 s on, so the broker always knows
        the group first: the first commit to a broker is preceded by this consumer's heartbeat to it (a failed
        heartbeat is logged, as Java's scheduled one; the commit then gets the broker's own answer)."""
        addr = await self.instance.find_broker_addr(mq)
        if addr not in self._heartbeat_sent:
            try:
                await self.instance.send_heartbeat(addr)
                self._heartbeat_sent.add(addr)
            except (RemotingError, BrokerError) as e:
                log.warning("heartbeat of %s to %s before its first commit failed: %s", self.group, addr, e)
        await self.api.update_consumer_offset(mq, offset)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.api.min_offset(mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.api.max_offset(mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.api.search_offset(mq, timestamp_ms)
