"""Who is connected: producer and consumer groups, their clients and connections (HEART_BEAT).

Why: RocketMQ's broker keeps ProducerManager/ConsumerManager tables filled by heartbeats. The
consumers of a group (GET_CONSUMER_LIST_BY_GROUP, rebalancing), the connection to ask about an
unfinished transaction (CHECK_TRANSACTION_STATE goes to a live producer of the half's group),
NOTIFY_CONSUMER_IDS_CHANGED, mqadmin's consumerConnection / consumerProgress client columns and the
expiry of silent clients all read this one registry. It knows nothing about sockets: a connection is
an opaque hashable ``channel`` handle the network layer chooses (and closes when told).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

CHANNEL_EXPIRED_TIMEOUT_MS = 120_000  # RocketMQ's channelExpiredTimeout
CONSUME_TYPE_PULL = "CONSUME_ACTIVELY"
CONSUME_TYPE_PUSH = "CONSUME_PASSIVELY"
CONSUME_TYPE_POP = "CONSUME_POP"
MESSAGE_MODEL_BROADCASTING = "BROADCASTING"
MESSAGE_MODEL_CLUSTERING = "CLUSTERING"

Channel = Hashable
"""A connection handle chosen by the network layer (e.g. its connection object)."""


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One topic a consumer subscribes to (HeartbeatData.consumerDataSet[].subscriptionDataSet[])."""

    topic: str
    sub_string: str = "*"
    expression_type: str = "TAG"
    sub_version: int = 0
    tags: tuple[str, ...] = ()
    codes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """A consumer group as one client declares it in a heartbeat."""

    group_name: str
    consume_type: str = CONSUME_TYPE_PUSH
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@dataclass(slots=True)
class ClientChannelInfo:
    """One connected client: its id, language and version, and when it was last heard from."""

    channel: Channel
    client_id: str
    language: str = "JAVA"
    version: int = 0
    remote_addr: str = ""
    last_update_timestamp: int = 0


@dataclass(slots=True)
class ConsumerGroupInfo:
    """A consumer group's live view: its clients, how it consumes, and the union of subscriptions."""

    group_name: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_timestamp: int = 0

    def client_ids(self) -> list[str]:
        return sorted(c.client_id for c in self.channels.values())


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """What a heartbeat changed: groups whose set of consumer ids changed (notify those clients)."""

    consumer_ids_changed: tuple[str, ...] = ()
    new_channel: bool = False


ConsumerIdsChangedListener = Callable[[str, list[ClientChannelInfo]], None]
"""``(group, clients)``: the network layer sends NOTIFY_CONSUMER_IDS_CHANGED to each client."""

ConsumerGroupRemovedListener = Callable[[str], None]
"""``(group)``: the group's last client left (ConsumerGroupEvent.UNREGISTER), told whatever the
group's notify switch says (its SQL92 filters die with it)."""

NotifyEnabled = Callable[[str], bool]
"""The group's notifyConsumerIdsChangedEnable (SubscriptionGroupConfig), True for an unknown group."""


