"""Config values a broker cannot run with are refused at load, in one line naming the key (ports, brokerIP1,
brokerRole/brokerId, topics.json fields); store-layout keys are never changed by updateBrokerConfig."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import InvalidParameterError, NoPermissionError
from broker_core.config_loader import ConfigError
from broker_core.net.outbound import IllegalAddressError, parse_address
from broker_core.store.config_file import ConfigFileError
from broker_core.store.topic_config import TopicConfigTable


@pytest.mark.parametrize(("key", "value"), [("listenPort", "70000"), ("listenPort", "-1"),
                                            ("grpcServerPort", "70000"), ("grpcServerPort", "65536")])
def test_port_out_of_range_names_the_key(tmp_path: Path, key: str, value: str) -> None:
    """listenPort=70000 was an OverflowError traceback in bind(); grpcServerPort=70000 silently became 4464."""
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_properties({key: value}, tmp_path)
    assert str(e.value) == f"{key}={value}: must be a port number in [0, 65535]"


def test_port_bounds_accepted(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_properties({"listenPort": "0", "grpcServerPort": "65535"}, tmp_path)
    assert (cfg.listen_port, cfg.grpc_server_port) == (0, 65535)


def test_broker_ip1_host_name_is_resolved_once(tmp_path: Path) -> None:
    """brokerIP1=localhost failed opening the store ("illegal IP address string passed to inet_aton")."""
    cfg = BrokerConfig.from_properties({"brokerIP1": "localhost"}, tmp_path / "store")
    assert cfg.broker_ip1 == "127.0.0.1"
    broker = Broker(tmp_path / "store", cfg)
    try:
        assert broker.config.broker_addr.startswith("127.0.0.1:")
    finally:
        broker.shutdown()


@pytest.mark.parametrize("value", ["no-such-host.invalid", "  "])
def test_broker_ip1_unresolvable_names_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"^brokerIP1") as e:
        BrokerConfig.from_properties({"brokerIP1": value}, tmp_path)
    assert "\n" not in str(e.value)


def test_ip_literals_are_kept(tmp_path: Path) -> None:
    assert BrokerConfig.from_properties({"brokerIP1": "10.1.2.3"}, tmp_path).broker_ip1 == "10.1.2.3"
    assert BrokerConfig.from_properties({"brokerIP1": "::1"}, tmp_path).broker_ip1 == "::1"


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
def test_master_is_always_broker_id_0(tmp_path: Path, role: str, caplog: pytest.LogCaptureFixture) -> None:
    """brokerId=1 on a master registered it as a slave: no writable route, every send failed."""
    with caplog.at_level(logging.WARNING, logger="rmqops.broker.config"):
        cfg = BrokerConfig.from_properties({"brokerRole": role, "brokerId": "1"}, tmp_path)
    assert cfg.broker_id == 0
    assert any("brokerId=1" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("broker_id", ["0", "-1"])
def test_slave_needs_a_positive_broker_id(tmp_path: Path, broker_id: str) -> None:
    with pytest.raises(ConfigError, match=r"^Slave's brokerId must be > 0"):
        BrokerConfig.from_properties({"brokerRole": "SLAVE", "brokerId": broker_id}, tmp_path)
    assert BrokerConfig.from_properties({"brokerRole": "SLAVE", "brokerId": "2"}, tmp_path).broker_id == 2


def test_unknown_broker_role_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^brokerRole='MASTER': expected ASYNC_MASTER, SYNC_MASTER or SLAVE"):
        BrokerConfig.from_properties({"brokerRole": "MASTER"}, tmp_path)


def test_runtime_switch_to_slave_with_id_0_is_refused(tmp_path: Path) -> None:
    broker = Broker(tmp_path / "store")
    try:
        with pytest.raises(InvalidParameterError, match="Slave's brokerId must be > 0"):
            broker.update_broker_config({"brokerRole": "SLAVE"})
        assert broker.config.store.broker_role == "ASYNC_MASTER"
    finally:
        broker.shutdown()


@pytest.mark.parametrize(("addr", "reason"), [("127.0.0.1", "is not host:port"), ("127.0.0.1:abc", "no valid port"),
                                              ("127.0.0.1:70000", "no valid port"), (":9876", "is not host:port"),
                                              ("127.0.0.1:0", "no valid port")])
def test_name_server_address_without_a_valid_port(addr: str, reason: str) -> None:
    with pytest.raises(IllegalAddressError, match=reason):
        parse_address(addr)


def test_name_server_addresses_accepted() -> None:
    assert parse_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_address(" ns.example:1 ") == ("ns.example", 1)
    assert parse_address("[::1]:9876") == ("::1", 9876)


# -- topics.json ----------------------------------------------------------------------------------------

def _topics_with(tmp_path: Path, field: str, value: object) -> Path:
    config = tmp_path / "config"
    config.mkdir()
    entry = {"topicName": "Orders", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "order": False,
             "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "attributes": {}}
    entry[field] = value
    (config / "topics.json").write_text(json.dumps({"topicConfigTable": {"Orders": entry}}))
    return config


@pytest.mark.parametrize(("field", "value", "says"), [
    ("readQueueNums", "abc", 'readQueueNums: expected a Java int, got "abc"'),
    ("writeQueueNums", [1], "writeQueueNums: expected a Java int, got [1]"),
    ("perm", 2**31, "perm: out of the Java int range: 2147483648"),
    ("order", "maybe", 'order: expected a Java boolean, got "maybe"'),
    ("topicFilterType", "ANY", 'topicFilterType: expected SINGLE_TAG or MULTI_TAG, got "ANY"'),
    ("attributes", "x", 'attributes: expected an object, got "x"'),
])
def test_corrupt_topics_json_field_names_topic_and_field(tmp_path: Path, field: str, value: object, says: str) -> None:
    """"readQueueNums":"abc" said only "invalid literal for int() with base 10: 'abc'"."""
    table = TopicConfigTable(_topics_with(tmp_path, field, value))
    with pytest.raises(ConfigFileError) as e:
        table.load()
    assert f"topic 'Orders': {says}" in str(e.value) and "\n" not in str(e.value)


def test_topics_json_values_fastjson_accepts(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "topics.json").write_text(json.dumps({"topicConfigTable": {"A": {
        "readQueueNums": "3", "writeQueueNums": 2.0, "perm": None, "order": "false", "attributes": {"k": 1}}}}))
    table = TopicConfigTable(config)
    table.load()
    a = table.get("A")
    assert a is not None
    assert (a.read_queue_nums, a.write_queue_nums, a.perm, a.order, a.attributes) == (3, 2, 6, False, {"k": "1"})


# -- store layout keys ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value"), [
    ("mappedFileSizeConsumeQueue", "40"), ("mappedFileSizeCommitLog", str(2 * 1024 * 1024)),
    ("mapperFileSizeBatchConsumeQueue", "4600"), ("maxHashSlotNum", "100"), ("maxIndexNum", "1000"),
    ("storePathCommitLog", "/elsewhere/commitlog"), ("storePathRootDir", "/elsewhere"),
    ("enableConsumeQueueExt", "true"), ("timerPrecisionMs", "500"),
])
def test_store_layout_keys_are_refused_at_runtime(tmp_path: Path, key: str, value: str) -> None:
    """updateBrokerConfig -k mappedFileSizeConsumeQueue -v 40 answered success; new queues got 40-byte files
    and the store could not be opened again ("length 40 differs from the configured file size")."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\n")
    store = tmp_path / "store"
    broker = Broker(store, BrokerConfig.load(conf, store))
    try:
        before = broker.config.to_properties()
        for persist_to in (None, conf):  # over -n (live), and mqadmin --store --config (the file too)
            with pytest.raises(NoPermissionError) as e:
                broker.update_broker_config({key: value, "fileReservedTime": "5"}, persist_to=persist_to)
            assert str(e.value).startswith(f"{key} cannot be changed by updateBrokerConfig: it is part of the "
                                           "store's on-disk layout")
        assert broker.config.to_properties() == before and conf.read_text() == "brokerName=b1\n"
        # the value it already has is no change (getBrokerConfig's output fed back)
        broker.update_broker_config({key: before[key]}, persist_to=conf)
    finally:
        broker.shutdown()


def test_refused_queue_size_leaves_new_queues_readable(tmp_path: Path) -> None:
    store = tmp_path / "store"
    broker = Broker(store)
    try:
        with pytest.raises(NoPermissionError):
            broker.update_broker_config({"mappedFileSizeConsumeQueue": "40"})
        broker.create_or_update_topic("T2", 1, 1)
        broker.send_message("T2", b"after")
    finally:
        broker.shutdown()
    reopened = Broker(store)
    try:
        assert reopened.config.store.mapped_file_size_consume_queue == 300_000 * 20
        files = list((store / "consumequeue" / "T2" / "0").iterdir())
        assert [f.stat().st_size for f in files] == [300_000 * 20]
    finally:
        reopened.shutdown()


def test_registration_to_an_illegal_address_is_a_connection_error() -> None:
    """The register loop logs OSErrors and retries; a ValueError from int("abc") escaped it."""
    import asyncio

    from broker_core.net.outbound import OutboundConnection

    async def connect() -> None:
        await OutboundConnection("127.0.0.1:abc").connect(timeout=1)

    with pytest.raises(ConnectionError, match=r"illegal name server address: '127.0.0.1:abc' has no valid port"):
        asyncio.run(connect())
