"""The answer to END_TRANSACTION (remoting code 37 / gRPC EndTransaction), independent of any wire format.

Why a result object instead of exceptions: the remoting adapter must turn each outcome into
RocketMQ's response code and remark (most producers send END_TRANSACTION one-way and never read
it, but the broker still logs and counts it), and the gRPC adapter maps it to its own Code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from broker_core.common.response_code import ResponseCode
from broker_core.store.commit_log import PutMessageResult, PutMessageStatus


class EndTransactionStatus(StrEnum):
    SUCCESS = "SUCCESS"
    IGNORED = "IGNORED"  # state UNKNOWN (0) or an unknown value: Java sends no response, changes nothing
    SYSTEM_ERROR = "SYSTEM_ERROR"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    ILLEGAL_OPERATION = "ILLEGAL_OPERATION"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # a slave broker: EndTransactionProcessor refuses before reading


# The RocketMQ response code EndTransactionProcessor answers with for each outcome.
_CODES = {
    EndTransactionStatus.SUCCESS: ResponseCode.SUCCESS,
    EndTransactionStatus.SYSTEM_ERROR: ResponseCode.SYSTEM_ERROR,
    EndTransactionStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    EndTransactionStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    EndTransactionStatus.ILLEGAL_OPERATION: ResponseCode.ILLEGAL_OPERATION,
    EndTransactionStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class EndTransactionResult:
    status: EndTransactionStatus
    remark: str = ""
    put_result: PutMessageResult | None = None  # the committed message's put, when one happened

    @property
    def ok(self) -> bool:
        return self.status is EndTransactionStatus.SUCCESS

    @property
    def response_code(self) -> int | None:
        """RocketMQ ResponseCode, or None when Java sends no response at all (IGNORED)."""
        return _CODES.get(self.status)


def result_of_final_put(result: PutMessageResult) -> EndTransactionResult:
    """EndTransactionProcessor.sendFinalMessage: a put status as an end-transaction answer."""
    status = result.status
    if status in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT) or status.value in (
            "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
        return EndTransactionResult(EndTransactionStatus.SUCCESS, "", result)
    if status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
        return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR, "Create mapped file failed.", result)
    if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED) or \
            status.value == "WHEEL_TIMER_MSG_ILLEGAL":
        return EndTransactionResult(EndTransactionStatus.MESSAGE_ILLEGAL,
                                    f"The message is illegal: {result.remark or status.value}", result)
    if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
        return EndTransactionResult(EndTransactionStatus.SERVICE_NOT_AVAILABLE, "Service not available now.", result)
    return EndTransactionResult(EndTransactionStatus.SYSTEM_ERROR, status.value, result)
