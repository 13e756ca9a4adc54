"""Broker.update_broker_config (UPDATE_BROKER_CONFIG): live objects change, the config file keeps its
other lines, refused changes touch nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import InvalidParameterError, NoPermissionError, ServiceNotAvailableError


def test_update_changes_live_config_and_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# ops\nbrokerName=broker-x\nflushIntervalCommitLog=500\n")
    broker = Broker(tmp_path / "store", BrokerConfig.load(conf, tmp_path / "store"))
    try:
        store_cfg = broker.config.store
        applied = broker.update_broker_config({"flushIntervalCommitLog": "900", "maxMessageSize": "1024",
                                               "autoCreateTopicEnable": "false", "noSuchKey": "1"}, persist_to=conf)
        assert applied == ["autoCreateTopicEnable", "flushIntervalCommitLog", "maxMessageSize"]  # unknown: ignored
        assert broker.config.store is store_cfg and store_cfg.flush_interval_commit_log == 900
        assert store_cfg.max_message_size == 1024 and broker.config.auto_create_topic_enable is False
        assert conf.read_text().splitlines() == ["# ops", "brokerName=broker-x", "flushIntervalCommitLog=900",
                                                 "maxMessageSize=1024", "autoCreateTopicEnable=false"]
        before = conf.read_text()
        with pytest.raises(NoPermissionError, match="black list"):
            broker.update_broker_config({"brokerConfigPath": "/etc/x", "maxMessageSize": "1"}, persist_to=conf)
        with pytest.raises(InvalidParameterError, match="invalid broker config"):
            broker.update_broker_config({"maxMessageSize": "big", "flushIntervalCommitLog": "1"}, persist_to=conf)
        assert conf.read_text() == before and store_cfg.max_message_size == 1024
    finally:
        broker.shutdown()


def test_read_only_broker_refuses(tmp_path: Path) -> None:
    Broker(tmp_path / "store").shutdown()
    broker = Broker(tmp_path / "store", read_only=True)
    try:
        with pytest.raises(ServiceNotAvailableError):
            broker.update_broker_config({"flushIntervalCommitLog": "900"}, persist_to=tmp_path / "b.conf")
        assert not (tmp_path / "b.conf").exists()
    finally:
        broker.shutdown()


def test_only_the_given_keys_change_on_the_live_broker(tmp_path: Path) -> None:
    """A port chosen at start (mqbroker --listenPort 0) is not in the file: an update must keep it."""
    broker = Broker(tmp_path / "store")
    try:
        broker.config.listen_port = 40123
        broker.update_broker_config({"brokerPermission": "4", "flushIntervalCommitLog": "700"})
        assert broker.config.broker_permission == 4 and broker.config.store.flush_interval_commit_log == 700
        assert broker.config.listen_port == 40123
        assert broker.config.properties["brokerPermission"] == "4"
    finally:
        broker.shutdown()


def test_concurrent_updates_keep_every_key_in_the_file(tmp_path: Path) -> None:
    """The remoting server runs requests on a pool of threads: two operators (or a playbook) changing
    different keys at once must both find their change in the file after a restart. Each update used to
    rewrite the file from what it had read, so the last writer dropped the others' keys."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\n")
    broker = Broker(tmp_path / "store", BrokerConfig.load(conf, tmp_path / "store"))
    wanted = {"maxMessageSize": "4000000", "fileReservedTime": "48", "deleteWhen": "03",
              "flushIntervalCommitLog": "600", "defaultTopicQueueNums": "6", "diskMaxUsedSpaceRatio": "80"}
    start = threading.Barrier(len(wanted))
    failures: list[BaseException] = []

    def update(key: str) -> None:
        try:
            start.wait()
            for _ in range(20):
                broker.update_broker_config({key: wanted[key]}, persist_to=conf)
        except BaseException as e:  # reported below
            failures.append(e)

    threads = [threading.Thread(target=update, args=(key,)) for key in wanted]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        broker.shutdown()
    assert not failures, failures
    restarted = BrokerConfig.load(conf, tmp_path / "store").to_properties()
    assert {k: restarted[k] for k in wanted} == wanted


def test_transaction_keys_take_effect_on_the_running_check_service(tmp_path: Path) -> None:
    """updateBrokerConfig -k transactionCheckMax answered success and getBrokerConfig showed the new value,
    but the check service kept the copy it was built with: a half was still given up after the old count."""
    broker = Broker(tmp_path / "store", BrokerConfig.from_properties({"transactionCheckMax": "3"}, tmp_path / "store"))
    try:
        service = broker.transaction_service
        assert service.config.transaction_check_max == 3
        broker.update_broker_config({"transactionCheckMax": "8", "transactionTimeOut": "2000"})
        assert (service.config.transaction_check_max, service.config.transaction_timeout) == (8, 2000)
    finally:
        broker.shutdown()


def test_identity_and_ports_go_to_the_file_only(tmp_path: Path) -> None:
    """The broker is bound and registered under them: live, a new listenPort advertised a dead port."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\n")
    broker = Broker(tmp_path / "store", BrokerConfig.load(conf, tmp_path / "store"))
    try:
        broker.config.listen_port = 40123
        addr = broker.config.broker_addr
        broker.update_broker_config({"listenPort": "12345", "brokerName": "broker-y", "grpcServerPort": "9",
                                     "flushIntervalCommitLog": "800"}, persist_to=conf)
        assert broker.config.broker_addr == addr and broker.config.broker_name == "broker-x"
        assert broker.config.grpc_server_port == 8081 and broker.config.store.flush_interval_commit_log == 800
        assert conf.read_text().splitlines() == ["brokerName=broker-y", "listenPort=12345", "grpcServerPort=9",
                                                 "flushIntervalCommitLog=800"]
        before = conf.read_text()
        with pytest.raises(NoPermissionError, match="^listenPort cannot be changed on a running broker"):
            broker.update_broker_config({"listenPort": "1", "flushIntervalCommitLog": "1"})
        assert broker.config.store.flush_interval_commit_log == 800 and conf.read_text() == before
        broker.update_broker_config({"listenPort": "40123", "brokerName": "broker-x"})  # the values it has
    finally:
        broker.shutdown()


def test_pop_keys_are_listed_and_change_the_running_pop_service(tmp_path: Path) -> None:
    """enableRetryTopicV2 was neither listed by getBrokerConfig nor applied by a live update (answered
    success, ignored): revived pop messages kept going to the v1 retry topic until a restart."""
    broker = Broker(tmp_path / "store")
    try:
        assert broker.config.to_properties()["enableRetryTopicV2"] == "false"
        assert broker.pop_service.pop_retry_topic("T", "G") == "%RETRY%G_T"
        assert broker.update_broker_config({"enableRetryTopicV2": "true", "popFromRetryProbability": "50"}) == [
            "enableRetryTopicV2", "popFromRetryProbability"]
        assert broker.config.to_properties()["enableRetryTopicV2"] == "true"
        assert broker.pop_service.pop_retry_topic("T", "G") == "%RETRY%G+T"
        assert broker.pop_service.config.pop_from_retry_probability == 50
        with pytest.raises(InvalidParameterError, match="popFromRetryProbability must be 0..100"):
            broker.update_broker_config({"popFromRetryProbability": "101"})
        assert broker.pop_service.config.pop_from_retry_probability == 50
    finally:
        broker.shutdown()
