"""apache.rocketmq.v2 MessagingService over the Broker: translate each RPC, call the Broker, answer.

Why thin: every rule (queues, pop and FIFO order, retries and DLQ, timers, transactions, ACL) lives
in the Broker so gRPC, remoting and mqadmin behave the same. What stays here is protocol work:
metadata and status codes, Settings over the Telemetry stream, receipt-handle renewal for push
consumers (auto_renew), transaction ids, and long-polling time rules (spec grpc-v2 §5).

Broker calls may block (locks, file I/O, long polling), so they run on a thread pool and never on
the event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration

from broker_core.auth.authentication import AuthenticationContext
from broker_core.auth.config import grpc_request_code
from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.client_registry import CONSUME_TYPE_POP, ConsumerData, SubscriptionData
from broker_core.broker.errors import BodyTooLargeError, BrokerError, PropertiesTooLargeError
from broker_core.broker.pop.pop_service import AckResult, AckStatus, PopStatus
from broker_core.broker.pop.receipt_handle import InvalidReceiptHandleError, ReceiptHandle
from broker_core.broker.pull import OFFSET_RESET
from broker_core.broker.request_context import RequestContext
from broker_core.broker.topic_validator import (
    dlq_topic,
    is_dlq_topic,
    is_retry_topic,
    is_sys_consumer_group,
    validate_group,
    validate_topic,
)
from broker_core.common.response_code import ResponseCode
from broker_core.remoting.codes import CURRENT_VERSION
from broker_core.remoting.mqversion import version_ordinal
from broker_core.store.codec import properties as P
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.compression import BodyDecompressError
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.message_id import UniqKeyGenerator
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from broker_core.store.topic_config import TopicConfig

from .cluster_route import BrokerQueues, ClusterRoutes, GrpcAddress, address_scheme
from .convert import InboundMessage, WireMessageError, inbound, message_type_of, outbound
from .sessions import CHANNEL_EXPIRED_MS, ClientSession, GrpcChannel, SessionRegistry, TelemetryChannel
from .stubs import MessagingServiceServicer, pb

log = logging.getLogger("rmqops.grpc")
T = TypeVar("T")

COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0  # MessageSysFlag transaction types END_TRANSACTION takes
POLLING_RESERVE_MS = 500  # answer this long before the client's deadline
DEFAULT_INVISIBLE_MS = 60_000  # proxy default invisible time for auto-renewed receives
RENEW_AHEAD_MS = 10_000  # renew an auto-renewed message this long before it would become visible
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
RENEW_MAX_TOTAL_MS = 3 * 3_600_000
# invisibleTimeMillisWhenClear: what a message held for a client that left is changed to, so that
# another consumer of its group gets it about a second later instead of after the renewals run out
INVISIBLE_WHEN_CLEAR_MS = 1_000
# The default customized retry ladder (delay levels 3..18 as durations), announced to push consumers.
DEFAULT_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
DEFAULT_EXPONENTIAL = (5_000, 7_200_000, 2.0)  # ExponentialRetryPolicy's initial ms, max ms, multiplier
_MESSAGE_TYPES = {"NORMAL": [pb.MessageType.NORMAL], "FIFO": [pb.MessageType.FIFO],
                  "DELAY": [pb.MessageType.DELAY], "TRANSACTION": [pb.MessageType.TRANSACTION],
                  "MIXED": [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY,
                            pb.MessageType.TRANSACTION]}
_CODE_BY_RESPONSE = {
    ResponseCode.TOPIC_NOT_EXIST: pb.Code.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.Code.FORBIDDEN,
    ResponseCode.INVALID_PARAMETER: pb.Code.BAD_REQUEST,
    ResponseCode.MESSAGE_ILLEGAL: pb.Code.BAD_REQUEST,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SYSTEM_BUSY: pb.Code.TOO_MANY_REQUESTS,
    ResponseCode.POLLING_FULL: pb.Code.TOO_MANY_REQUESTS,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.Code.HA_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class GrpcLimits:
    """The endpoint's time limits, the proxy's ProxyConfig keys (defaults as Apache's): how long a
    ReceiveMessage may long-poll (grpcClientConsumerMin/MaxLongPollingTimeoutMillis; the maximum is also
    the long polling timeout a consumer's Settings carry) and which invisible durations a receive may
    ask (minInvisibleTimeMillsForRecv, maxInvisibleTimeMills; a maximum of 0 or less is none, as upstream's
    GrpcValidator). Read from the broker's configuration at each use (``from_config``): updateBrokerConfig
    changes it in place, and the next request goes by the new values."""

    min_polling_ms: int
    max_polling_ms: int
    min_invisible_ms: int
    max_invisible_ms: int
    max_delay_ms: int  # maxDelayTimeMills: how far ahead a delivery time may be (<= 0: none)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GrpcLimits:
        return cls(min_polling_ms=config.grpc_client_consumer_min_long_polling_timeout_millis,
                   max_polling_ms=config.grpc_client_consumer_max_long_polling_timeout_millis,
                   min_invisible_ms=config.min_invisible_time_mills_for_recv,
                   max_invisible_ms=config.max_invisible_time_mills,
                   max_delay_ms=config.max_delay_time_mills)

    def invisible_range(self) -> str:
        """What a refusal names as the accepted durations."""
        top = f"{self.max_invisible_ms} ms" if self.max_invisible_ms > 0 else "no maximum"
        return f"[{self.min_invisible_ms} ms, {top}]"

    def invisible_too_long(self, invisible_ms: int) -> bool:
        return 0 < self.max_invisible_ms < invisible_ms


def status(code: int, message: str = "OK") -> Any:
    return pb.Status(code=code, message=message)


OK = status(pb.Code.OK)


def _ack_failure(result: AckResult) -> Any:
    """An ack entry's status: an expired handle is the client's to renew (upstream's proxy refuses it
    as INVALID_RECEIPT_HANDLE, "receipt handle is expired", before the broker sees it), anything else
    a broker-side failure."""
    if result.status is AckStatus.EXPIRED:
        return status(pb.Code.INVALID_RECEIPT_HANDLE, f"receipt handle is expired: {result.remark}")
    return status(pb.Code.INTERNAL_SERVER_ERROR, f"ack failed: status is abnormal ({result.status.value})")


class RpcError(Exception):
    """An in-band failure: answered as ``status {code, message}`` in the RPC's normal response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _delivered(m: MessageExt, group: str, receipt_handle: str | None = None,
               invisible_ms: int | None = None) -> Any | None:
    """``m`` as a consumer receives it, or None (logged, naming topic, queue and offset) when its
    compressed body does not decompress. Upstream's proxy decodes popped and pulled messages with
    MessageDecoder, which returns no message for such a record, so the consumer never gets it; handing
    the bytes over instead failed the whole batch in the client on every redelivery."""
    try:
        return outbound(m, receipt_handle, invisible_ms=invisible_ms)
    except BodyDecompressError as e:
        log.warning("%s queue %d offset %d (commitlog offset %d) not delivered to %s: %s", m.topic, m.queue_id,
                    m.queue_offset, m.commit_log_offset, group, e)
        return None


def _rpc_error(e: BrokerError) -> RpcError:
    # the broker's size refusals (a limit lowered between our check and the store, properties the
    # broker's own additions push past 32767 bytes) keep the specific codes the clients map
    if isinstance(e, BodyTooLargeError):
        return RpcError(pb.Code.MESSAGE_BODY_TOO_LARGE, e.message)
    if isinstance(e, PropertiesTooLargeError):
        return RpcError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE, e.message)
    return RpcError(_CODE_BY_RESPONSE.get(e.code, pb.Code.INTERNAL_SERVER_ERROR), e.message)


