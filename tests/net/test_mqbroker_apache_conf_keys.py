"""Keys of real Apache broker.conf files that this broker used to take silently in the wrong sense, through
the real ``mqbroker`` (a refusal is one line naming key, value and file, exit 1, no store made).

Why: ``storeType=defaultRocksDB`` and ``enableDLegerCommitLog=true`` were ignored (consume queues kept
in files, a plain commitlog: not the layout the operator asked for); ``autoCreateTopicEnable=yes`` was
true here where Java's Boolean.parseBoolean makes it false; getBrokerConfig listed
``checkCrcOnRecover`` beside the file's ``checkCRCOnRecover``, and an update made them disagree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from net_util import REPO

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.config_loader import ConfigError

BASE = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\n"


def refused(tmp_path: Path, lines: str) -> str:
    """The one line ``mqbroker -c`` prints refusing a file with ``lines``; nothing was created."""
    conf = tmp_path / "broker.conf"
    conf.write_text(BASE + lines)
    store = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RMQ_STORE", None)
    r = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "-c", str(conf),
                        "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", "0"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    out = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert r.returncode == 1 and len(out) == 1, out
    assert str(conf) in out[0] and not store.exists()
    return out[0]


@pytest.mark.parametrize("value", ["defaultRocksDB", "DefaultRocksDB"])
def test_rocksdb_store_type_is_refused(tmp_path: Path, value: str) -> None:
    line = refused(tmp_path, f"storeType={value}\n")
    assert f"storeType={value}" in line and "not supported" in line and "storeType=default" in line


def test_dledger_commit_log_is_refused(tmp_path: Path) -> None:
    line = refused(tmp_path, "enableDLegerCommitLog=true\ndLegerGroup=RaftNode00\ndLegerSelfId=n0\n")
    assert "enableDLegerCommitLog=true" in line and "DLedger commitlog is not supported" in line


def test_default_store_type_and_dledger_off_are_accepted(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(BASE + "storeType=default\nenableDLegerCommitLog=false\n")
    cfg = BrokerConfig.load(conf, tmp_path / "store")
    assert cfg.to_properties()["storeType"] == "default"
    assert cfg.to_properties()["enableDLegerCommitLog"] == "false"


@pytest.mark.parametrize("value", ["yes", "1", "on", "no", "0", "off", "t"])
def test_a_boolean_that_is_not_true_or_false_is_refused(tmp_path: Path, value: str) -> None:
    """Java's Boolean.parseBoolean makes "yes", "1", "on" false (we took them as true): a clear refusal."""
    line = refused(tmp_path, f"autoCreateTopicEnable={value}\n")
    assert "autoCreateTopicEnable" in line and repr(value) in line and "true or false" in line


@pytest.mark.parametrize("key", ["autoCreateTopicEnable", "checkCRCOnRecover", "authenticationEnabled",
                                 "cleanFileForciblyEnable", "enableRetryTopicV2"])
def test_every_boolean_key_takes_true_false_in_any_case_and_refuses_the_rest(tmp_path: Path, key: str) -> None:
    conf = tmp_path / "broker.conf"
    for text, value in (("TRUE", "true"), ("False", "false"), (" true", "true")):  # leading: Properties.load drops it
        conf.write_text(f"{key}={text}\n")
        assert BrokerConfig.load(conf, tmp_path / "store").to_properties()[key] == value
    conf.write_text(f"{key}=1\n")
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(conf, tmp_path / "store")
    assert str(conf) in str(e.value) and key in str(e.value) and "true or false" in str(e.value)


@pytest.mark.parametrize("key", ["autoCreateTopicEnable", "traceTopicEnable", "authenticationEnabled",
                                 "authorizationEnabled"])
@pytest.mark.parametrize("text", ["true ", "true\t", "false ", "TRUE  \t"])
def test_a_boolean_with_trailing_whitespace_is_refused_naming_the_whitespace(tmp_path: Path, key: str,
                                                                             text: str) -> None:
    """``autoCreateTopicEnable=true `` was read as true here, while Apache's Properties.load keeps the space
    and Boolean.parseBoolean("true ") is false: the same file meant different things. Refused, saying so."""
    line = refused(tmp_path, f"{key}={text}\n")
    assert key in line and repr(text) in line and "whitespace" in line and "false" in line, line


def test_a_boolean_set_through_yaml_or_with_leading_whitespace_is_still_taken(tmp_path: Path) -> None:
    """Properties.load drops the whitespace between '=' and the value, so ``key=  true`` is true in Apache too."""
    conf = tmp_path / "broker.conf"
    conf.write_text(BASE + "autoCreateTopicEnable=  \tfalse\ntraceTopicEnable = true\n")
    listed = BrokerConfig.load(conf, tmp_path / "store").to_properties()
    assert listed["autoCreateTopicEnable"] == "false" and listed["traceTopicEnable"] == "true"


def test_numbers_and_strings_keep_their_trailing_whitespace_handling(tmp_path: Path) -> None:
    """Only booleans changed: a number with a trailing space is still taken (kinder than Apache's
    NumberFormatException), a string is still trimmed as MixAll.properties2Object trims it."""
    conf = tmp_path / "broker.conf"
    conf.write_text(BASE + "sendMessageThreadPoolNums=4 \nbrokerIP1=10.0.0.1 \n")
    listed = BrokerConfig.load(conf, tmp_path / "store").to_properties()
    assert listed["sendMessageThreadPoolNums"] == "4" and listed["brokerIP1"] == "10.0.0.1"


def test_check_crc_on_recover_has_apaches_key_once(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(BASE + "checkCRCOnRecover=true\n")
    store = tmp_path / "store"
    broker = Broker(store, BrokerConfig.load(conf, store))
    try:
        listed = broker.config.to_properties()
        assert [k for k in listed if k.lower() == "checkcrconrecover"] == ["checkCRCOnRecover"]
        assert broker.update_broker_config({"checkCRCOnRecover": "false"}, persist_to=conf) == ["checkCRCOnRecover"]
        assert broker.config.store.check_crc_on_recover is False
        listed = broker.config.to_properties()
        assert [(k, v) for k, v in listed.items() if k.lower() == "checkcrconrecover"] == [("checkCRCOnRecover",
                                                                                          "false")]
    finally:
        broker.shutdown()
    conf.write_text(BASE + "checkCrcOnRecover=false\n")  # the spelling our getBrokerConfig used to print
    listed = BrokerConfig.load(conf, store).to_properties()
    assert [(k, v) for k, v in listed.items() if k.lower() == "checkcrconrecover"] == [("checkCRCOnRecover",
                                                                                      "false")]
