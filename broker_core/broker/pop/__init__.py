"""5.x pop consumption: receipt handles, revive log, FIFO order info, long polling and the service."""

from .order_info import ConsumerOrderInfoManager, OrderInfo
from .pop_service import (
    AckResult,
    AckStatus,
    ChangeInvisibleResult,
    PopConfig,
    PopNoMessageError,
    PopResult,
    PopService,
    PopStatus,
)
from .receipt_handle import (
    POP_ORDER_REVIVE_QUEUE,
    InvalidReceiptHandleError,
    ReceiptHandle,
    build_pop_retry_topic,
)

__all__ = [
    "POP_ORDER_REVIVE_QUEUE", "AckResult", "AckStatus", "ChangeInvisibleResult", "ConsumerOrderInfoManager",
    "InvalidReceiptHandleError", "OrderInfo", "PopConfig", "PopNoMessageError", "PopResult", "PopService",
    "PopStatus", "ReceiptHandle", "build_pop_retry_topic",
]
