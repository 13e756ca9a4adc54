"""ClientRegistry: who is told NOTIFY_CONSUMER_IDS_CHANGED (the group's notifyConsumerIdsChangedEnable,
BROADCASTING), and that a group's last client leaving is reported whatever those say."""

from __future__ import annotations

from broker_core.broker.client_registry import ClientRegistry, ConsumerData, SubscriptionData


def _registry(quiet: set[str]) -> tuple[ClientRegistry, list[str], list[str]]:
    reg = ClientRegistry(lambda: 0, notify_enabled=lambda g: g not in quiet)
    told: list[str] = []
    removed: list[str] = []
    reg.consumer_ids_changed_listeners.append(lambda g, clients: told.append(g))
    reg.consumer_group_removed_listeners.append(removed.append)
    return reg, told, removed


def _join(reg: ClientRegistry, channel: str, group: str, model: str = "CLUSTERING") -> None:
    reg.heartbeat(channel, channel, consumers=[ConsumerData(group, message_model=model,
                                                           subscriptions=(SubscriptionData("T"),))])


def test_notify_off_group_is_not_told_but_its_removal_is_reported():
    reg, told, removed = _registry({"Q"})
    _join(reg, "a", "Q")
    _join(reg, "b", "Q")
    reg.unregister("b", consumer_group="Q")
    assert told == [] and removed == []
    reg.channel_closed("a")  # Apache's doChannelCloseEvent ignores the switch; nobody is left to tell
    assert removed == ["Q"]


def test_broadcasting_group_is_never_told():
    reg, told, removed = _registry(set())
    _join(reg, "a", "B", "BROADCASTING")
    _join(reg, "b", "B", "BROADCASTING")
    reg.channel_closed("b")
    reg.unregister("a", consumer_group="B")
    assert told == [] and removed == ["B"]


def test_clustering_group_is_told_on_join_leave_and_close():
    reg, told, removed = _registry(set())
    _join(reg, "a", "C")
    _join(reg, "b", "C")
    _join(reg, "c", "C")
    reg.unregister("c", consumer_group="C")
    reg.channel_closed("b")
    assert told == ["C"] * 5 and removed == []
