"""PopConfig (the pop-related BrokerConfig keys) and the pop request limits, in a module of their own.

Why separate from the pop service: ``BrokerConfig`` checks these keys whenever a broker.conf is
loaded, which every mqadmin command on a store directory does; importing the whole pop service (and
its filters, retry and revive machinery) only to validate nine integers made every command pay for it.
The Broker's pop methods take their defaults from the limits here for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.config_loader import JavaLong, apply_properties

CONSUME_INIT_MODE_MIN = 0  # ConsumeInitMode.MIN: a new group starts at the queue's first message
CONSUME_INIT_MODE_MAX = 1  # ConsumeInitMode.MAX: a new group starts at the queue's end
MAX_POP_MSG_NUMS = 32  # the most messages one POP_MESSAGE may ask for


@dataclass
class PopConfig:
    """The pop-related BrokerConfig keys, with RocketMQ's names and defaults."""

    revive_queue_num: int = 8
    revive_interval: JavaLong = 1000
    enable_retry_topic_v2: bool = False
    retrieve_message_from_pop_retry_topic_v1: bool = True
    pop_from_retry_probability: int = 20
    pop_polling_size: int = 1024
    max_pop_polling_size: JavaLong = 100_000
    pop_long_polling_force_notify_interval: JavaLong = 800
    flush_consumer_offset_interval: int = 5000  # consumerOrderInfo.json is flushed with the offsets

    @classmethod
    def from_properties(cls, props: dict[str, str], base: PopConfig | None = None) -> PopConfig:
        cfg = apply_properties(cls, props, base)
        if cfg.revive_queue_num <= 0:
            raise ValueError(f"reviveQueueNum must be positive, got {cfg.revive_queue_num}")
        if not 0 <= cfg.pop_from_retry_probability <= 100:
            raise ValueError(f"popFromRetryProbability must be 0..100, got {cfg.pop_from_retry_probability}")
        return cfg