@dataclass(frozen=True, slots=True)
class CallInfo:
    """Who is calling: the metadata every v2 RPC carries (spec §2)."""

    client_id: str
    language: str
    version: str
    peer_ip: str
    auth: RequestContext


@dataclass(slots=True)
class _Renewal:
    """An auto-renewed (push consumer) message: the handle the client holds and the current one, and
    which client holds it (its renewals end when that client leaves)."""

    client_id: str
    group: str
    topic: str
    handle: str
    visible_at_ms: int
    started_ms: int
    step: int = 0


def _peer_ip(peer: str) -> str:
    # grpc peers look like "ipv4:127.0.0.1:5555" or "ipv6:[::1]:5555"
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return rest.rsplit(":", 1)[0] if kind == "ipv4" else peer


def _endpoints(address: GrpcAddress) -> Any:
    """Another broker's gRPC endpoint as route Endpoints (scheme by the kind of host, spec §11)."""
    return pb.Endpoints(scheme=getattr(pb.AddressScheme, address_scheme(address.host)),
                        addresses=[pb.Address(host=address.host, port=address.port)])


def _millis(d: Any) -> int:
    """Milliseconds of a protobuf Duration or Timestamp (both are seconds + nanos)."""
    return d.seconds * 1000 + d.nanos // 1_000_000


CONSUMER_TYPES = frozenset((pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER))


class TelemetryAbort(Exception):
    """Settings upstream answers by ending the Telemetry stream (onError) with this gRPC status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


def _client_type_name(client_type: int) -> str:
    """The ClientType constant's name as Java prints it (UNRECOGNIZED for a number the enum lacks)."""
    try:
        return pb.ClientType.Name(client_type)
    except ValueError:
        return "UNRECOGNIZED"


def _client_version(header: str) -> int:
    """ClientActivity#parseClientVersion: the x-mq-client-version header as a Version constant's name
    (upper-cased), else the current version; the official clients send "5.1.2", which names none."""
    ordinal = version_ordinal(header.upper()) if header else None
    return CURRENT_VERSION if ordinal is None else ordinal


