from __future__ import annotations

import threading
import time

import pytest

from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import (
    InvalidParameterError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from broker_core.broker.queue_lock import MessageQueue
from broker_core.common.response_code import ResponseCode
from broker_core.store.config_file import ConfigFileError, read_config_json
from broker_core.store.consumer_offset_file import read_consumer_offsets
from tests.waiting import wait_all_dispatched

from .conftest import small_config


def test_group_crud_and_persistence(make_broker, tmp_path):
    b = make_broker()
    assert b.get_subscription_group("TOOLS_CONSUMER") is not None  # system groups
    g = b.create_or_update_subscription_group("orders", consume_message_orderly=True, retry_max_times=3,
                                              group_retry_policy={"type": "EXPONENTIAL",
                                                                  "exponentialRetryPolicy": {"initial": 5000}})
    assert g.consume_message_orderly and g.retry_max_times == 3
    b.create_or_update_subscription_group("orders", retry_queue_nums=2)
    assert b.get_subscription_group("orders").consume_message_orderly  # update keeps other fields
    with pytest.raises(InvalidParameterError, match="illegal characters"):
        b.create_or_update_subscription_group("bad group")
    with pytest.raises(InvalidParameterError, match="groupRetryPolicy"):
        b.create_or_update_subscription_group("x", group_retry_policy={"type": "LINEAR"})
    with pytest.raises(InvalidParameterError, match="unknown subscription group setting"):
        b.create_or_update_subscription_group("x", consume_speed=3)
    raw = (tmp_path / "store" / "config" / "subscriptionGroup.json").read_text()
    assert '"groupName":"orders"' in raw and '"retryQueueNums":2' in raw and "\t" in raw
    b.shutdown()
    b2 = make_broker()
    assert b2.get_subscription_group("orders").retry_queue_nums == 2
    assert b2.get_subscription_group("orders").group_retry_policy["exponentialRetryPolicy"]["initial"] == 5000
    assert b2.delete_subscription_group("orders")
    assert b2.get_subscription_group("orders") is None
    assert "orders" not in {g.group_name for g in b2.list_subscription_groups()}


def test_group_auto_create_and_refusal(make_broker):
    """A pull auto-creates its group (autoCreateSubscriptionGroup); a commit never does, as
    ConsumerManageProcessor#updateConsumerOffset: a mistyped group must not become a group with offsets."""
    b = make_broker()
    b.create_or_update_topic("T", 1, 1)
    with pytest.raises(SubscriptionGroupNotExistError, match="Group typo not exist!"):
        b.commit_offset("typo", "T", 0, 0)
    assert b.get_subscription_group("typo") is None
    b.pull_message("auto", "T", 0, 0)
    assert b.get_subscription_group("auto") is not None
    b.commit_offset("auto", "T", 0, 0)
    assert b.query_offset("auto", "T", 0) == 0
    b.shutdown()
    b2 = make_broker(autoCreateSubscriptionGroup="false")
    with pytest.raises(SubscriptionGroupNotExistError) as ei:
        b2.commit_offset("never", "T", 0, 0)
    assert ei.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    with pytest.raises(TopicNotExistError):
        b2.commit_offset("auto", "Missing", 0, 0)


def test_offsets_persist_at_shutdown_in_java_shape(make_broker, tmp_path):
    b = make_broker()
    b.create_or_update_topic("T", 4, 4)
    b.create_or_update_subscription_group("g")
    for q in range(4):
        b.commit_offset("g", "T", q, 250 + q)
    assert b.query_offset("g", "T", 3) == 253 and b.query_offset("g", "T", 9) == -1
    b.shutdown()
    text = (tmp_path / "store" / "config" / "consumerOffset.json").read_text()
    assert '"T@g":{\n\t\t\t0:250,\n\t\t\t1:251,\n\t\t\t2:252,\n\t\t\t3:253\n\t\t}' in text
    assert '"groupTopicMap"' in text and '"dataVersion"' in text
    b2 = make_broker()
    assert [b2.query_offset("g", "T", q) for q in range(4)] == [250, 251, 252, 253]


def test_offsets_flushed_periodically(make_broker, tmp_path):
    b = make_broker(flushConsumerOffsetInterval="30")
    b.start()
    b.create_or_update_topic("T", 1, 1)
    b.create_or_update_subscription_group("g")
    b.commit_offset("g", "T", 0, 42)
    path = tmp_path / "store" / "config" / "consumerOffset.json"
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if path.exists() and read_consumer_offsets(path.parent)[0].get("T@g") == {0: 42}:
            break
        time.sleep(0.01)
    else:
        pytest.fail("consumerOffset.json was not flushed by the periodic task")


def test_reads_java_dialect_and_quoted_keys(tmp_path, make_broker):
    cfg = tmp_path / "store" / "config"
    cfg.mkdir(parents=True)
    (cfg / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicTest@my_group":{0:250,1:251},\n\t\t"%RETRY%my_group@my_group":{"0":7}\n\t},'
        '\n\t"dataVersion":{"counter":1448,"stateVersion":0,"timestamp":1700000000000}\n}')
    b = make_broker()
    assert b.query_offset("my_group", "TopicTest", 1) == 251
    assert b.query_offset("my_group", "%RETRY%my_group", 0) == 7
    assert b.offset_manager.data_version.counter == 1448


def test_corrupt_offset_file_falls_back_to_bak_or_fails_clearly(tmp_path):
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:')
    with pytest.raises(ConfigFileError):
        read_consumer_offsets(cfg)
    (cfg / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{0:5}}}')
    assert read_consumer_offsets(cfg)[0] == {"T@g": {0: 5}}
    (cfg / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{"x":1}}}')
    assert read_consumer_offsets(cfg)[0] == {"T@g": {0: 5}}  # a wrong shape is damage too: .bak used
    (cfg / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{"y":1}}}')
    with pytest.raises(ConfigFileError, match="non-integer"):
        read_consumer_offsets(cfg)


