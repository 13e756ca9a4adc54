"""A topic's route across the cluster, for the gRPC endpoint's QueryRoute and QueryAssignment.

Why: a gRPC client only knows the endpoint it dialled, and everything it learns about other brokers
comes from QueryRoute. Answering from the local TopicConfig alone hid every other broker of the topic
(a consumer never received their messages) and ignored the name server's view of this broker (after
``mqadmin wipeWritePerm`` producers kept sending here). Like upstream's proxy in local mode
(LocalTopicRouteService), the route now comes from the name server (GET_ROUTEINFO_BY_TOPIC): every
broker group's master with the name server's perm and queue counts.

Where each broker's gRPC endpoint is: upstream assumes one gRPC port on every host (the broker's host +
the proxy's own port). Here brokers on one host have different gRPC ports, so each broker is asked
(GET_BROKER_CONFIG, its ``grpcServerPort``: the port its endpoint bound, 0 when gRPC is off). A broker
that cannot be asked or has gRPC off is left out of the route (logged once): sending its clients to
"its host + our port" would reach no endpoint, or this broker under another broker's name. Only a
broker whose config has no ``grpcServerPort`` at all (not one of ours, e.g. an Apache broker beside a
proxy) gets upstream's rule, and only on another host than ours (on ours that port is this endpoint).

A topic this broker does not have (created on other brokers only) is routed all the same; its
``message.type``, which the route carries for each queue, is then asked of a broker of the route
(GET_TOPIC_CONFIG), as upstream's proxy does in cluster mode (ClusterMetadataService).

Routes are cached for ROUTE_CACHE_S (a perm change is seen within seconds; a burst of QueryRoute costs
one name server request), broker gRPC ports per broker address for longer. Concurrent askers of one
topic or one broker share one request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from broker_core.auth.config import Credentials
from broker_core.auth.signer import sign_remoting
from broker_core.broker.broker_config import BrokerConfig
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import TopicConfigBody, TopicRouteData
from broker_core.remoting.body_base import BodyError
from broker_core.remoting.headers import GetRouteInfoRequestHeader, GetTopicConfigRequestHeader

from ..outbound import IllegalAddressError, OutboundConnection, failure_reason, parse_address
from ..wire_convert import parse_properties_text

log = logging.getLogger("rmqops.grpc")
T = TypeVar("T")
V = TypeVar("V")

ROUTE_CACHE_S = 3.0  # a name server route (or its absence) is reused this long
BROKER_PORT_CACHE_S = 30.0  # another broker's gRPC port, once learnt
BROKER_PORT_RETRY_S = 5.0  # a broker that could not be asked is asked again after this long
REQUEST_TIMEOUT_S = 2.0  # one remoting request (connect and answer); QueryRoute clients wait 3 s or more
MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class GrpcAddress:
    """Where a broker's gRPC endpoint listens."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerQueues:
    """One broker group's master in a topic's route: the name server's QueueData and its gRPC endpoint.

    ``endpoint`` is None for this broker: the client is answered with the endpoints it dialled, which
    are known to reach it (spec grpc-v2 §5.1)."""

    broker_name: str
    perm: int
    read_queue_nums: int
    write_queue_nums: int
    endpoint: GrpcAddress | None


@dataclass(frozen=True, slots=True)
class ClusterTopicRoute:
    """The brokers of a topic, ordered by broker name so answers are stable between polls."""

    topic: str
    brokers: tuple[BrokerQueues, ...]
    # broker groups holding the topic with no master registered (only slaves): left out of ``brokers``,
    # since a slave takes no writes; named so an empty route can say why
    masterless: tuple[str, ...] = ()

    @property
    def has_local(self) -> bool:
        return any(b.endpoint is None for b in self.brokers)


class ClusterRoutes(Protocol):
    """What MessagingService needs: a topic's cluster route, or None to answer from the local broker."""

    async def topic_route(self, topic: str) -> ClusterTopicRoute | None: ...

    async def topic_attributes(self, topic: str) -> dict[str, str] | None: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Cached(Generic[V]):
    value: V
    expires: float


