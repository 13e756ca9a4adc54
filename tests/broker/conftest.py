"""Broker test fixtures: a fake clock and a factory for brokers on temporary store directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig

START_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = START_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def small_config(**props: str) -> BrokerConfig:
    base = {"mappedFileSizeCommitLog": str(1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 1000),
            "mapperFileSizeBatchConsumeQueue": str(46 * 1000), "maxHashSlotNum": "64", "maxIndexNum": "400"}
    base.update(props)
    return BrokerConfig.from_properties(base)


@pytest.fixture
def make_broker(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., Broker]]:
    opened: list[Broker] = []

    def make(root: Path | None = None, config: BrokerConfig | None = None, read_only: bool = False,
             **props: str) -> Broker:
        b = Broker(root or tmp_path / "store", config or small_config(**props), clock=clock, read_only=read_only)
        opened.append(b)
        return b

    yield make
    for b in opened:
        b.shutdown()
