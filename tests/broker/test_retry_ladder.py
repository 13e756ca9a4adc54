"""Consumer send-back: the delay-level ladder into %RETRY%{group}, then %DLQ%{group}."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.broker.errors import SubscriptionGroupNotExistError
from broker_core.broker.retry import RetryService
from broker_core.store.codec.message import MessageExt
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.schedule.schedule_message_service import message_time_up
from broker_core.store.store_config import parse_delay_levels

from .conftest import FakeClock
from .test_pop_support import PopEnv, internal_put, pop_env_factory

G = "G_retry"
T = "T_retry"


@pytest.fixture
def pop_env(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PopEnv]]:
    yield from pop_env_factory(tmp_path, clock)


def _service(env: PopEnv, groups=None) -> RetryService:  # type: ignore[no-untyped-def]
    return RetryService(internal_put(env.broker, env.clock), groups or env.broker.group_manager.find,
                        env.broker.topic_manager, env.broker.config.store_host, random.Random(3))


def _original(env: PopEnv, props: dict[str, str] | None = None) -> MessageExt:
    env.broker.create_or_update_topic(T, 1, 1)
    env.broker.send_message(T, b"payload", {"TAGS": "TagA", "KEYS": "k1", **(props or {})}, queue_id=0)
    return env.messages(T)[-1]


def _scheduled(env: PopEnv, level: int) -> MessageExt:
    return env.messages(SCHEDULE_TOPIC, level - 1)[-1]


def _deliver(env: PopEnv, scheduled: MessageExt) -> MessageExt:
    """What the delay service does when the level's time is up: put it into %RETRY%group."""
    result = env.broker.store.put_message(message_time_up(scheduled))
    assert result.ok
    return env.messages(scheduled.properties["REAL_TOPIC"], int(scheduled.properties["REAL_QID"]))[-1]


def test_the_ladder_from_10s_to_2h_then_the_dlq(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    env.broker.create_or_update_subscription_group(G)
    retry = _service(env)
    original = _original(env)
    delays = parse_delay_levels(env.broker.config.store.message_delay_level)
    msg = original
    seen = []
    for attempt in range(16):
        res = retry.send_back(G, msg, 0)
        assert not res.dlq and res.topic == "%RETRY%" + G and res.reconsume_times == attempt + 1
        assert res.delay_level == 3 + attempt
        scheduled = _scheduled(env, res.delay_level)
        assert scheduled.properties["DELAY"] == str(res.delay_level)
        assert scheduled.properties["REAL_TOPIC"] == "%RETRY%" + G
        seen.append(delays[res.delay_level - 1])
        msg = _deliver(env, scheduled)
        assert msg.topic == "%RETRY%" + G and msg.reconsume_times == attempt + 1 and msg.body == b"payload"
        assert msg.properties["RETRY_TOPIC"] == T and msg.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
        assert msg.properties["KEYS"] == "k1" and msg.uniq_key == original.uniq_key and msg.tags == "TagA"
    assert seen[:4] == [10_000, 30_000, 60_000, 120_000] and seen[-1] == 7_200_000
    res = retry.send_back(G, msg, 0)  # the 16th retry failed too
    assert res.dlq and res.topic == "%DLQ%" + G and res.queue_id == 0 and res.delay_level == 0
    [dead] = env.messages("%DLQ%" + G)
    assert dead.reconsume_times == 17 and dead.properties["DLQ_ORIGIN_TOPIC"] == T
    assert dead.properties["DLQ_ORIGIN_MESSAGE_ID"] == original.uniq_key
    dlq = env.broker.get_topic("%DLQ%" + G)
    assert (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, 6)


def test_explicit_levels_and_limits(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    env.broker.create_or_update_subscription_group(G, retry_queue_nums=4, retry_max_times=5)
    retry = _service(env)
    msg = _original(env)
    res = retry.send_back(G, msg, 7)
    assert res.delay_level == 7 and 0 <= res.queue_id < 4
    assert env.broker.get_topic("%RETRY%" + G).read_queue_nums == 4
    assert retry.send_back(G, msg, -1).dlq  # a negative level goes straight to the DLQ
    assert retry.send_back(G, msg, 0, max_reconsume_times=0).dlq
    limited = _original(env, {"MAX_RECONSUME_TIMES": "0"})
    assert retry.send_back(G, limited, 0).dlq
    assert not retry.send_back(G, msg, 0).dlq  # group retryMaxTimes 5, reconsume 0


def test_group_rules(pop_env) -> None:  # type: ignore[no-untyped-def]
    env = pop_env()
    env.broker.create_or_update_subscription_group(G, retry_queue_nums=0)
    msg = _original(env)
    res = _service(env).send_back(G, msg, 0)
    assert res.topic is None and res.put_result is None  # no retry queue: nothing is written (as RocketMQ)
    with pytest.raises(SubscriptionGroupNotExistError):
        _service(env, env.broker.group_manager.get).send_back("no_such_group", msg, 0)
