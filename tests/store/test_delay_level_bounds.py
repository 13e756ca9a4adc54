"""messageDelayLevel levels are bounded so a delayed message's due time fits its consume-queue unit.

Why: ``messageDelayLevel=1s 9999999999999999999d`` was accepted; the first message at that level got a due
time (store time + delay) past the 8-byte tagsCode, dispatch raised struct.error at it and stopped for the
whole broker (later plain sends said SEND_OK and never became visible), and the store could not be reopened.
Apache refuses that value at start (Long.parseLong); here a level whose delay cannot be added to a store time
is refused at start, one line naming the config file and the key, like a bad token. An empty value (no level)
is refused the same way instead of as "cannot open store". A record whose due time still overflows (a store
time far ahead) is dispatched with its due time clamped to Long.MAX, and everything after it is dispatched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config

from broker_core.config_loader import ConfigError
from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.dispatch import SCHEDULE_TOPIC
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import MAX_DELAY_LEVEL_MS, StoreConfig, parse_delay_levels

LONG_MAX = 2**63 - 1
TOO_LONG = f"{MAX_DELAY_LEVEL_MS // 1000 + 1}s"


@pytest.mark.parametrize(("spec", "reason"), [
    ("1s 9999999999999999999d", "level 2 (9999999999999999999d) is longer than the longest delay, 9223336852482686975 ms"),
    (f"1s {TOO_LONG}", f"level 2 ({TOO_LONG}) is longer than the longest delay"),
    ("", "defines no level"),
])
def test_mqbroker_refuses_a_delay_level_too_long_or_none_naming_the_config_file(tmp_path: Path, spec: str,
                                                                                reason: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName=DefaultCluster\nmessageDelayLevel={spec}\n")
    store = tmp_path / "s"
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "-c", str(conf), "--store", str(store),
                           "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"mqbroker: config file {conf}: messageDelayLevel={spec!r}: {reason}"), lines
    assert not store.exists()  # refused before anything was created


def test_the_longest_delay_level_is_accepted_and_fits_any_real_store_time() -> None:
    longest = f"{MAX_DELAY_LEVEL_MS // 86_400_000}d"
    assert StoreConfig(message_delay_level=f"1s {longest}").message_delay_level.endswith(longest)
    assert parse_delay_levels(longest)[0] + 2**45 <= LONG_MAX  # store times up to the year 3084
    with pytest.raises(ConfigError, match="messageDelayLevel='1s 9999999999999999999d'"):
        StoreConfig(message_delay_level="1s 9999999999999999999d")


def test_a_delayed_record_whose_due_time_overflows_does_not_stop_dispatch(tmp_path: Path) -> None:
    """A store time so far ahead that store time + 1 s passes Long.MAX (what an old config's huge level did):
    the schedule unit says Long.MAX, the plain message after it is visible, and the store reopens."""
    clock = FakeClock(now=LONG_MAX - 500, step=1)
    store = MessageStore(tmp_path, small_config(), clock=clock).open()
    delayed = make_msg(SCHEDULE_TOPIC, 0, b"later", DELAY="1", REAL_TOPIC="T", REAL_QID="0")
    assert store.put_message(delayed).status == PutMessageStatus.PUT_OK
    assert store.put_message(make_msg("T", 0, b"plain")).status == PutMessageStatus.PUT_OK
    assert store.wait_for_dispatch()
    assert [u.tags_code for u in store.get_units(SCHEDULE_TOPIC, 0, 0, 8)] == [LONG_MAX]
    assert store.get_max_offset_in_queue("T", 0) == 1
    store.shutdown()
    reopened = MessageStore(tmp_path, small_config(), clock=clock).open()
    try:
        assert [u.tags_code for u in reopened.get_units(SCHEDULE_TOPIC, 0, 0, 8)] == [LONG_MAX]
        assert reopened.get_max_offset_in_queue("T", 0) == 1
    finally:
        reopened.shutdown()
