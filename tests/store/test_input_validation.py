"""Inputs that would corrupt the format are refused, with one clear error each (issue 11 item 9).

Why: a tag or key holding \\x01/\\x02 was stored and parsed back as other properties (sendMessage
``-c $'tg\\x02KEYS\\x01injected'`` made the message findable by key "injected"); lone surrogates and
bad born hosts raised raw exceptions; ``mappedFileSizeConsumeQueue=0`` gave ZeroDivisionError and
``flushDiskType=WHATEVER`` silently meant ASYNC.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from store_util import FakeClock, make_msg, small_config
from typer.testing import CliRunner

from broker_core.config_loader import ConfigError
from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from mqadmin.app import app


@pytest.mark.parametrize(("field", "value", "named"), [
    ("TAGS", "tg\x02KEYS\x01injected", "TAGS"),
    ("KEYS", "k\x02x", "KEYS"),  # a 0x01 in a value is stored, as Apache stores it: the pair splits at its first
    ("KEYS", "bad\udc80key", "KEYS"),
    ("user\x02prop", "v", "property name"),
    ("user\x01prop", "v", "property name"),
])
def test_separators_and_surrogates_in_properties_are_refused(tmp_path: Path, field: str, value: str,
                                                             named: str) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        r = store.put_message(make_msg("V", 0, b"x", **{field: value}))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and named in r.remark
        assert store.get_max_phy_offset() == 0 and store.commit_log.queue_offsets.next("V", 0) == 0
        assert store.query_message("V", "injected") == []
    finally:
        store.shutdown()


@pytest.mark.parametrize(("field", "value"), [("topic", "T\udcff"), ("topic", "a\x01b"),
                                              ("born_host", ("999.1.1.1", 1)), ("born_host", "10.0.0.1:80")])
def test_bad_topic_and_hosts_are_refused(tmp_path: Path, field: str, value: object) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        msg = make_msg("V", 0, b"x")
        setattr(msg, field, value)
        r = store.put_message(msg)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and field.split("_")[0] in r.remark
        assert store.get_max_phy_offset() == 0
    finally:
        store.shutdown()


@pytest.mark.parametrize(("body", "why"), [
    (memoryview(bytes(range(16))).cast("I"), "got a memoryview of format 'I'"),
    (memoryview(bytes(range(16)))[::2], "got a memoryview of format 'B', not contiguous"),
])
def test_a_memoryview_body_that_is_not_one_run_of_bytes_is_refused(tmp_path: Path, body: memoryview,
                                                                    why: str) -> None:
    """Its len() is not its size in bytes: the twin wrote a 96-byte record where C wrote 108 (a cast), or
    the two disagreed on a strided one. Both now refuse it; a plain byte view is stored as bytes."""
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    try:
        msg = make_msg("V", 0, b"")
        msg.body = body
        r = store.put_message(msg)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and r.remark == f"body must be bytes, {why}"
        assert store.get_max_phy_offset() == 0
        msg.body = memoryview(bytearray(range(16)))
        assert store.put_message(msg).ok
        store.wait_for_dispatch()
        assert store.get_messages("V", 0, 0, 1).messages[0].body == bytes(range(16))
    finally:
        store.shutdown()


def test_cli_send_refuses_property_injection(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["updateTopic", "--store", str(tmp_path), "--create", "-t", "Inj", "-c", "DefaultCluster"]
                         ).exit_code == 0
    res = runner.invoke(app, ["sendMessage", "--store", str(tmp_path), "-t", "Inj", "-p", "hello",
                              "-c", "tg\x02KEYS\x01injected"])
    assert res.exit_code != 0
    err = res.stderr.strip()
    assert "TAGS" in err and "separator" in err and "\n" not in err and "Traceback" not in err, err
    res = runner.invoke(app, ["queryMsgByKey", "--store", str(tmp_path), "-t", "Inj", "-k", "injected"])
    assert "hello" not in res.output


@pytest.mark.parametrize(("key", "value"), [("mappedFileSizeConsumeQueue", "0"), ("flushDiskType", "WHATEVER"),
                                            ("diskMaxUsedSpaceRatio", "250"), ("maxHashSlotNum", "-1"),
                                            ("messageDelayLevel", "1x 2s")])
def test_bad_store_config_values_are_refused_naming_the_key(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        StoreConfig.from_properties({key: value}, tmp_path)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"{key}={value}\n")
    res = CliRunner().invoke(app, ["topicList", "--store", str(tmp_path), "--config", str(conf)])
    assert res.exit_code == 1 and key in res.stderr and "Traceback" not in res.stderr
