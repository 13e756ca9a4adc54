"""5.x pop consumption: receipt handles, revive log, FIFO order info, long polling and the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
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

# Names load lazily (PEP 562) so importing ``pop.order_info`` or the broker config stays cheap.
_EXPORTS = {
    "ConsumerOrderInfoManager": "broker_core.broker.pop.order_info",
    "OrderInfo": "broker_core.broker.pop.order_info",
    "AckResult": "broker_core.broker.pop.pop_service",
    "AckStatus": "broker_core.broker.pop.pop_service",
    "ChangeInvisibleResult": "broker_core.broker.pop.pop_service",
    "PopConfig": "broker_core.broker.pop.pop_config",
    "PopNoMessageError": "broker_core.broker.pop.pop_service",
    "PopResult": "broker_core.broker.pop.pop_service",
    "PopService": "broker_core.broker.pop.pop_service",
    "PopStatus": "broker_core.broker.pop.pop_service",
    "POP_ORDER_REVIVE_QUEUE": "broker_core.broker.pop.receipt_handle",
    "InvalidReceiptHandleError": "broker_core.broker.pop.receipt_handle",
    "ReceiptHandle": "broker_core.broker.pop.receipt_handle",
    "build_pop_retry_topic": "broker_core.broker.pop.receipt_handle",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "POP_ORDER_REVIVE_QUEUE", "AckResult", "AckStatus", "ChangeInvisibleResult", "ConsumerOrderInfoManager",
    "InvalidReceiptHandleError", "OrderInfo", "PopConfig", "PopNoMessageError", "PopResult", "PopService",
    "PopStatus", "ReceiptHandle", "build_pop_retry_topic",
]
