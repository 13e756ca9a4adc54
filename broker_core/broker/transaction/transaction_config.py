"""The BrokerConfig keys the transaction services read, with RocketMQ's names and defaults.

A separate small dataclass so the services do not depend on the whole BrokerConfig; the Broker
builds it from its own config (same snake_case names).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.config_loader import JavaLong


@dataclass
class TransactionConfig:
    transaction_timeout: JavaLong = 6_000  # transactionTimeOut (ms): first check-back after this age
    transaction_check_max: int = 15  # transactionCheckMax: checks before the half is discarded
    transaction_check_interval: JavaLong = 30_000  # transactionCheckInterval (ms)
    transaction_op_msg_max_size: int = 4096  # transactionOpMsgMaxSize (chars per op body)
    transaction_op_batch_interval: int = 3000  # transactionOpBatchInterval (ms)
    transaction_metric_flush_interval: JavaLong = 10_000  # transactionMetricFlushInterval (ms)
    # Halves born longer ago than this are no longer checked but discarded. RocketMQ uses
    # fileReservedTime (72 h) here: older halves may already have lost their commitlog file.
    transaction_check_max_time_in_ms: int = 72 * 3600 * 1000
    reject_transaction_message: bool = False  # rejectTransactionMessage
    enable_transaction_metrics: bool = True  # enableTransactionMetrics

    @classmethod
    def from_broker_config(cls, broker_config: object, file_reserved_time_hours: int | None = None
                           ) -> TransactionConfig:
        """Pick the same-named attributes off any BrokerConfig-like object."""
        cfg = cls()
        for name in cfg.__dataclass_fields__:
            value = getattr(broker_config, name, None)
            if value is not None:
                setattr(cfg, name, type(getattr(cfg, name))(value))
        if file_reserved_time_hours is not None:
            cfg.transaction_check_max_time_in_ms = file_reserved_time_hours * 3600 * 1000
        return cfg