class MessagingService(MessagingServiceServicer):
    """The servicer grpc.aio calls; one per server, over one Broker."""

    def __init__(self, broker: Broker, executor: ThreadPoolExecutor, clock: Callable[[], int] | None = None,
                 cluster_routes: ClusterRoutes | None = None, channel_expired_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self.broker = broker
        self.executor = executor
        # the name servers' view of each topic (every broker of the cluster); None: this broker alone
        self.cluster_routes = cluster_routes
        self.clock = clock or broker.clock
        self.sessions = SessionRegistry(self.clock, channel_expired_ms)
        # the proxy's MessageClientIDSetter: the id a multi-message request's batch carries, which makes it
        # one inner-batch record on a BatchCQ topic, as upstream's proxy does
        self._batch_uniq_keys = UniqKeyGenerator(broker.config.broker_ip1, self.clock)
        # transaction id -> (producer group, half queue offset, half commit log offset)
        self._transactions: dict[str, tuple[str, int, int]] = {}
        self._renewals: dict[str, _Renewal] = {}  # original handle -> renewal state
        # ProducerManager#getAvailableChannel's positiveAtomicCounter: each check-back goes to the next
        # live producer, so one instance that cannot decide (UNKNOWN, no checker) does not take every
        # check while the instance that owns the transaction is never asked
        self._check_counter = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- plumbing ----------------------------------------------------------------------------------
    @property
    def max_body_size(self) -> int:
        """The broker's live ``maxMessageSize``: read at every use, so that updateBrokerConfig takes
        effect for gRPC (Settings and SendMessage) as it does for remoting."""
        return self.broker.config.store.max_message_size

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by the server once its loop runs: check-backs are pushed from broker threads."""
        self._loop = loop
        self.broker.add_transaction_check_listener(self._check_back)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))
        except BrokerError as e:
            raise _rpc_error(e) from None

    def _info(self, context: grpc.aio.ServicerContext, rpc: str) -> CallInfo:
        md = {k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        client_id = md.get("x-mq-client-id", "")
        if not client_id:
            raise RpcError(pb.Code.CLIENT_ID_REQUIRED, "x-mq-client-id header is required")
        ip = _peer_ip(context.peer() or "")
        # The stateful strategy caches a verdict per channel: the connection (its peer address) and the
        # client id together, never the client id alone, which any caller may claim in its headers.
        code = grpc_request_code(rpc)  # as Apache's whitelists and audit log name the call
        authn = AuthenticationContext.from_grpc(md, code, channel_id=f"{context.peer() or ''}|{client_id}")
        return CallInfo(client_id, md.get("x-mq-language", ""), md.get("x-mq-client-version", ""), ip,
                        RequestContext(source_ip=ip, channel_id=client_id, request_code=code, authentication=authn))

    async def _authorize(self, info: CallInfo, rpc: str, **kw: Any) -> None:
        """Upstream answers every authentication and authorization failure with UNAUTHORIZED.
        In-memory work (user and policy tables), so it runs on the loop without a thread hop."""
        try:
            self.broker.authorize_grpc(info.auth, rpc, **kw)
        except BrokerError as e:
            raise RpcError(pb.Code.UNAUTHORIZED if e.code == ResponseCode.NO_PERMISSION else
                           _rpc_error(e).code, e.message) from None

    def _topic(self, topic: str) -> TopicConfig:
        """The topic's config (an in-memory table read, no thread hop); TOPIC_NOT_FOUND when absent."""
        tc = self.broker.get_topic(topic)
        if tc is None:
            raise RpcError(pb.Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
        return tc

    def _check_topic(self, topic: str) -> None:
        """GrpcValidator#validateTopic: a malformed name or a system topic is ILLEGAL_TOPIC. System topics
        hold the broker's own records (transaction halves, including rolled-back and pending ones;
        timer and revive logs; TBW102, the auto-create template), so no gRPC client may route, send,
        receive or ack on them. Retry and DLQ topics are ordinary topics here, as upstream."""
        bad = validate_topic(topic)
        if bad:
            raise RpcError(pb.Code.ILLEGAL_TOPIC, bad)
        if self.broker.topic_manager.is_system_topic(topic):
            raise RpcError(pb.Code.ILLEGAL_TOPIC, f"cannot access system topic {topic}")

    @staticmethod
    def _check_group(group: str) -> None:
        """GrpcValidator#validateConsumerGroup: a malformed name or a system group (CID_RMQ_SYS_*, e.g.
        the broker's transaction group) is ILLEGAL_CONSUMER_GROUP."""
        bad = validate_group(group)
        if bad:
            raise RpcError(pb.Code.ILLEGAL_CONSUMER_GROUP, bad)
        if is_sys_consumer_group(group):
            raise RpcError(pb.Code.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group {group}")

    def _check_topic_and_group(self, topic: str, group: str) -> None:
        self._check_topic(topic)
        self._check_group(group)

    def _group_config(self, group: str) -> SubscriptionGroupConfig:
        return self.broker.group_manager.find(group)

    # -- QueryRoute / QueryAssignment / Heartbeat --------------------------------------------------
    async def QueryRoute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "QueryRoute")
            topic = request.topic.name
            await self._authorize(info, "QueryRoute", topic=topic)
            self._check_topic(topic)
            tc = self.broker.get_topic(topic)
            brokers = await self._route_brokers(topic, tc, request.endpoints)
            types = await self._accepted_types(topic, tc)
            queues = []
            for b, endpoints in brokers:
                broker = pb.Broker(name=b.broker_name, id=0, endpoints=endpoints)
                for qid, perm in self._queue_layout(b.perm, b.read_queue_nums, b.write_queue_nums):
                    queues.append(pb.MessageQueue(topic=request.topic, id=qid, permission=perm, broker=broker,
                                                  accept_message_types=types))
            return pb.QueryRouteResponse(status=OK, message_queues=queues)
        except RpcError as e:
            return pb.QueryRouteResponse(status=status(e.code, e.message))

    async def _accepted_types(self, topic: str, tc: TopicConfig | None) -> list[int]:
        """The message types the topic's queues accept, from its ``message.type``: this broker's config
        when it has the topic, else the config of a broker of the route (upstream's ClusterMetadataService
        asks one with GET_TOPIC_CONFIG). When no broker of the route answers, every type is listed: the
        broker that stores the message checks its type against its own config at SendMessage, whereas
        upstream's UNSPECIFIED makes the clients refuse every send until their next route refresh."""
        if tc is not None:
            attributes: dict[str, str] | None = tc.attributes or {}
        else:
            attributes = None
            if self.cluster_routes is not None:
                try:
                    attributes = await self.cluster_routes.topic_attributes(topic)
                except Exception:  # a bug in routing must not fail the RPC
                    log.exception("topic config of %s from the cluster failed", topic)
        if attributes is None:
            return _MESSAGE_TYPES["MIXED"]
        return _MESSAGE_TYPES.get(attributes.get("message.type", "NORMAL").upper(), [pb.MessageType.NORMAL])

    async def _route_brokers(self, topic: str, tc: TopicConfig | None,
                             dialled: Any) -> list[tuple[BrokerQueues, Any]]:
        """Each broker of the topic's route with the Endpoints its clients use. From the name server
        when there is one (so every broker's queues are listed, a perm changed there, e.g. by
        wipeWritePerm, is obeyed, and a topic that lives only on other brokers of the cluster is found:
        a client reaches every broker of the topic whichever endpoint it dials); this broker alone,
        from its TopicConfig ``tc``, when the name server cannot be reached or has no route of the topic.
        This broker answers with the endpoints the client dialled (``dialled``); a route the name server
        gives without it (a topic created here moments ago, not yet registered) gets it added, since the
        client reaches it and it has the topic. TOPIC_NOT_FOUND when neither knows the topic.

        A slave is never listed: routes are of masters only (a slave takes no writes, so a client sent to
        it failed every send with "message store is in slave mode"), as Apache's proxy routes to brokerId
        0. A client that dials a slave is routed to its master; a group whose master is gone has no
        queue in the route (our name server keeps no queue data of a group without master: a topic on
        no other group is TOPIC_NOT_FOUND; an Apache one may keep a prime slave's: no queue is listed,
        QueryAssignment finds no readable queue)."""
        local = None if tc is None or self.broker.is_slave else \
            BrokerQueues(self.broker.config.broker_name, tc.perm, tc.read_queue_nums, tc.write_queue_nums, None)
        route = None
        if self.cluster_routes is not None:
            try:
                route = await self.cluster_routes.topic_route(topic)
            except Exception:  # a bug in routing must not fail the RPC: the local answer still works
                log.exception("cluster route of %s failed; answering with this broker's queues", topic)
        if route is None:
            if local is None:
                raise RpcError(pb.Code.TOPIC_NOT_FOUND, f"topic {topic} not found" + (
                    f" at the name server (this broker is a slave of {self.broker.config.broker_name}: it "
                    "routes to masters only)" if self.broker.is_slave else ""))
            brokers = [local]
        elif local is None or route.has_local:
            brokers = list(route.brokers)
        else:
            brokers = sorted([*route.brokers, local], key=lambda b: b.broker_name)
        if not brokers and route is not None and route.masterless:
            return []  # only master-less groups hold it: no queue to write to or read from (see above)
        if not brokers:
            raise RpcError(pb.Code.INTERNAL_SERVER_ERROR, f"topic {topic} is routed only to brokers whose gRPC "
                                                          "endpoint is unknown or off")
        return [(b, dialled if b.endpoint is None else _endpoints(b.endpoint)) for b in brokers]

    @staticmethod
    def _queue_layout(perm: int, read_queue_nums: int, write_queue_nums: int) -> list[tuple[int, int]]:
        """Upstream's order: read-only queues, write-only queues, then read-write (ids from 0)."""
        if not perm & 6:
            return [(i, pb.Permission.NONE) for i in range(max(read_queue_nums, write_queue_nums))]
        readable, writable = bool(perm & 4), bool(perm & 2)
        r, w = (read_queue_nums if readable else 0), (write_queue_nums if writable else 0)
        rw = min(r, w)
        layout = [pb.Permission.READ] * (r - rw) + [pb.Permission.WRITE] * (w - rw) + [pb.Permission.READ_WRITE] * rw
        return list(enumerate(layout))

    async def QueryAssignment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "QueryAssignment")
            topic, group = request.topic.name, request.group.name
            await self._authorize(info, "QueryAssignment", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
            tc = self.broker.get_topic(topic)  # None: a topic of other brokers only, routed by the name server
            readable = [(b, endpoints) for b, endpoints in await self._route_brokers(topic, tc, request.endpoints)
                        if b.perm & 4 and b.read_queue_nums > 0]
            if not readable:
                raise RpcError(pb.Code.FORBIDDEN, "no readable queue")
            cfg = await self._call(self._group_config, group)
            assignments = []
            for b, endpoints in readable:  # per broker: each read queue (orderly groups), else id -1 = all
                broker = pb.Broker(name=b.broker_name, id=0, endpoints=endpoints)
                perm = pb.Permission.READ_WRITE if b.perm & 2 else pb.Permission.READ
                ids = range(b.read_queue_nums) if cfg.consume_message_orderly else [-1]
                assignments += [pb.Assignment(message_queue=pb.MessageQueue(topic=request.topic, id=i, permission=perm,
                                                                            broker=broker)) for i in ids]
            return pb.QueryAssignmentResponse(status=OK, assignments=assignments)
        except RpcError as e:
            return pb.QueryAssignmentResponse(status=status(e.code, e.message))

    def _limits(self) -> GrpcLimits:
        """The time limits as the broker's configuration has them now (a receive, a Settings reply)."""
        return GrpcLimits.from_config(self.broker.config)

    async def Heartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        """ClientActivity#heartbeat: the client is what its Settings said (authorization alone goes by the
        request's type, as upstream's context builder); a client that sent none is not recognized, so a
        bare heartbeat registers no consumer without subscriptions and creates no group."""
        try:
            info = self._info(context, "Heartbeat")
            consumer = request.client_type in CONSUMER_TYPES
            group = request.group.name if request.HasField("group") else None
            await self._authorize(info, "Heartbeat", group=group, is_consumer=consumer)
            self._alive(info)
            session = self._session_with_settings(info)
            if session.client_type in CONSUMER_TYPES:
                self._check_group(group or "")
                session.group = group or ""
            elif session.client_type != pb.ClientType.PRODUCER:
                raise RpcError(pb.Code.UNRECOGNIZED_CLIENT_TYPE, _client_type_name(session.client_type))
            self.sessions.touch(info.client_id, info.language, info.version, info.peer_ip)
            await self._register(session)
            return pb.HeartbeatResponse(status=OK)
        except RpcError as e:
            return pb.HeartbeatResponse(status=status(e.code, e.message))

    def _alive(self, info: CallInfo) -> ClientSession:
        """A heartbeat or a receive shows the client is alive, with or without Settings: after a broker
        restart the official Python client re-sends its Settings only every 300 s (its telemetry stream is
        rebuilt then), yet it heartbeats every 10 s and keeps receiving. Its session must live on, or
        ``renew_due`` takes it for gone and gives its in-flight messages back to be delivered twice; it
        ends as any other, by NotifyClientTermination or by expiring without heartbeats."""
        return self.sessions.touch(info.client_id, info.language, info.version, info.peer_ip)

    def _session_with_settings(self, info: CallInfo) -> ClientSession:
        """The caller's session once its Settings were accepted (GrpcClientSettingsManager#getClientSettings)."""
        session = self.sessions.get(info.client_id)
        if session is None or not session.has_settings:
            raise RpcError(pb.Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        return session

    # -- Telemetry ---------------------------------------------------------------------------------
    async def Telemetry(self, request_iterator: AsyncIterator[Any],  # noqa: N802
                        context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            info = self._info(context, "Telemetry")
            # Authenticated before the stream joins the client's session: a stream registered first
            # received commands meant for the client id it claimed (transaction check-backs with the
            # half message's body) without any valid credentials.
            await self._authorize(info, "Telemetry")
        except RpcError as e:
            yield pb.TelemetryCommand(status=status(e.code, e.message))
            return
        channel = TelemetryChannel(asyncio.get_running_loop())
        session = self.sessions.touch(info.client_id, info.language, info.version, info.peer_ip)
        session.telemetry.append(channel)
        failed: list[TelemetryAbort] = []

        async def read() -> None:
            try:
                async for command in request_iterator:
                    if command.HasField("settings"):
                        channel.offer(await self._settings_reply(info, command.settings))
            except TelemetryAbort as e:
                if e.code == grpc.StatusCode.INTERNAL:  # as ClientActivity#processTelemetryException logs it
                    log.warning("client %s: %s", info.client_id, e.details)
                failed.append(e)
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
            finally:
                channel.close()

        reader = asyncio.ensure_future(read())
        try:
            while True:
                command = await channel.queue.get()
                if command is None:
                    break
                yield command
            if failed:
                await context.abort(failed[0].code, failed[0].details)
        finally:
            reader.cancel()
            channel.close()
            if channel in session.telemetry:
                session.telemetry.remove(channel)

    async def _settings_reply(self, info: CallInfo, settings: Any) -> Any:
        """ClientActivity#processAndWriteClientSettings: accepted Settings are kept as the client's identity
        (Heartbeat and NotifyClientTermination go by them); TelemetryAbort where upstream ends the stream."""
        session = self.sessions.touch(info.client_id, info.language, info.version, info.peer_ip)
        reply = pb.Settings()
        reply.CopyFrom(settings)
        try:
            if settings.HasField("publishing"):
                topics = [r.name for r in settings.publishing.topics]
                await self._authorize(info, "Telemetry", publishing_topics=topics)
                for topic in topics:
                    self._check_topic(topic)
                session.client_type = settings.client_type
                session.publishing_topics = set(topics)
                reply.publishing.max_body_size = self.max_body_size
                reply.publishing.validate_message_type = True
                reply.backoff_policy.CopyFrom(pb.RetryPolicy(
                    max_attempts=3, exponential_backoff=pb.ExponentialBackoff(
                        initial=Duration(nanos=10_000_000), max=Duration(seconds=1), multiplier=2.0)))
            elif settings.HasField("subscription"):
                sub = settings.subscription
                group = sub.group.name
                topics = [e.topic.name for e in sub.subscriptions]
                await self._authorize(info, "Telemetry", group=group, subscription_topics=topics)
                self._check_group(group)
                if settings.client_type not in CONSUMER_TYPES:  # ClientActivity#buildConsumeType
                    raise TelemetryAbort(grpc.StatusCode.INTERNAL, "process client telemetryCommand failed. "
                                         f"Client type is not consumer, type: {_client_type_name(settings.client_type)}")
                cfg = await self._call(self._group_config, group)
                session.client_type = settings.client_type
                session.group = group
                session.subscriptions = {e.topic.name: (e.expression.type, e.expression.expression)
                                         for e in sub.subscriptions}
                reply.subscription.receive_batch_size = 32
                if not sub.HasField("long_polling_timeout"):
                    reply.subscription.long_polling_timeout.FromMilliseconds(self._limits().max_polling_ms)
                reply.subscription.fifo = bool(cfg.consume_message_orderly)
                reply.backoff_policy.CopyFrom(self._retry_policy(cfg))
            else:
                raise TelemetryAbort(grpc.StatusCode.INVALID_ARGUMENT,
                                     "there is no publishing or subscription data in settings")
            await self._register(session)
            session.has_settings = True
        except RpcError as e:
            return pb.TelemetryCommand(status=status(e.code, e.message))
        reply.metric.CopyFrom(pb.Metric(on=False))
        return pb.TelemetryCommand(status=OK, settings=reply)

    async def _register(self, session: ClientSession) -> None:
        """Report the client to the Broker's client registry, as a remoting heartbeat would: producers
        under their topics (the proxy's producer group for a topic is the topic), consumers as POP
        consumers of their group, so mqadmin's connection commands and the dashboard list them."""
        consumers: list[ConsumerData] = []
        if session.group and session.client_type in CONSUMER_TYPES:
            subs = tuple(SubscriptionData(t, expr, "SQL92") if kind == pb.FilterType.SQL else
                         SubscriptionData(t, expr or "*", "TAG")
                         for t, (kind, expr) in sorted(session.subscriptions.items()))
            consumers.append(ConsumerData(session.group, CONSUME_TYPE_POP, "CLUSTERING",
                                          "CONSUME_FROM_LAST_OFFSET", subs))
        producers = sorted(session.publishing_topics) if session.client_type == pb.ClientType.PRODUCER else []
        if not consumers and not producers:
            return
        await self._call(self.broker.heartbeat, GrpcChannel(session.client_id), session.client_id,
                         language=session.language or "PYTHON", version=_client_version(session.version),
                         remote_addr=f"{session.address}:0",
                         producer_groups=producers, consumers=consumers)

    @staticmethod
    def _retry_policy(cfg: SubscriptionGroupConfig) -> Any:
        """A consumer group's retry policy as the proxy sends it (GrpcClientSettingsManager):
        EXPONENTIAL as initial/max/multiplier, CUSTOMIZED (the default) as its steps, in milliseconds.
        The group's policy was checked when it was stored; a step or value that is not a positive number
        falls back to RocketMQ's default for it."""
        policy = cfg.group_retry_policy or {}
        attempts = int(cfg.retry_max_times) + 1
        if str(policy.get("type") or "").upper() == "EXPONENTIAL":
            exp = policy.get("exponentialRetryPolicy") or {}

            def positive(key: str, default: float) -> float:
                v = exp.get(key)
                return v if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else default

            backoff = pb.ExponentialBackoff(multiplier=float(positive("multiplier", DEFAULT_EXPONENTIAL[2])))
            backoff.initial.FromMilliseconds(int(positive("initial", DEFAULT_EXPONENTIAL[0])))
            backoff.max.FromMilliseconds(int(positive("max", DEFAULT_EXPONENTIAL[1])))
            return pb.RetryPolicy(max_attempts=attempts, exponential_backoff=backoff)
        nxt = (policy.get("customizedRetryPolicy") or {}).get("next")
        steps = nxt if isinstance(nxt, list) and nxt and all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in nxt) else [s * 1000 for s in DEFAULT_BACKOFF_S]
        durations = []
        for ms in steps:
            d = Duration()
            d.FromMilliseconds(ms)
            durations.append(d)
        return pb.RetryPolicy(max_attempts=attempts, customized_backoff=pb.CustomizedBackoff(next=durations))

    def _check_back(self, half: MessageExt, producer_group: str) -> bool:
        """Ask a live gRPC producer of the half's producer group for its decision (broker thread),
        rotating over them from one check to the next as upstream does.

        A gRPC producer's group is each topic it publishes (upstream's ClientActivity registers it under
        the topic, and SendMessage stamps the topic as the producer group of its halves), so only a half
        whose producer group is such a topic is theirs. A half of a remoting group (PG1) on the same topic
        is not: an unrelated gRPC app was sent its body and its ROLLBACK destroyed it. False then, so the
        remoting listener, or "no live producer" until PG1 is back, decides, as upstream's
        ProducerManager#getAvailableChannel(group) does."""
        producers = self.sessions.producers_of(producer_group)
        if not producers or self._loop is None:
            return False
        tx_id = half.get_property(P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or half.msg_id
        self._transactions[tx_id] = (producer_group, half.queue_offset, half.commit_log_offset)
        try:
            wire = outbound(half)
        except BodyDecompressError as e:
            # the checker decides on the id and properties: the stored bytes, never labelled GZIP
            log.warning("transaction check of %s offset %d: %s; its body goes out as stored",
                        half.topic, half.commit_log_offset, e)
            wire = outbound(half, body=bytes(half.body))
        wire.topic.name = half.get_property(P.PROPERTY_REAL_TOPIC) or producer_group
        command = pb.TelemetryCommand(recover_orphaned_transaction_command=pb.RecoverOrphanedTransactionCommand(
            message=wire, transaction_id=tx_id))
        producer = producers[next(self._check_counter) % len(producers)]
        live = [ch for ch in producer.telemetry if not ch.closed]
        if not live:  # its stream closed since producers_of looked
            return False
        live[0].offer_threadsafe(command)
        return True

    # -- SendMessage / EndTransaction --------------------------------------------------------------
    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "SendMessage")
            if not request.messages:
                raise RpcError(pb.Code.BAD_REQUEST, "no message to send")
            # one topic a request, checked before anything is stored (as RocketMQ's proxy): a refusal of
            # a later message must not leave the earlier ones stored behind a failed answer
            topic = request.messages[0].topic.name
            if any(m.topic.name != topic for m in request.messages):
                raise RpcError(pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
            await self._authorize(info, "SendMessage", topic=topic)
            # every message is checked before any is stored (SendMessageActivity#buildMessage): one bad
            # message refuses the request as a whole, and the valid ones are not stored behind it
            prepared = [self._prepare_one(info, message, i, len(request.messages))
                        for i, message in enumerate(request.messages)]
            if len(prepared) == 1:
                entries = [await self._store_one(topic, prepared[0])]
            else:
                entries = await self._store_batch(topic, prepared)
        except RpcError as e:
            return pb.SendMessageResponse(status=status(e.code, e.message))
        codes = {e.status.code for e in entries}
        top = entries[0].status if len(codes) == 1 else status(pb.Code.MULTIPLE_RESULTS, "multiple results")
        return pb.SendMessageResponse(status=top, entries=entries)

    def _prepare_one(self, info: CallInfo, message: Any, index: int, count: int) -> InboundMessage:
        """One message of an authorized request (its topic is the request's), checked and converted;
        RpcError names the message when the request has several."""
        topic = message.topic.name
        try:
            self._check_topic(topic)
            m = inbound(message, info.peer_ip, self.max_body_size, now_ms=self.clock(),
                        max_delay_ms=self._limits().max_delay_ms,
                        timer_max_delay_ms=self.broker.config.store.timer_max_delay_sec * 1000)
            self._check_message_type(self._topic(topic), m.properties)
        except (RpcError, WireMessageError) as e:
            where = f"message {index + 1} of {count}: " if count > 1 else ""
            raise RpcError(e.code, where + e.message) from None
        return m

    async def _store_one(self, topic: str, m: InboundMessage) -> Any:
        """Store one checked message; the broker's refusal is that message's entry."""
        try:
            result = await self._call(self.broker.send_message, topic, m.body, m.properties,
                                      message_group=m.message_group, born_host=m.born_host,
                                      born_timestamp=m.born_timestamp, sys_flag=m.sys_flag)
        except RpcError as e:
            return pb.SendResultEntry(status=status(e.code, e.message))
        tx_id = ""
        if m.message_type == pb.MessageType.TRANSACTION:
            tx_id = m.message_id
            self._transactions[tx_id] = (topic, result.queue_offset, result.commit_log_offset)
        return pb.SendResultEntry(status=OK, message_id=result.uniq_key, transaction_id=tx_id,
                                  offset=result.queue_offset)

    async def _store_batch(self, topic: str, messages: list[InboundMessage]) -> list[Any]:
        """Store the checked messages of one request as one batch put (Broker.send_batch, the remoting
        SEND_BATCH_MESSAGE path), as RocketMQ's proxy sends them as one MessageBatch: all or nothing,
        in one queue, contiguous records with consecutive queue offsets. Stored one at a time, a put
        refused after the first left the earlier ones stored behind an error the client retries.

        Each message gets its own entry (its message id, its queue offset), where upstream's proxy
        answers one entry with comma-joined ids: clients map entries to messages. The queue is the
        message group's when every message has the same one (a FIFO send keeps its group's queue;
        upstream ignores the group of a multi-message request), else round robin as upstream. The
        batch's rules are the broker's: no delay or transaction messages, one WAIT flag, the whole
        batch within maxMessageSize; a refusal is every message's entry."""
        first = messages[0]
        if any(m.sys_flag != first.sys_flag for m in messages):  # the batch's records share one SYSFLAG
            raise RpcError(pb.Code.BAD_REQUEST, "the messages of one request are stored as one batch and "
                                                "must share one body encoding")
        groups = {m.message_group for m in messages}
        items = [BatchItem(m.body, dict(m.properties)) for m in messages]
        try:
            result = await self._call(self.broker.send_batch, topic, items,
                                      {P.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: self._batch_uniq_keys.next_id()},
                                      message_group=groups.pop() if len(groups) == 1 else None,
                                      born_host=first.born_host, born_timestamp=first.born_timestamp,
                                      sys_flag=first.sys_flag)
        except RpcError as e:
            refused = status(e.code, f"the {len(messages)} messages of this request are stored as one batch "
                                     f"and none was stored: {e.message}")
            return [pb.SendResultEntry(status=refused) for _ in messages]
        return [pb.SendResultEntry(status=OK, message_id=key, offset=result.queue_offset + i)
                for i, key in enumerate(result.uniq_keys)]

    @staticmethod
    def _check_message_type(tc: TopicConfig, properties: dict[str, str]) -> None:
        """The topic's ``message.type`` against the type the stored properties make (upstream's
        TopicMessageType.parseFromMessageProperty), never the label the client declared: the label
        only decides TRAN_MSG, while a delivery time, a message group or a missing one is what the
        broker acts on. A NORMAL-labelled message with a delivery time would be delivered late on a
        NORMAL topic, a FIFO-labelled one without a group would lose its order. Retry and DLQ topics
        are not checked, as upstream."""
        if is_retry_topic(tc.topic_name) or is_dlq_topic(tc.topic_name):
            return
        topic_type = (tc.attributes or {}).get("message.type", "NORMAL").upper()
        derived = message_type_of(properties)
        if derived not in _MESSAGE_TYPES.get(topic_type, [pb.MessageType.NORMAL]):
            raise RpcError(pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                           f"the message is {pb.MessageType.Name(derived)} by its properties, but topic "
                           f"{tc.topic_name} takes {topic_type} messages")

    async def EndTransaction(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "EndTransaction")
            topic = request.topic.name
            await self._authorize(info, "EndTransaction", topic=topic)
            self._check_topic(topic)
            tx_id = request.transaction_id.strip()
            if not tx_id:
                raise RpcError(pb.Code.INVALID_TRANSACTION_ID, "transaction id is blank")
            known = self._transactions.get(tx_id)
            if known is None:
                raise RpcError(pb.Code.INVALID_TRANSACTION_ID, f"transaction {tx_id} is not known to this broker")
            resolution = {pb.TransactionResolution.COMMIT: COMMIT,
                          pb.TransactionResolution.ROLLBACK: ROLLBACK}.get(request.resolution, UNKNOWN)
            group, queue_offset, commit_log_offset = known
            from_check = request.source == pb.TransactionSource.SOURCE_SERVER_CHECK
            await self._call(self.broker.end_transaction, group, queue_offset, commit_log_offset, resolution,
                             msg_id=request.message_id or None, transaction_id=tx_id,
                             from_transaction_check=from_check, topic=topic)
            if resolution != UNKNOWN:
                self._transactions.pop(tx_id, None)
            return pb.EndTransactionResponse(status=OK)
        except RpcError as e:
            return pb.EndTransactionResponse(status=status(e.code, e.message))

    # -- ReceiveMessage ----------------------------------------------------------------------------
    def _polling_ms(self, request: Any, context: grpc.aio.ServicerContext, limits: GrpcLimits) -> int:
        remaining = context.time_remaining()
        remaining_ms = int(remaining * 1000) if remaining is not None else limits.max_polling_ms + 3_000
        if request.HasField("long_polling_timeout"):
            polling = _millis(request.long_polling_timeout)
        else:
            polling = remaining_ms - 1_500  # half the client's 3 s request timeout
        polling = min(max(polling, limits.min_polling_ms), limits.max_polling_ms)
        if polling > remaining_ms - POLLING_RESERVE_MS:
            polling = remaining_ms - POLLING_RESERVE_MS
            if polling < limits.min_polling_ms - POLLING_RESERVE_MS:
                raise RpcError(pb.Code.ILLEGAL_POLLING_TIME, f"the polling time {polling} ms is too short")
        return max(polling, 0)

    async def ReceiveMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        messages: list[Any] = []
        try:
            info = self._info(context, "ReceiveMessage")
            group, topic = request.group.name, request.message_queue.topic.name
            await self._authorize(info, "ReceiveMessage", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
            limits = self._limits()
            if request.auto_renew:
                # Served without Settings too (after a restart the client has sent none yet; upstream's proxy
                # fails such a receive until they come, up to 300 s of no consumption): the renewals below
                # are kept for as long as the client heartbeats or receives.
                self._alive(info)
                invisible = DEFAULT_INVISIBLE_MS
            else:
                # an absent duration reads as 0 (proto3), and 0 is below the minimum, as upstream's
                # validateInvisibleTime answers: the official clients omit the field when asked for 0
                invisible = _millis(request.invisible_duration)
                if invisible < limits.min_invisible_ms or limits.invisible_too_long(invisible):
                    given = f"{invisible} ms" if request.HasField("invisible_duration") else "absent (0 ms)"
                    raise RpcError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                                   f"invisible duration {given} is outside {limits.invisible_range()}")
            polling = self._polling_ms(request, context, limits)
            expression = request.filter_expression
            kind = "SQL92" if expression.type == pb.FilterType.SQL else "TAG"
            # an empty SQL92 expression is ILLEGAL_FILTER_EXPRESSION (the broker's parse error), not "*"
            text = expression.expression if kind == "SQL92" else expression.expression or "*"
            batch = min(max(request.batch_size or 32, 1), 32)
            try:
                result = await self.broker.pop_message_async(
                    group, topic, None, batch, invisible, kind, text,
                    attempt_id=request.attempt_id if request.HasField("attempt_id") else None, poll_time_ms=polling)
            except BrokerError as e:
                raise _rpc_error(e) from None
            if result.status is PopStatus.POLLING_FULL:
                raise RpcError(pb.Code.TOO_MANY_REQUESTS, "polling full")
            now = self.clock()
            for m in result.messages:
                handle = m.get_property(P.PROPERTY_POP_CK) or ""
                wire = _delivered(m, group, handle, invisible_ms=invisible)
                if wire is None:  # stays invisible and is revived, as upstream's undecoded message
                    continue
                if request.auto_renew:
                    self._renewals[handle] = _Renewal(info.client_id, group, topic, handle, now + invisible, now)
                messages.append(wire)
            first = OK if messages else status(pb.Code.MESSAGE_NOT_FOUND, "no new message")
        except RpcError as e:
            first = status(e.code, e.message)
        yield pb.ReceiveMessageResponse(status=first)
        for wire in messages:
            yield pb.ReceiveMessageResponse(message=wire)
        ts = pb.ReceiveMessageResponse()
        ts.delivery_timestamp.FromMilliseconds(self.clock())
        yield ts

    # -- AckMessage / ChangeInvisibleDuration / DLQ ------------------------------------------------
    def _current_handle(self, handle: str) -> str:
        renewal = self._renewals.get(handle)
        return renewal.handle if renewal is not None else handle

    def _live_handle(self, handle_text: str) -> str:
        """Upstream's proxy refuses an expired handle before any broker sees it (validateReceiptHandle):
        whether the message is in flight, revived or not yet dispatched to its queue, the client must
        receive it again, and INVALID_RECEIPT_HANDLE says so whatever state the broker is in."""
        try:
            handle = ReceiptHandle.decode(handle_text)
        except InvalidReceiptHandleError as e:
            raise RpcError(pb.Code.INVALID_RECEIPT_HANDLE, e.message) from None
        if handle.is_expired(self.clock()):
            raise RpcError(pb.Code.INVALID_RECEIPT_HANDLE,
                           f"receipt handle is expired: the message became visible again at "
                           f"{handle.next_visible_time} ms")
        return handle_text

    async def AckMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "AckMessage")
            group, topic = request.group.name, request.topic.name
            await self._authorize(info, "AckMessage", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
        except RpcError as e:
            return pb.AckMessageResponse(status=status(e.code, e.message))
        entries = []
        for entry in request.entries:
            try:
                result = await self._call(self.broker.ack_message, group, topic,
                                          self._live_handle(self._current_handle(entry.receipt_handle)))
                self._renewals.pop(entry.receipt_handle, None)
                code = status(pb.Code.OK) if result.ok else _ack_failure(result)
            except RpcError as e:
                code = status(pb.Code.INVALID_RECEIPT_HANDLE if e.code == pb.Code.BAD_REQUEST else e.code, e.message)
            entries.append(pb.AckMessageResultEntry(message_id=entry.message_id,
                                                    receipt_handle=entry.receipt_handle, status=code))
        codes = {e.status.code for e in entries}
        top = entries[0].status if len(codes) == 1 else status(pb.Code.MULTIPLE_RESULTS, "multiple results")
        return pb.AckMessageResponse(status=top if entries else OK, entries=entries)

    async def ChangeInvisibleDuration(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "ChangeInvisibleDuration")
            group, topic = request.group.name, request.topic.name
            await self._authorize(info, "ChangeInvisibleDuration", group=group)
            self._check_topic_and_group(topic, group)
            invisible = _millis(request.invisible_duration)
            if invisible < 0:
                raise RpcError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                               f"invisible duration {invisible} ms is negative; it must be 0 or more")
            most = self._limits().max_invisible_ms
            if 0 < most < invisible:
                raise RpcError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                               f"invisible duration {invisible} ms exceeds the maximum of {most} ms")
            handle = self._live_handle(self._current_handle(request.receipt_handle))
            self._renewals.pop(request.receipt_handle, None)  # a nack ends auto-renewal
            try:
                changed = await self._call(self.broker.change_invisible_time, group, topic, handle, invisible)
            except RpcError as e:
                if e.code == pb.Code.BAD_REQUEST:
                    raise RpcError(pb.Code.INVALID_RECEIPT_HANDLE, e.message) from None
                raise
            return pb.ChangeInvisibleDurationResponse(status=OK, receipt_handle=changed.receipt_handle)
        except RpcError as e:
            return pb.ChangeInvisibleDurationResponse(status=status(e.code, e.message))

    async def ForwardMessageToDeadLetterQueue(self, request: Any,  # noqa: N802
                                              context: grpc.aio.ServicerContext) -> Any:
        try:
            info = self._info(context, "ForwardMessageToDeadLetterQueue")
            group, topic = request.group.name, request.topic.name
            await self._authorize(info, "ForwardMessageToDeadLetterQueue", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
            handle_text = self._current_handle(request.receipt_handle)
            try:
                handle = ReceiptHandle.decode(handle_text)
            except InvalidReceiptHandleError as e:
                raise RpcError(pb.Code.INVALID_RECEIPT_HANDLE, e.message) from None
            if handle.commit_log_offset < 0:
                raise RpcError(pb.Code.INVALID_RECEIPT_HANDLE, "the receipt handle has no commit log offset")
            if handle.broker_name != self.broker.config.broker_name:
                # upstream routes the handle to the broker it names ("cannot find broker"); without this
                # a handle naming another broker would dead-letter our message at that offset
                raise RpcError(pb.Code.INVALID_RECEIPT_HANDLE,
                               f"the receipt handle belongs to broker {handle.broker_name}, not to this broker")
            # the message id and queue offset name the item when the record is an inner batch (BatchCQ)
            await self._call(self.broker.consumer_send_back, group, handle.commit_log_offset, -1, topic,
                             origin_msg_id=request.message_id, queue_offset=handle.offset)
            result = await self._call(self.broker.ack_message, group, topic, handle_text)
            self._renewals.pop(request.receipt_handle, None)
            if not result.ok and result.status is not AckStatus.ALREADY_ACKED:
                log.info("forwarded to %s but the ack of %s failed: %s", dlq_topic(group), handle_text,
                         result.status.value)
            return pb.ForwardMessageToDeadLetterQueueResponse(status=OK)
        except RpcError as e:
            return pb.ForwardMessageToDeadLetterQueueResponse(status=status(e.code, e.message))

    # -- PullMessage / offsets (in the proto; the official clients do not call them yet) -----------
    async def PullMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        """A 4.x-style pull over gRPC: status, the messages from ``offset``, then ``next_offset``."""
        items: list[Any] = []
        next_offset = request.offset
        try:
            info = self._info(context, "ReceiveMessage")
            group, topic, qid = request.group.name, request.message_queue.topic.name, request.message_queue.id
            await self._authorize(info, "ReceiveMessage", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
            expression = request.filter_expression
            kind = "SQL92" if expression.type == pb.FilterType.SQL else "TAG"
            text = expression.expression if kind == "SQL92" else expression.expression or "*"
            polling = _millis(request.long_polling_timeout) if request.HasField("long_polling_timeout") else 0
            try:
                result = await self.broker.pull_message_async(
                    group, topic, qid, request.offset, min(max(request.batch_size or 32, 1), 32), kind,
                    text, suspend_timeout_ms=min(polling, self._limits().max_polling_ms))
            except BrokerError as e:
                raise _rpc_error(e) from None
            next_offset = result.next_begin_offset
            items = [pb.PullMessageResponse(message=wire) for m in result.messages
                     if (wire := _delivered(m, group)) is not None]
            if items:
                first = OK
            elif result.detail == OFFSET_RESET:  # the group's offset was reset: pull on from next_offset
                first = status(pb.Code.ILLEGAL_OFFSET, f"the offset of group {group} on this queue was reset to "
                                                       f"{next_offset}; pull from next_offset")
            elif result.status.value == "OFFSET_ILLEGAL":
                first = status(pb.Code.ILLEGAL_OFFSET, f"offset {request.offset} is outside "
                                                       f"[{result.min_offset}, {result.max_offset}]")
            else:
                first = status(pb.Code.MESSAGE_NOT_FOUND, "no new message")
        except RpcError as e:
            first = status(e.code, e.message)
        yield pb.PullMessageResponse(status=first)
        for item in items:
            yield item
        yield pb.PullMessageResponse(next_offset=next_offset)

    async def UpdateOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "AckMessage")
            group, topic, qid = request.group.name, request.message_queue.topic.name, request.message_queue.id
            await self._authorize(info, "AckMessage", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
            await self._call(self.broker.commit_offset, group, topic, qid, request.offset)
            return pb.UpdateOffsetResponse(status=OK)
        except RpcError as e:
            return pb.UpdateOffsetResponse(status=status(e.code, e.message))

    async def GetOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "AckMessage")
            group, topic, qid = request.group.name, request.message_queue.topic.name, request.message_queue.id
            await self._authorize(info, "AckMessage", topic=topic, group=group)
            self._check_topic_and_group(topic, group)
            offset = await self._call(self.broker.query_offset, group, topic, qid)
            if offset < 0:
                raise RpcError(pb.Code.OFFSET_NOT_FOUND, f"group {group} has no offset on {topic}/{qid}")
            return pb.GetOffsetResponse(status=OK, offset=offset)
        except RpcError as e:
            return pb.GetOffsetResponse(status=status(e.code, e.message))

    async def QueryOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        try:
            info = self._info(context, "QueryRoute")
            topic, qid = request.message_queue.topic.name, request.message_queue.id
            await self._authorize(info, "QueryRoute", topic=topic)
            self._check_topic(topic)
            self._topic(topic)
            policy = request.query_offset_policy
            if policy == pb.QueryOffsetPolicy.BEGINNING:
                offset = self.broker.get_min_offset(topic, qid)
            elif policy == pb.QueryOffsetPolicy.END:
                offset = self.broker.get_max_offset(topic, qid)
            elif policy != pb.QueryOffsetPolicy.TIMESTAMP:  # a number this protocol version has no name for
                raise RpcError(pb.Code.BAD_REQUEST, f"unknown query offset policy {policy}")
            else:
                if not request.HasField("timestamp"):
                    raise RpcError(pb.Code.BAD_REQUEST, "query by TIMESTAMP needs a timestamp")
                offset = await self._call(self.broker.search_offset_by_timestamp, topic, qid,
                                          _millis(request.timestamp))
            return pb.QueryOffsetResponse(status=OK, offset=offset)
        except RpcError as e:
            return pb.QueryOffsetResponse(status=status(e.code, e.message))

    # -- NotifyClientTermination -------------------------------------------------------------------
    async def NotifyClientTermination(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        """ClientActivity#notifyClientTermination: by the client's Settings, which it removes."""
        try:
            info = self._info(context, "NotifyClientTermination")
            group = request.group.name if request.HasField("group") else None
            await self._authorize(info, "NotifyClientTermination", group=group)
            known = self.sessions.get(info.client_id)
            if known is not None and not known.has_settings:
                # a client that left before re-sending its Settings (a broker restart) gives back what it
                # held now, not at its expiry; the answer stays upstream's UNRECOGNIZED_CLIENT_TYPE
                self.sessions.remove(info.client_id)
            session = self._session_with_settings(info)
            if session.client_type in CONSUMER_TYPES:
                self._check_group(group or "")
            self.sessions.remove(info.client_id)
            self.broker.client_registry.channel_closed(GrpcChannel(info.client_id))
            if session.client_type not in CONSUMER_TYPES and session.client_type != pb.ClientType.PRODUCER:
                raise RpcError(pb.Code.UNRECOGNIZED_CLIENT_TYPE, _client_type_name(session.client_type))
            return pb.NotifyClientTerminationResponse(status=OK)
        except RpcError as e:
            return pb.NotifyClientTerminationResponse(status=status(e.code, e.message))

    # -- RPCs of newer protos that this broker does not serve -------------------------------------
    async def RecallMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        """Answered as not implemented, in the response's status: the generated base method raises
        NotImplementedError, which grpc logged as an ERROR with a traceback on every call."""
        return pb.RecallMessageResponse(status=status(pb.Code.NOT_IMPLEMENTED, "RecallMessage is not supported"))

    async def SyncLiteSubscription(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        """Lite topics are not served; answered as RecallMessage is, without an ERROR in the log."""
        return pb.SyncLiteSubscriptionResponse(
            status=status(pb.Code.NOT_IMPLEMENTED, "SyncLiteSubscription is not supported"))

    # -- housekeeping ------------------------------------------------------------------------------
    async def renew_due(self) -> int:
        """Extend auto-renewed messages about to become visible again (proxy's renew steps, ≤ 3 h).
        First, as upstream's scheduleRenewTask (clientIsOffline -> clearGroup), give back the messages of
        clients that are gone (NotifyClientTermination, or expired without heartbeats, e.g. killed):
        renewing them would hide them from the rest of the group for up to 3 h."""
        for client_id in {r.client_id for r in self._renewals.values()}:
            if self.sessions.get(client_id) is None:
                await self._release_client(client_id)
        now = self.clock()
        renewed = 0
        for original, r in list(self._renewals.items()):
            if r.visible_at_ms - now > RENEW_AHEAD_MS:
                continue
            if now - r.started_ms >= RENEW_MAX_TOTAL_MS:
                self._renewals.pop(original, None)
                continue
            step = RENEW_STEPS_MS[min(r.step, len(RENEW_STEPS_MS) - 1)]
            try:
                changed = await self._call(self.broker.change_invisible_time, r.group, r.topic, r.handle, step)
            except RpcError as e:
                log.info("renewing %s failed: %s", original, e.message)
                self._renewals.pop(original, None)
                continue
            r.handle, r.visible_at_ms, r.step = changed.receipt_handle, now + step, r.step + 1
            renewed += 1
        return renewed

    async def _release_client(self, client_id: str) -> int:
        """Stop renewing the messages ``client_id`` holds and make them visible to its group in
        INVISIBLE_WHEN_CLEAR_MS (DefaultReceiptHandleManager#clearGroup). Runs in housekeeping only, so it
        never races a renewal of the same message."""
        mine = [(original, r) for original, r in self._renewals.items() if r.client_id == client_id]
        for original, r in mine:
            self._renewals.pop(original, None)
            try:
                await self._call(self.broker.change_invisible_time, r.group, r.topic, r.handle,
                                 INVISIBLE_WHEN_CLEAR_MS)
            except RpcError as e:  # acked or revived meanwhile: nothing left to give back
                log.info("releasing %s of departed client %s failed: %s", original, client_id, e.message)
        if mine:
            log.info("gRPC client %s left; %d message(s) it held are visible again in %d ms", client_id,
                     len(mine), INVISIBLE_WHEN_CLEAR_MS)
        return len(mine)
