"""The transaction op-batch and metrics keys (transactionOpBatchInterval, transactionOpMsgMaxSize,
transactionMetricFlushInterval, enableTransactionMetrics) are BrokerConfig keys, as in Apache 5.x:
getBrokerConfig lists them with Apache's defaults, updateBrokerConfig takes them, and the two that
Apache's TransactionalOpBatchService / TransactionalMessageServiceImpl read on every loop reach the
op batcher of the running broker. enableTransactionMetrics is read once at start (Apache's
BrokerMetricsManager reads it there): an update goes to the config file for the next start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import InvalidParameterError, NoPermissionError
from tests.broker.conftest import FakeClock

T = "TxOpTopic"
PG = "tx-op-pg"
APACHE_DEFAULTS = {"transactionOpBatchInterval": "3000", "transactionOpMsgMaxSize": "4096",
                   "transactionMetricFlushInterval": "10000", "enableTransactionMetrics": "true"}


def test_the_keys_are_listed_with_apache_defaults_without_a_file_setting_them() -> None:
    listed = BrokerConfig.from_properties({}).to_properties()
    assert {k: listed.get(k) for k in APACHE_DEFAULTS} == APACHE_DEFAULTS


def _op_records(b: Broker) -> int:
    return b.get_max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0)


def test_a_live_op_batch_interval_reaches_the_op_batcher(make_broker: Callable[..., Broker], clock: FakeClock) -> None:
    """With a 10-minute interval the op marker of a commit waits; set to 0 live, the next round writes it."""
    b = make_broker(transactionOpBatchInterval="600000")
    b.create_or_update_topic(T, 1, 1)
    half = b.send_message(T, b"tx", {"TRAN_MSG": "true", "PGROUP": PG}, queue_id=0, producer_group=PG)
    assert b.end_transaction(PG, half.queue_offset, half.commit_log_offset, 8, msg_id=half.msg_id,
                             transaction_id=half.transaction_id).ok  # 8: commit
    clock.advance(1_000)
    b.tick()
    assert _op_records(b) == 0  # still batched
    assert b.update_broker_config({"transactionOpBatchInterval": "0"}) == ["transactionOpBatchInterval"]
    assert b.config.to_properties()["transactionOpBatchInterval"] == "0"
    clock.advance(1)
    b.tick()
    assert _op_records(b) == 1


def test_a_live_op_msg_max_size_reaches_the_op_batcher(make_broker: Callable[..., Broker], clock: FakeClock) -> None:
    """Markers of three commits wait for a 10-minute interval under the default 4096 characters; with
    transactionOpMsgMaxSize 4 set live, the next round writes the full batch ("0,1,"; one "<offset>,"
    may overshoot, the rest waits)."""
    b = make_broker(transactionOpBatchInterval="600000")
    b.create_or_update_topic(T, 1, 1)
    for i in range(3):
        half = b.send_message(T, b"tx%d" % i, {"TRAN_MSG": "true", "PGROUP": PG}, queue_id=0, producer_group=PG)
        assert b.end_transaction(PG, half.queue_offset, half.commit_log_offset, 8, msg_id=half.msg_id,
                                 transaction_id=half.transaction_id).ok
    clock.advance(1_000)
    b.tick()
    assert _op_records(b) == 0
    b.update_broker_config({"transactionOpMsgMaxSize": "4"})
    b.tick()
    assert _op_records(b) == 1


def test_bad_values_are_refused_and_change_nothing(make_broker: Callable[..., Broker]) -> None:
    b = make_broker()
    for key, value in (("transactionOpMsgMaxSize", "0"), ("transactionOpBatchInterval", "-1"),
                       ("transactionOpBatchInterval", "soon")):
        with pytest.raises(InvalidParameterError, match=key):
            b.update_broker_config({key: value})
    assert b.transaction_service.op_batcher.max_size == 4096
    assert b.transaction_service.op_batcher.batch_interval == 3000


def test_enable_transaction_metrics_is_read_at_start(make_broker: Callable[..., Broker], tmp_path: Path) -> None:
    """Without a config file there is nowhere to keep it for the next start: refused, as listenPort; with
    one it is written there and the running broker keeps counting."""
    b = make_broker()
    with pytest.raises(NoPermissionError, match="enableTransactionMetrics"):
        b.update_broker_config({"enableTransactionMetrics": "false"})
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\n")
    b.update_broker_config({"enableTransactionMetrics": "false", "transactionMetricFlushInterval": "2000"},
                           persist_to=conf)
    assert b.config.enable_transaction_metrics is True and b.transaction_service.config.enable_transaction_metrics
    assert b.transaction_service.config.transaction_metric_flush_interval == 2000
    assert conf.read_text().splitlines() == ["brokerName=broker-a", "enableTransactionMetrics=false",
                                             "transactionMetricFlushInterval=2000"]
