"""resetOffsetByTime / skipAccumulatedMessage fixes, on a store directory.

Why these tests: a date before 1970 is a negative timestamp, which the reset reads as "the max offset"
(the whole backlog skipped, exit 0); ``-f false`` must move a group forward as Apache 5.3's server-side
reset does; and -g/-t are trimmed as Apache's ``getOptionValue(..).trim()``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mqadmin.errors import UsageProblem
from mqadmin.timefmt import parse_timestamp


def _backlog(cli, topic: str = "TJ", group: str = "GFRESH", count: int = 3) -> None:
    """One queue holding ``count`` messages, and a group whose offset is at its start (0)."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1").exit_code == 0
    assert cli("updateSubGroup", "-c", "DefaultCluster", "-g", group).exit_code == 0
    for i in range(count):
        assert cli("sendMessage", "-t", topic, "-p", f"m{i}").exit_code == 0
    r = cli("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    assert r.exit_code == 0, r.stdout + r.stderr


def _offsets(cli, topic: str = "TJ", group: str = "GFRESH") -> list[int]:
    plan = cli.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now", "--dry-run")
    return [q["consumerOffset"] for q in plan["queues"]]


@pytest.fixture
def shanghai(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time UTC+8, where 1970-01-01 00:00 is before the epoch."""
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("date", ["1960-01-01#00:00:00:000", "0001-01-01#00:00:00:000"])
def test_a_date_before_1970_is_a_usage_error_and_moves_nothing(cli, date: str) -> None:
    _backlog(cli)
    r = cli("resetOffsetByTime", "-g", "GFRESH", "-t", "TJ", "-s", date)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "-s/--timestamp" in r.stderr and "unexpected failure" not in r.stderr, r.stderr
    assert _offsets(cli) == [0]  # the backlog is still there


def test_epoch_start_in_local_time_east_of_utc_is_refused(shanghai: None) -> None:
    with pytest.raises(UsageProblem, match="-s/--timestamp"):
        parse_timestamp("1970-01-01#00:00:00:000", option="-s/--timestamp", allow_minus_one=True)
    assert parse_timestamp("1970-01-01#08:00:00:000", option="-s") == 0


# (zone, wall time, epoch millis): each answer is Java 17's SimpleDateFormat("yyyy-MM-dd#HH:mm:ss:SSS").parse
JAVA_WALL_TIMES = [
    ("America/New_York", "2023-11-05#01:30:00:000", 1699165800000),  # repeated hour: the second, 01:30 EST
    ("America/New_York", "2023-11-05#00:59:59:999", 1699160399999),  # just before it: one reading
    ("America/New_York", "2023-03-12#02:30:00:000", 1678606200000),  # skipped hour: 03:30 EDT
    ("Australia/Lord_Howe", "2023-04-02#01:45:00:000", 1680362100000),  # a 30-minute shift, repeated
    ("America/Sao_Paulo", "2019-02-16#23:30:00:000", 1550370600000),  # repeated, before midnight
    ("America/Sao_Paulo", "2018-11-04#00:30:00:000", 1541302200000),  # skipped midnight
    ("Europe/Moscow", "2014-10-26#01:30:00:000", 1414276200000),  # standard offset change, repeated
]


@pytest.mark.parametrize("name, wall, millis", JAVA_WALL_TIMES)
def test_a_wall_time_in_a_repeated_or_skipped_hour_is_read_as_java_reads_it(cli, zone, name: str, wall: str,
                                                                           millis: int) -> None:
    """A time in the hour a daylight-saving change repeats was read as its first occurrence (01:30 EDT), an
    hour earlier than Apache's mqadmin resets to: Java's lenient Calendar takes the later one (01:30 EST)."""
    _backlog(cli)
    zone(name)
    plan = cli.json("resetOffsetByTime", "-g", "GFRESH", "-t", "TJ", "-s", wall, "--dry-run")
    assert plan["timestamp"] == millis


def test_force_false_moves_a_group_forward(cli) -> None:
    _backlog(cli)
    r = cli("skipAccumulatedMessage", "-g", "GFRESH", "-t", "TJ", "-f", "false")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert _offsets(cli) == [3]
    now = cli("resetOffsetByTime", "-g", "GFRESH", "-t", "TJ", "-s", "0", "-f", "false")
    assert now.exit_code == 0 and "force[false]" in now.stdout, now.stdout + now.stderr
    assert _offsets(cli) == [0]


@pytest.mark.parametrize("command", ["resetOffsetByTime", "skipAccumulatedMessage"])
def test_group_and_topic_are_trimmed(cli, command: str) -> None:
    _backlog(cli)
    extra = ("-s", "now") if command == "resetOffsetByTime" else ()
    r = cli(command, "-g", " GFRESH ", "-t", " TJ ", *extra)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert _offsets(cli) == [3]


def test_clone_group_offset_and_consumer_progress_trim_their_names(cli) -> None:
    _backlog(cli)
    assert cli("updateSubGroup", "-c", "DefaultCluster", "-g", "GCOPY").exit_code == 0
    r = cli("cloneGroupOffset", "-s", " GFRESH ", "-d", " GCOPY ", "-t", " TJ ")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert _offsets(cli, group="GCOPY") == [0]
    progress = cli("consumerProgress", "-g", " GCOPY ", "-t", " TJ ")
    assert progress.exit_code == 0, progress.stdout + progress.stderr