def test_lock_unlock_with_expiry(make_broker, clock):
    b = make_broker()
    q0, q1 = ("T", 0), ("T", 1)
    assert b.lock_batch_mq("g", "c1", [q0, q1]) == {MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)}
    assert b.lock_batch_mq("g", "c2", [q0, q1]) == set()
    assert b.lock_batch_mq("other-group", "c2", [q0]) == {MessageQueue("T", "broker-a", 0)}
    clock.advance(50_000)
    assert b.lock_batch_mq("g", "c1", [q0]) == {MessageQueue("T", "broker-a", 0)}  # renews q0 only
    clock.advance(10_001)
    # q1 expired (60 s since its last renewal), q0 renewed 10 s ago
    assert b.lock_batch_mq("g", "c2", [q0, q1]) == {MessageQueue("T", "broker-a", 1)}
    assert b.unlock_batch_mq("g", "c2", [q0]) == set()  # c2 cannot release c1's lock
    assert b.unlock_batch_mq("g", "c1", [q0]) == {MessageQueue("T", "broker-a", 0)}
    assert b.lock_batch_mq("g", "c2", [q0]) == {MessageQueue("T", "broker-a", 0)}
    assert b.lock_manager.owner("g", MessageQueue("T", "broker-a", 0)) == "c2"


def test_update_broker_config_changes_the_lock_expiry_of_a_running_broker(make_broker, clock):
    """updateBrokerConfig -k rebalanceLockMaxLiveTime answered success and showed the new value in
    getBrokerConfig, but the lock manager kept the value it was built with: a crashed orderly
    consumer's queues stayed locked the old 60 s."""
    b = make_broker()
    q0 = ("T", 0)
    assert b.lock_batch_mq("g", "c1", [q0]) == {MessageQueue("T", "broker-a", 0)}
    b.update_broker_config({"rebalanceLockMaxLiveTime": "10000"})
    clock.advance(10_001)
    assert b.lock_batch_mq("g", "c2", [q0]) == {MessageQueue("T", "broker-a", 0)}  # c1's lock expired


def test_config_loads_one_file(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-b\nbrokerIP1=10.1.2.3\nlistenPort=10920\nmaxMessageSize=2048\n"
                    "flushConsumerOffsetInterval=1000\nauthorizationEnabled=true\ncustomKey=kept\n")
    cfg = BrokerConfig.load(conf, tmp_path / "s")
    assert (cfg.broker_name, cfg.broker_ip1, cfg.listen_port) == ("broker-b", "10.1.2.3", 10920)
    assert cfg.store.max_message_size == 2048 and cfg.store.store_path_root_dir == str(tmp_path / "s")
    assert cfg.auth.authorization_enabled and cfg.auth.cluster_name == "DefaultCluster"
    assert cfg.properties["customKey"] == "kept"
    props = cfg.to_properties()
    assert props["brokerIP1"] == "10.1.2.3" and props["maxMessageSize"] == "2048"
    yaml_conf = tmp_path / "broker.yaml"
    yaml_conf.write_text("brokerClusterName: C1\ndefaultTopicQueueNums: 4\nautoCreateTopicEnable: false\n")
    cfg = BrokerConfig.load(yaml_conf)
    assert cfg.broker_cluster_name == "C1" and cfg.default_topic_queue_nums == 4 and not cfg.auto_create_topic_enable


