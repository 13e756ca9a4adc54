"""A pop revive round that cannot write topics.json (a full disk) logs one line naming the file.

Why: the revive round creates the retry topic (%RETRY%group_topic) before it puts a message back;
on a full disk that write fails, and the broker reports it as BrokerSystemError ("disk full: cannot
write <store>/config/topics.json ...; topic %RETRY%GP_P5 was not created") raised from the
ConfigWriteError. Being no OSError itself, it was logged as a bug, a chained traceback every round.
A real bug (an error that was not translated from an OSError) keeps its traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from small_fs import fill

from broker_core.broker.broker import Broker
from broker_core.broker.errors import BrokerSystemError
from broker_core.common.round_failures import RoundFailures
from tests.waiting import wait_dispatched, wait_for

from .conftest import small_config


def test_pop_revive_round_on_a_full_disk_logs_one_line_naming_topics_json(
        small_fs: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = small_fs / "store"
    b = Broker(root, small_config(reviveInterval="10")).start()
    try:
        b.create_or_update_topic("P5", 1, 1)
        b.create_or_update_subscription_group("GP")
        b.send_message("P5", b"m", queue_id=0)
        wait_dispatched(b, "P5", 0, 1)
        assert len(b.pop_message("GP", "P5", 0, 1, invisible_time_ms=1000).messages) == 1
        fill(small_fs / "filler")
        wait_for(lambda: any("pop revive round failed" in r.getMessage() for r in caplog.records),
                 "the failed revive round to be logged", timeout=30)
        lines = [r for r in caplog.records if r.getMessage().startswith("pop revive round failed")]
        assert [(r.levelname, r.exc_info) for r in lines] == [("ERROR", None)], lines
        text = lines[0].getMessage()
        assert f"cannot write {root}/config/topics.json" in text and "%RETRY%GP_P5 was not created" in text, text
        assert "\n" not in text
    finally:
        (small_fs / "filler").unlink(missing_ok=True)
        b.shutdown()


def _failed(exc: BaseException, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    caplog.clear()
    failures = RoundFailures(logging.getLogger("rmqops.test"), "some round")
    try:
        raise exc
    except Exception as e:  # as a background loop catches it
        failures.failed(e)
    (record,) = caplog.records
    return record


def test_only_errors_raised_from_an_os_error_lose_their_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Translated from an OSError (``raise ... from e``): one line. Raised while handling one (a bug in
    the handler, no ``from``) or unrelated to one: the traceback stays."""
    caplog.set_level(logging.ERROR, "rmqops.test")
    cause = OSError(28, "disk full: cannot write /s/config/topics.json")
    translated = BrokerSystemError("disk full: cannot write /s/config/topics.json; topic T was not created")
    translated.__cause__ = cause
    rec = _failed(translated, caplog)
    assert rec.exc_info is None and rec.getMessage() == (
        "some round failed: disk full: cannot write /s/config/topics.json; topic T was not created")
    bug = KeyError("oops")
    bug.__context__ = cause  # raised inside an ``except OSError`` without ``from``
    assert _failed(bug, caplog).exc_info is not None
    assert _failed(ValueError("plain bug"), caplog).exc_info is not None
