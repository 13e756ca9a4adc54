"""Transactional messages (RocketMQ 5): half messages, END_TRANSACTION, op markers, check-back.

The names load lazily (PEP 562): ``BrokerConfig`` reads ``transaction_config`` on every config load,
and a read-only Broker answering a query never builds the transaction services, so neither may pay
for importing them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from broker_core.broker.transaction.end_transaction import EndTransactionResult, EndTransactionStatus
    from broker_core.broker.transaction.transaction_config import TransactionConfig
    from broker_core.broker.transaction.transactional_message_check_service import (
        TransactionalMessageCheckService,
    )
    from broker_core.broker.transaction.transactional_message_service import (
        CheckListener,
        CheckReport,
        TransactionalMessageService,
    )
    from broker_core.broker.transaction.transactional_message_util import (
        CID_RMQ_SYS_TRANS,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        is_transaction_prepare_message,
        parse_half_message_inner,
    )

_EXPORTS = {
    "EndTransactionResult": "broker_core.broker.transaction.end_transaction",
    "EndTransactionStatus": "broker_core.broker.transaction.end_transaction",
    "TransactionConfig": "broker_core.broker.transaction.transaction_config",
    "TransactionalMessageCheckService": "broker_core.broker.transaction.transactional_message_check_service",
    "CheckListener": "broker_core.broker.transaction.transactional_message_service",
    "CheckReport": "broker_core.broker.transaction.transactional_message_service",
    "TransactionalMessageService": "broker_core.broker.transaction.transactional_message_service",
    "CID_RMQ_SYS_TRANS": "broker_core.broker.transaction.transactional_message_util",
    "RMQ_SYS_TRANS_HALF_TOPIC": "broker_core.broker.transaction.transactional_message_util",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC": "broker_core.broker.transaction.transactional_message_util",
    "TRANS_CHECK_MAX_TIME_TOPIC": "broker_core.broker.transaction.transactional_message_util",
    "is_transaction_prepare_message": "broker_core.broker.transaction.transactional_message_util",
    "parse_half_message_inner": "broker_core.broker.transaction.transactional_message_util",
}

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = ["CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
           "TRANS_CHECK_MAX_TIME_TOPIC", "CheckListener", "CheckReport", "EndTransactionResult",
           "EndTransactionStatus", "TransactionConfig", "TransactionalMessageCheckService",
           "TransactionalMessageService", "is_transaction_prepare_message", "parse_half_message_inner"]
