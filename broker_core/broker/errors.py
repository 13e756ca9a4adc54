"""Broker errors, each carrying the RocketMQ response code (spec C) the protocol adapters answer with.

Why one hierarchy: the remoting server, the gRPC server and the admin layer all turn a refused
operation into a wire response or an operator message; the code and a precise text travel with the
exception so nobody has to guess them again.
"""

from __future__ import annotations

from broker_core.common.response_code import ResponseCode


class BrokerError(Exception):
    """A refused broker operation: ``code`` is the RocketMQ response code, ``remark`` the wire text."""

    code: int = ResponseCode.SYSTEM_ERROR

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    @property
    def remark(self) -> str:
        return self.message


class BrokerSystemError(BrokerError):
    code = ResponseCode.SYSTEM_ERROR


class MessageIllegalError(BrokerError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(BrokerError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE


class NoPermissionError(BrokerError):
    code = ResponseCode.NO_PERMISSION


class TopicNotExistError(BrokerError):
    code = ResponseCode.TOPIC_NOT_EXIST


class QueryNotFoundError(BrokerError):
    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailedError(BrokerError):
    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(BrokerError):
    code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatestError(BrokerError):
    code = ResponseCode.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExistError(BrokerError):
    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class InvalidParameterError(BrokerError):
    code = ResponseCode.INVALID_PARAMETER


class ConsumerNotOnlineError(BrokerError):
    code = ResponseCode.CONSUMER_NOT_ONLINE