class ClientRegistry:
    """ProducerManager + ConsumerManager in one thread-safe table, driven by an injected clock."""

    def __init__(self, clock: Callable[[], int], channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS,
                 notify_enabled: NotifyEnabled | None = None) -> None:
        self.clock = clock
        self.notify_enabled = notify_enabled
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        self._producers: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self._consumers: dict[str, ConsumerGroupInfo] = {}
        self._lock = threading.RLock()
        self.consumer_ids_changed_listeners: list[ConsumerIdsChangedListener] = []
        self.consumer_group_removed_listeners: list[ConsumerGroupRemovedListener] = []

    # -- heartbeats ---------------------------------------------------------------------------------
    def heartbeat(self, channel: Channel, client_id: str, *, language: str = "JAVA", version: int = 0,
                  remote_addr: str = "", producer_groups: list[str] | tuple[str, ...] = (),
                  consumers: list[ConsumerData] | tuple[ConsumerData, ...] = ()) -> HeartbeatResult:
        """HEART_BEAT: register or refresh the client in each group it names."""
        now = self.clock()
        changed: list[str] = []
        new_channel = False
        with self._lock:
            for group in producer_groups:
                table = self._producers.setdefault(group, {})
                info = table.get(channel)
                if info is None:
                    new_channel = True
                    table[channel] = ClientChannelInfo(channel, client_id, language, version, remote_addr, now)
                else:
                    info.last_update_timestamp = now
            for data in consumers:
                g = self._consumers.get(data.group_name)
                if g is None:
                    g = ConsumerGroupInfo(data.group_name, data.consume_type, data.message_model,
                                          data.consume_from_where)
                    self._consumers[data.group_name] = g
                g.consume_type, g.message_model = data.consume_type, data.message_model
                g.consume_from_where = data.consume_from_where
                g.last_update_timestamp = now
                info = g.channels.get(channel)
                if info is None:
                    new_channel = True
                    g.channels[channel] = ClientChannelInfo(channel, client_id, language, version, remote_addr, now)
                    changed.append(data.group_name)
                else:
                    info.last_update_timestamp = now
                    if info.client_id != client_id:
                        info.client_id = client_id
                        changed.append(data.group_name)
                if self._update_subscriptions(g, data.subscriptions) and data.group_name not in changed:
                    changed.append(data.group_name)
            to_tell = [name for name in changed if self._group_notifies(self._consumers[name])]
        self._notify(to_tell)
        return HeartbeatResult(tuple(changed), new_channel)

    @staticmethod
    def _update_subscriptions(g: ConsumerGroupInfo, subscriptions: Sequence[SubscriptionData]) -> bool:
        """ConsumerGroupInfo#updateSubscription: a topic's subscription is replaced only by a newer
        version, so a consumer still running an old expression cannot take it back from the ones that
        were redeployed (their pulls, carrying the newer version, were refused SUBSCRIPTION_NOT_LATEST
        until the old one stopped); a topic the heartbeat no longer names is dropped (an unsubscribe).
        An equal version with another expression replaces it: gRPC sessions carry no version.
        True when the table changed, which the group's consumers are told (they rebalance)."""
        updated = False
        for sub in subscriptions:
            old = g.subscriptions.get(sub.topic)
            if old is None:
                updated = True
            elif sub.sub_version < old.sub_version or (
                    sub.sub_version == old.sub_version and (sub.sub_string, sub.expression_type)
                    == (old.sub_string, old.expression_type)):
                continue
            g.subscriptions[sub.topic] = sub
        named = {sub.topic for sub in subscriptions}
        for topic in [t for t in g.subscriptions if t not in named]:
            del g.subscriptions[topic]
            updated = True
        return updated

    def unregister(self, channel: Channel, producer_group: str | None = None,
                   consumer_group: str | None = None) -> None:
        """UNREGISTER_CLIENT: the client leaves the named groups (its connection stays open)."""
        changed: list[str] = []
        removed: list[str] = []
        with self._lock:
            if producer_group:
                self._remove_producer(producer_group, channel)
            g = self._consumers.get(consumer_group) if consumer_group else None
            if g is not None and self._remove_consumer(g.group_name, channel, removed) \
                    and self._group_notifies(g):
                changed.append(g.group_name)
        self._group_removed(removed)
        self._notify(changed)

    def channel_closed(self, channel: Channel) -> None:
        """The connection is gone: forget it in every group (ConsumerManager#doChannelCloseEvent, which
        tells the remaining clients unless the group is BROADCASTING, whatever the group's notify
        switch says)."""
        changed: list[str] = []
        removed: list[str] = []
        with self._lock:
            for group in list(self._producers):
                self._remove_producer(group, channel)
            for group in list(self._consumers):
                model = self._consumers[group].message_model
                if self._remove_consumer(group, channel, removed) and model != MESSAGE_MODEL_BROADCASTING:
                    changed.append(group)
        self._group_removed(removed)
        self._notify(changed)

    def scan_expired(self) -> list[ClientChannelInfo]:
        """Drop clients silent for longer than the expiry (120 s); the caller closes their channels."""
        deadline = self.clock() - self.channel_expired_timeout_ms
        expired: dict[Channel, ClientChannelInfo] = {}
        with self._lock:
            for table in self._producers.values():
                expired.update({ch: i for ch, i in table.items() if i.last_update_timestamp < deadline})
            for g in self._consumers.values():
                expired.update({ch: i for ch, i in g.channels.items() if i.last_update_timestamp < deadline})
        for channel in expired:
            self.channel_closed(channel)
        return list(expired.values())

    def _remove_producer(self, group: str, channel: Channel) -> None:
        table = self._producers.get(group)
        if table is not None and table.pop(channel, None) is not None and not table:
            del self._producers[group]

    def _remove_consumer(self, group: str, channel: Channel, removed: list[str]) -> bool:
        """Forget the client in the group; a group left without clients goes, and is added to ``removed``."""
        g = self._consumers.get(group)
        if g is None or g.channels.pop(channel, None) is None:
            return False
        if not g.channels:
            del self._consumers[group]
            removed.append(group)
        return True

    def _group_notifies(self, g: ConsumerGroupInfo) -> bool:
        """ConsumerManager#registerConsumer/unregisterConsumer: the group's clients are told their
        set changed only when its subscription group allows it (notifyConsumerIdsChangedEnable,
        ``updateSubGroup -a false`` turns it off) and it is not BROADCASTING (each broadcasting
        client reads every queue: no rebalance to trigger)."""
        if g.message_model == MESSAGE_MODEL_BROADCASTING:
            return False
        return self.notify_enabled is None or self.notify_enabled(g.group_name)

    def _group_removed(self, groups: list[str]) -> None:
        for group in groups:
            for listener in list(self.consumer_group_removed_listeners):
                listener(group)

    def _notify(self, groups: list[str]) -> None:
        for group in groups:
            clients = self.consumer_clients(group)
            for listener in list(self.consumer_ids_changed_listeners):
                listener(group, clients)

    # -- queries --------------------------------------------------------------------------------------
    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        """A copy of the group's live view (GET_CONSUMER_CONNECTION_LIST), None when nobody is online."""
        with self._lock:
            g = self._consumers.get(group)
            if g is None:
                return None
            return ConsumerGroupInfo(g.group_name, g.consume_type, g.message_model, g.consume_from_where,
                                     dict(g.channels), dict(g.subscriptions), g.last_update_timestamp)

    def consumer_clients(self, group: str) -> list[ClientChannelInfo]:
        with self._lock:
            g = self._consumers.get(group)
            return sorted(g.channels.values(), key=lambda c: c.client_id) if g else []

    def consumer_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids a rebalance divides the queues among."""
        return [c.client_id for c in self.consumer_clients(group)]

    def consumer_groups(self) -> list[str]:
        with self._lock:
            return sorted(self._consumers)

    def producer_clients(self, group: str) -> list[ClientChannelInfo]:
        """GET_PRODUCER_CONNECTION_LIST."""
        with self._lock:
            return sorted(self._producers.get(group, {}).values(), key=lambda c: c.client_id)

    def producer_groups(self) -> list[str]:
        with self._lock:
            return sorted(self._producers)

    def find_producer_channel(self, group: str) -> Channel | None:
        """The connection to send CHECK_TRANSACTION_STATE to: the most recently heard producer of the group."""
        clients = self.producer_clients(group)
        if not clients:
            return None
        return max(clients, key=lambda c: c.last_update_timestamp).channel

    def find_channel(self, client_id: str) -> Channel | None:
        """A client's connection by client id, in any group (ProducerManager#findChannel)."""
        with self._lock:
            tables = [*self._producers.values(), *(g.channels for g in self._consumers.values())]
            for table in tables:
                for info in table.values():
                    if info.client_id == client_id:
                        return info.channel
        return None
