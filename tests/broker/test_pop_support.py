"""Shared set-up for the pop / FIFO / retry tests: a real Broker store with a PopService wired to it.

The PopService gets the collaborators the Broker facade will hand it: the store, the
ConsumerOffsetManager, the group manager, the topic manager and an internal put that runs the
broker's schedule hook (DELAY -> SCHEDULE_TOPIC_XXXX), all on a fake clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from broker_core.broker.broker import Broker
from broker_core.broker.hooks import build_put_message_hooks
from broker_core.broker.pop import PopConfig, PopService, ReceiptHandle
from broker_core.broker.put_pipeline import PutPipeline
from broker_core.store.codec.message import MessageExt, MessageInner
from broker_core.store.codec.properties import PROPERTY_POP_CK
from broker_core.store.commit_log import PutMessageResult

from .conftest import FakeClock, small_config


def internal_put(broker: Broker, clock: Callable[[], int]) -> Callable[[MessageInner], PutMessageResult]:
    """The Broker's put pipeline on ``clock`` (a service under test writes exactly as the Broker would)."""
    return PutPipeline(broker.store, build_put_message_hooks(broker.config.store, clock)).put


@dataclass
class PopEnv:
    root: Path
    clock: FakeClock
    broker: Broker
    pop: PopService
    pop_config: PopConfig

    def send(self, topic: str, body: bytes, tags: str | None = None, queue_id: int | None = 0) -> int:
        props = {"TAGS": tags} if tags else {}
        return self.broker.send_message(topic, body, props, queue_id=queue_id).queue_offset

    def messages(self, topic: str, queue_id: int = 0) -> list[MessageExt]:
        return self.broker.store.get_messages(topic, queue_id, 0, 1000).messages

    def close(self) -> None:
        self.pop.shutdown()
        self.broker.shutdown()


def handle_of(msg: MessageExt) -> str:
    return msg.properties[PROPERTY_POP_CK]


def parsed(msg: MessageExt) -> ReceiptHandle:
    return ReceiptHandle.decode(handle_of(msg))


def open_env(root: Path, clock: FakeClock, pop_config: PopConfig | None = None, seed: int = 7) -> PopEnv:
    broker = Broker(root, small_config(), clock=clock)
    cfg = pop_config or PopConfig()
    pop = PopService(broker.store, broker.offset_manager, broker.group_manager.find, internal_put(broker, clock),
                     broker.config.broker_name, broker.config.broker_cluster_name, clock, broker.store.config_dir,
                     topics=broker.topic_manager, config=cfg, store_host=broker.config.store_host,
                     rng=random.Random(seed))
    broker.offset_reset_listeners.append(pop.on_offset_reset)
    broker.inflight_provider = pop.inflight
    broker.fifo_blocked_provider = pop.is_fifo_blocked
    pop.load()
    return PopEnv(root, clock, broker, pop, cfg)


def pop_env_factory(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PopEnv]]:
    """Body of each test module's ``pop_env`` fixture: opens PopEnvs and closes them afterwards."""
    opened: list[PopEnv] = []

    def make(pop_config: PopConfig | None = None, root: Path | None = None) -> PopEnv:
        env = open_env(root or tmp_path / "store", clock, pop_config)
        opened.append(env)
        return env

    yield make
    for env in opened:
        env.close()


def reopen(make: Callable[..., PopEnv], env: PopEnv) -> PopEnv:
    """Shut everything down cleanly and open the same store again (a broker restart)."""
    env.close()
    return make(env.pop_config, env.root)
