"""Transactional messages (RocketMQ 5): half messages, END_TRANSACTION, op markers, check-back."""

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

__all__ = ["CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
           "TRANS_CHECK_MAX_TIME_TOPIC", "CheckListener", "CheckReport", "EndTransactionResult",
           "EndTransactionStatus", "TransactionConfig", "TransactionalMessageCheckService",
           "TransactionalMessageService", "is_transaction_prepare_message", "parse_half_message_inner"]