def test_config_bad_values(tmp_path):
    from broker_core.config_loader import ConfigError

    with pytest.raises(ConfigError, match="listenPort"):
        small_config(listenPort="ten")
    with pytest.raises(ConfigError, match="defaultTopicQueueNums"):
        small_config(defaultTopicQueueNums="0")
    # a blank name made a broker that started, registered as "" and could not be addressed
    with pytest.raises(ConfigError, match="^brokerName must not be blank$"):
        small_config(brokerName="")
    with pytest.raises(ConfigError, match="^brokerClusterName must not be blank$"):
        small_config(brokerClusterName="  ")
    with pytest.raises(ConfigError, match="^transactionTimeOut must not be negative"):  # RocketMQ's key, not ours
        small_config(transactionTimeOut="-1")


def test_update_broker_config_refuses_a_blank_name(make_broker):
    b = make_broker()
    with pytest.raises(InvalidParameterError, match="brokerClusterName must not be blank"):
        b.update_broker_config({"brokerClusterName": ""})
    assert b.config.broker_cluster_name == "DefaultCluster"
    # a dry run (playbook --check) on a broker without a config file says the same, not "cannot be
    # changed on a running broker"
    from broker_core.broker.config_update import update_refusal

    assert update_refusal(b.config.to_properties(), {"brokerClusterName": ""}) == \
        "invalid broker config: brokerClusterName must not be blank"


def test_topics_json_written_atomically_with_backup(make_broker, tmp_path):
    b = make_broker()
    b.create_or_update_topic("A", 1, 1)
    b.create_or_update_topic("B", 1, 1)
    cfg = tmp_path / "store" / "config"
    assert "B" in read_config_json(cfg / "topics.json")["topicConfigTable"]
    assert "A" in read_config_json(cfg / "topics.json.bak")["topicConfigTable"]


def test_resets_while_the_flush_thread_writes_fail_none_and_keep_the_last(make_broker):
    """resetOffsetByTime persists on the request's thread while the flush thread persists too: once
    the two shared the temp file, a reset could fail with FileNotFoundError or leave a mix of two
    writes as consumerOffset.json."""
    b = make_broker(flushConsumerOffsetInterval="1")
    b.start()
    b.create_or_update_topic("T", 2, 2)
    for i in range(40):
        b.send_message("T", b"m%d" % i, queue_id=i % 2)
    wait_all_dispatched(b)  # a reset to offset 19 is refused while a queue's max offset is still below it
    errors: list[BaseException] = []
    last: dict[str, int] = {}

    def reset_in_turn(group: str) -> None:
        try:
            for k in range(40):
                b.reset_offset(group, "T", offset=k % 20)
                b.commit_offset(group, "T", 0, k % 20)  # ignored: the reset is not pulled yet
                last[group] = k % 20
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    groups = [f"g{i}" for i in range(4)]
    for g in groups:
        b.create_or_update_subscription_group(g)
    threads = [threading.Thread(target=reset_in_turn, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    b.shutdown()
    b2 = make_broker()
    assert {g: [b2.query_offset(g, "T", q) for q in range(2)] for g in groups} == \
        {g: [last[g], last[g]] for g in groups}


def test_a_newer_offset_snapshot_is_never_overwritten_by_an_older_one(make_broker, tmp_path, monkeypatch):
    """Two persists at once (the flush thread's and a reset's forced one): the one that snapshots last
    must write last, or the file goes back to the older offsets until the next commit dirties it."""
    from broker_core.broker import consumer_offset_manager as com

    b = make_broker()
    b.create_or_update_topic("T", 1, 1)
    b.create_or_update_subscription_group("g")
    b.commit_offset("g", "T", 0, 5)
    real_write = com.write_consumer_offsets
    older_snapshot_taken, release_older = threading.Event(), threading.Event()

    def write_first_slowly(config_dir, table, version):  # noqa: ANN001 - the real write, the first one held
        if not older_snapshot_taken.is_set():
            older_snapshot_taken.set()
            release_older.wait(5)
        real_write(config_dir, table, version)

    monkeypatch.setattr(com, "write_consumer_offsets", write_first_slowly)
    older = threading.Thread(target=b.offset_manager.persist)
    older.start()
    assert older_snapshot_taken.wait(5)
    b.commit_offset("g", "T", 0, 9)
    newer = threading.Thread(target=b.offset_manager.persist, kwargs={"force": True})
    newer.start()
    newer.join(0.3)  # lets it write first, if nothing orders the two
    release_older.set()
    older.join(5)
    newer.join(5)
    assert read_consumer_offsets(tmp_path / "store" / "config")[0]["T@g"] == {0: 9}
