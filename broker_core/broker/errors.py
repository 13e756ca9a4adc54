"""Broker errors, each carrying the RocketMQ response code (spec C) the protocol adapters answer with.

Why one hierarchy: the remoting server, the gRPC server and the admin layer all turn a refused
operation into a wire response or an operator message; the code and a precise text travel with the
exception so nobody has to guess them again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from broker_core.common.response_code import ResponseCode
from broker_core.store.config_file import ConfigWriteError


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


class BodyTooLargeError(MessageIllegalError):
    """A body (or batch) over maxMessageSize: MESSAGE_ILLEGAL on remoting, MESSAGE_BODY_TOO_LARGE on gRPC."""


class PropertiesTooLargeError(MessageIllegalError):
    """Properties over 32,767 bytes: MESSAGE_ILLEGAL on remoting, MESSAGE_PROPERTIES_TOO_LARGE on gRPC."""


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


@contextmanager
def config_written(outcome: str) -> Iterator[None]:
    """A config file that could not be written (a full disk) as the broker's SYSTEM_ERROR, saying what
    did not happen: "disk full: cannot write <store>/config/topics.json: No space left on device;
    topic T was not created". The caller has undone its change (the tables' ``change``)."""
    try:
        yield
    except ConfigWriteError as e:
        raise BrokerSystemError(f"{e}; {outcome}") from e
