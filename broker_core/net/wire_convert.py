"""Broker values <-> remoting bodies (TopicConfig, stats, reset tables, config text).

Why one module: the same conversions serve several handlers and the name-server registration, and
the broker's own types stay free of wire concerns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker_core.broker.reset_offset import ResetOffsetPlanEntry
from broker_core.broker.stats import GroupQueueStats, TopicStats
from broker_core.remoting.bodies import (
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    ResetOffsetBody,
    TopicConfigBody,
    TopicOffset,
    TopicStatsTable,
)
from broker_core.remoting.body_base import BodyError
from broker_core.store.topic_config import TopicConfig


def topic_config_body(tc: TopicConfig) -> TopicConfigBody:
    return TopicConfigBody(topic_name=tc.topic_name, read_queue_nums=tc.read_queue_nums,
                           write_queue_nums=tc.write_queue_nums, perm=tc.perm, topic_filter_type=tc.topic_filter_type,
                           topic_sys_flag=tc.topic_sys_flag, order=tc.order, attributes=dict(tc.attributes))


def topic_stats_table(broker_name: str, stats: TopicStats) -> TopicStatsTable:
    return TopicStatsTable(topic_put_tps=stats.put_tps, offset_table={
        MessageQueue(topic=s.topic, broker_name=broker_name, queue_id=s.queue_id):
            TopicOffset(min_offset=s.min_offset, max_offset=s.max_offset, last_update_timestamp=s.last_update_timestamp)
        for s in stats.rows})


def consume_stats(broker_name: str, stats: Iterable[GroupQueueStats], consume_tps: float = 0.0) -> ConsumeStats:
    return ConsumeStats(consume_tps=consume_tps, offset_table={
        MessageQueue(topic=s.topic, broker_name=broker_name, queue_id=s.queue_id):
            OffsetWrapper(broker_offset=s.broker_offset, consumer_offset=max(s.consumer_offset, 0),
                          pull_offset=max(s.pull_offset, 0), last_timestamp=s.last_timestamp)
        for s in stats})


def reset_offset_body(broker_name: str, plan: Iterable[ResetOffsetPlanEntry]) -> ResetOffsetBody:
    return ResetOffsetBody(offset_table={MessageQueue(topic=e.topic, broker_name=broker_name, queue_id=e.queue_id):
                                         e.new_offset for e in plan})


def properties_text(props: Mapping[str, str]) -> bytes:
    """Java Properties text (``key=value`` lines), as GET_BROKER_CONFIG answers (spec A.6.4)."""
    return "".join(f"{k}={v}\n" for k, v in sorted(props.items())).encode("utf-8")


def parse_properties_text(body: bytes) -> dict[str, str]:
    """``key=value`` lines (UPDATE_BROKER_CONFIG). Not UTF-8 is refused rather than read with
    replacement characters: a config key or value with U+FFFD in it is never what the operator meant."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError(f"the broker config body is not UTF-8 text (byte {e.start})") from None
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out