class NamesrvClusterRoutes:
    """ClusterRoutes from the name servers this broker registers with, over outbound remoting connections.

    Runs on the gRPC endpoint's event loop (its connections are made there, on first use). With no name
    server (a broker started with ``-n ';'``) every route is None, i.e. this broker's queues, until
    use_namesrv_addrs gives it some."""

    def __init__(self, namesrv_addrs: Sequence[str], broker_addr: str, own_grpc_port: Callable[[], int],
                 inner_credentials: Credentials | None = None, *, route_cache_s: float = ROUTE_CACHE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.namesrv_addrs = list(namesrv_addrs)
        self.broker_addr = broker_addr
        self.own_grpc_port = own_grpc_port
        # innerClientAuthenticationCredentials: how this broker signs what it asks other brokers, so
        # GET_BROKER_CONFIG (authenticated when ACL is on) works between brokers of a secured cluster
        self.inner_credentials = inner_credentials
        self.route_cache_s = route_cache_s
        self.clock = clock
        self._own_host = _host_of(broker_addr)
        self._routes: dict[str, _Cached[TopicRouteData | None]] = {}
        self._ports: dict[str, _Cached[GrpcAddress | None]] = {}
        self._attributes: dict[str, _Cached[dict[str, str] | None]] = {}
        self._inflight: dict[tuple[str, str], asyncio.Future[Any]] = {}
        self._conns: dict[str, OutboundConnection] = {}
        self._connect_locks: dict[str, asyncio.Lock] = {}
        self._preferred = 0  # index of the name server that answered last
        self._complaints: dict[str, str] = {}  # address -> what was logged about it (logged once)

    @classmethod
    def for_broker(cls, config: BrokerConfig, namesrv_addrs: Sequence[str]) -> NamesrvClusterRoutes:
        """From a BrokerConfig: its remoting address (as registered), its live grpcServerPort (the
        endpoint records the port it bound there) and its inner-client credentials."""
        return cls(namesrv_addrs, config.broker_addr, lambda: config.grpc_server_port,
                   config.auth.inner_client_user())

    def use_namesrv_addrs(self, namesrv_addrs: Sequence[str]) -> None:
        """The broker moved to other name servers, or was given its first (updateBrokerConfig namesrvAddr):
        routes come from them from now on. Why: the old ones drop this broker, so their routes would leave
        it (and every broker registered only with the new ones) out of what gRPC clients are told; with
        none, clients were told this broker's queues only. Cached routes age out."""
        self.namesrv_addrs = list(namesrv_addrs)
        self._preferred = 0

    # -- the interface -----------------------------------------------------------------------------
    async def topic_route(self, topic: str) -> ClusterTopicRoute | None:
        data = await self._route_data(topic)
        if data is None:
            return None
        masters = {b.broker_name: b.broker_addrs.get(MASTER_ID) for b in data.broker_datas}
        queue_datas = sorted((q for q in data.queue_datas if masters.get(q.broker_name)),
                             key=lambda q: q.broker_name)
        others = sorted({addr for q in queue_datas if (addr := masters[q.broker_name]) != self.broker_addr})
        found = await asyncio.gather(*(self._grpc_address(a) for a in others))
        endpoints = dict(zip(others, found, strict=True))
        brokers: list[BrokerQueues] = []
        for q in queue_datas:
            addr = masters[q.broker_name]
            assert addr is not None
            if addr == self.broker_addr:
                endpoint = None
            elif (endpoint := endpoints[addr]) is None:
                continue  # no gRPC endpoint known for it: its clients could not reach it (logged once)
            brokers.append(BrokerQueues(q.broker_name, q.perm, q.read_queue_nums, q.write_queue_nums, endpoint))
        masterless = sorted({q.broker_name for q in data.queue_datas if not masters.get(q.broker_name)})
        return ClusterTopicRoute(topic, tuple(brokers), tuple(masterless))

    async def topic_attributes(self, topic: str) -> dict[str, str] | None:
        """The topic's attributes (``message.type``) as a broker of its route has them, for a topic this
        broker does not have; None when the name server has no route or no broker of it answers."""
        return await self._cached(self._attributes, "attributes", topic, self.route_cache_s, self.route_cache_s,
                                  lambda: self._fetch_attributes(topic))

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()

    # -- caching -----------------------------------------------------------------------------------
    async def _cached(self, table: dict[str, _Cached[T]], kind: str, key: str, ok_ttl: float, none_ttl: float,
                      load: Callable[[], Awaitable[T]]) -> T:
        """``table[key]`` while fresh, else ``load()`` once for all concurrent askers (a QueryRoute burst,
        every consumer's poll) and kept for ``ok_ttl`` (``none_ttl`` when it found nothing)."""
        hit = table.get(key)
        if hit is not None and hit.expires > self.clock():
            return hit.value
        flight = (kind, key)
        fut = self._inflight.get(flight)
        if fut is None:
            fut = asyncio.ensure_future(load())
            self._inflight[flight] = fut

            def done(f: asyncio.Future[T]) -> None:
                # stored even when every asker gave up waiting (a client deadline cancels its RPC)
                self._inflight.pop(flight, None)
                if not f.cancelled() and f.exception() is None:
                    value = f.result()
                    table[key] = _Cached(value, self.clock() + (ok_ttl if value is not None else none_ttl))
            fut.add_done_callback(done)
        result: T = await asyncio.shield(fut)
        return result

    # -- remoting ----------------------------------------------------------------------------------
    async def _request(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        conn = self._conns.get(addr)
        if conn is None:
            conn = self._conns[addr] = OutboundConnection(addr)
        lock = self._connect_locks.setdefault(addr, asyncio.Lock())
        async with lock:  # concurrent first requests must not open two connections
            if not conn.connected:
                await asyncio.wait_for(conn.connect(REQUEST_TIMEOUT_S), REQUEST_TIMEOUT_S)
        return await conn.request(cmd, timeout=REQUEST_TIMEOUT_S)

    async def _route_data(self, topic: str) -> TopicRouteData | None:
        return await self._cached(self._routes, "route", topic, self.route_cache_s, self.route_cache_s,
                                  lambda: self._fetch_route(topic))

    async def _fetch_attributes(self, topic: str) -> dict[str, str] | None:
        """GET_TOPIC_CONFIG to the masters of the topic's route (by broker name), the first that answers."""
        data = await self._route_data(topic)
        if data is None:
            return None
        masters = {b.broker_name: b.broker_addrs.get(MASTER_ID) for b in data.broker_datas}
        addrs = [a for q in sorted(data.queue_datas, key=lambda q: q.broker_name)
                 if (a := masters.get(q.broker_name)) and a != self.broker_addr]
        for addr in dict.fromkeys(addrs):
            try:
                resp = await self._signed_request(addr, RequestCode.GET_TOPIC_CONFIG,
                                                  GetTopicConfigRequestHeader(topic=topic).to_ext_fields())
            except (OSError, TimeoutError) as e:
                log.info("topic config of %s from broker %s: %s", topic, addr, failure_reason(e, REQUEST_TIMEOUT_S))
                continue
            if resp.code != ResponseCode.SUCCESS:
                log.info("topic config of %s from broker %s: code %d %s", topic, addr, resp.code, resp.remark)
                continue
            try:
                return dict(TopicConfigBody.from_json(resp.body).attributes or {})
            except BodyError as e:
                log.warning("topic config of %s from broker %s: undecodable TopicConfig: %s", topic, addr, e)
        return None

    async def _fetch_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC from the name server that answered last, then the others. None when no
        name server answers or the topic has no route (the caller answers from the local broker)."""
        addrs = self.namesrv_addrs  # one list for the whole walk: use_namesrv_addrs may replace it meanwhile
        n = len(addrs)
        for i in range(n):
            index = (self._preferred + i) % n
            addr = addrs[index]
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                          GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
            try:
                resp = await self._request(addr, cmd)
            except (OSError, TimeoutError) as e:
                self._complain(addr, f"name server {addr} cannot be reached ({failure_reason(e, REQUEST_TIMEOUT_S)}): "
                                     "gRPC routes list this broker's queues only until it answers")
                continue
            self._recovered(addr, f"name server {addr} answers again: gRPC routes come from it")
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                self._preferred = index
                return None
            if resp.code != ResponseCode.SUCCESS:
                log.warning("route of %s from name server %s: code %d %s", topic, addr, resp.code, resp.remark)
                continue
            try:
                data = TopicRouteData.from_json(resp.body)
            except BodyError as e:
                log.warning("route of %s from name server %s: undecodable TopicRouteData: %s", topic, addr, e)
                continue
            self._preferred = index
            return data
        return None

    async def _grpc_address(self, broker_addr: str) -> GrpcAddress | None:
        return await self._cached(self._ports, "port", broker_addr, BROKER_PORT_CACHE_S, BROKER_PORT_RETRY_S,
                                  lambda: self._ask_grpc_address(broker_addr))

    async def _signed_request(self, broker_addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
        """One request to a broker, signed with the inner credentials when they are set (ACL 2.0 on)."""
        creds = self.inner_credentials
        if creds is not None:
            ext = sign_remoting(ext, None, creds.username, creds.password)
        return await self._request(broker_addr, RemotingCommand.request(code, ext))

    async def _ask_grpc_address(self, broker_addr: str) -> GrpcAddress | None:
        """GET_BROKER_CONFIG to the broker: its host (from its remoting address) and its grpcServerPort."""
        host = _host_of(broker_addr)
        if host is None:
            self._complain(broker_addr, f"broker {broker_addr}: not host:port; left out of gRPC routes")
            return None
        try:
            resp = await self._signed_request(broker_addr, RequestCode.GET_BROKER_CONFIG, {})
        except (OSError, TimeoutError) as e:
            self._complain(broker_addr, f"broker {broker_addr} cannot be asked for its gRPC port "
                                        f"({failure_reason(e, REQUEST_TIMEOUT_S)}); left out of gRPC routes")
            return None
        if resp.code != ResponseCode.SUCCESS:
            self._complain(broker_addr, f"broker {broker_addr} refused GET_BROKER_CONFIG (code {resp.code} "
                                        f"{resp.remark}); left out of gRPC routes")
            return None
        try:
            props = parse_properties_text(resp.body)
        except BodyError as e:
            self._complain(broker_addr, f"broker {broker_addr}: unreadable config ({e}); left out of gRPC routes")
            return None
        text = props.get("grpcServerPort")
        if text is None:
            # not one of ours: upstream's rule (one gRPC port on every host), where it cannot mean us
            own = self.own_grpc_port()
            if own and host != self._own_host:
                self._recovered(broker_addr, f"broker {broker_addr}: gRPC assumed on port {own} (as ours)")
                return GrpcAddress(host, own)
            self._complain(broker_addr, f"broker {broker_addr} names no grpcServerPort; left out of gRPC routes")
            return None
        port = int(text) if text.strip().isdigit() else -1
        if not 0 < port <= 65535:
            self._complain(broker_addr, f"broker {broker_addr} has no gRPC endpoint (grpcServerPort={text}); "
                                        "left out of gRPC routes")
            return None
        self._recovered(broker_addr, f"broker {broker_addr}: gRPC endpoint {host}:{port} in routes again")
        return GrpcAddress(host, port)

    # -- logging once --------------------------------------------------------------------------------
    def _complain(self, key: str, text: str) -> None:
        """A warning the first time, not on every cache miss of every topic."""
        if key not in self._complaints:
            self._complaints[key] = text
            log.warning("%s", text)

    def _recovered(self, key: str, text: str) -> None:
        if self._complaints.pop(key, None) is not None:
            log.info("%s", text)


def _host_of(addr: str) -> str | None:
    try:
        return parse_address(addr)[0]
    except IllegalAddressError:
        return None


def address_scheme(host: str) -> str:
    """The Endpoints scheme name of a host: IPv4, IPv6 or DOMAIN_NAME (spec grpc-v2 §11)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "DOMAIN_NAME"
    return "IPv4" if ip.version == 4 else "IPv6"
