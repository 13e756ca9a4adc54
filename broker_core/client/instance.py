"""The client instance (MQClientInstance): name servers, routes, broker connections, heartbeats.

Why one instance per process-side client id: producers and consumers of one client share the
connections, the route cache and the heartbeat (the broker keys the client registry by client id
and needs *the* connection of a producer group to send CHECK_TRANSACTION_STATE back on). Requests
the brokers send us are dispatched here to the producer or consumer they concern.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, runtime_checkable

from broker_core.remoting import CommandHeader, RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import (
    ClusterInfo,
    ConsumerData,
    HeartbeatData,
    MessageQueue,
    ProducerData,
    TopicRouteData,
)
from broker_core.remoting.body_base import BodyError
from broker_core.remoting.headers import GetRouteInfoRequestHeader, UnregisterClientRequestHeader

from .connection import RemotingConnectError, RemotingConnection, RemotingError
from .credentials import SessionCredentials
from .route import TopicRoute
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 30.0
ROUTE_REFRESH_INTERVAL_S = 30.0


class ClientStateError(RuntimeError):
    """A producer or consumer used out of its life cycle (Java's "service state not OK")."""


class BrokerError(Exception):
    """The server answered a code other than the ones the caller accepts."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        self.code = code
        self.remark = remark or ""
        self.addr = addr
        name = ResponseCode(code).name if code in ResponseCode._value2member_map_ else str(code)
        super().__init__(f"CODE: {code} ({name})  DESC: {self.remark}" + (f"  [{addr}]" if addr else ""))


class ClientRole(Protocol):
    """A producer or consumer registered with the instance (what the heartbeat and dispatch need)."""

    def heartbeat_data(self) -> ProducerData | ConsumerData: ...

    async def handle_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None: ...


@runtime_checkable
class RebalancingRole(Protocol):
    """A consumer that owns queues by rebalancing (a push consumer): told to rebalance at once."""

    def rebalance_immediately(self) -> None: ...


def _instance_name() -> str:
    return f"{os.getpid()}#{time.monotonic_ns()}"


class MQClientInstance:
    def __init__(self, namesrv_addrs: str | Sequence[str], *, credentials: SessionCredentials | None = None,
                 client_ip: str = "127.0.0.1", instance_name: str | None = None,
                 request_timeout: float = 5.0, unit_name: str | None = None,
                 heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
                 route_refresh_interval: float = ROUTE_REFRESH_INTERVAL_S) -> None:
        addrs = namesrv_addrs.split(";") if isinstance(namesrv_addrs, str) else list(namesrv_addrs)
        self.namesrv_addrs = [a.strip() for a in addrs if a.strip()]
        if not self.namesrv_addrs:
            raise ValueError("no name server address given")
        self.credentials = credentials
        self.unit_name = unit_name
        # ClientConfig.buildMQClientId: ip@instanceName, then @unitName when the client has one
        unit = f"@{unit_name}" if unit_name else ""
        self.client_id = f"{client_ip}@{instance_name or _instance_name()}{unit}"
        # Java changes the default instance name "DEFAULT" to pid#nanotime for producers and CLUSTERING
        # consumers only; a BROADCASTING consumer keeps ip@DEFAULT, the id its local offsets file is
        # filed under, so a restarted process finds the file again
        self.stable_client_id = f"{client_ip}@{instance_name or 'DEFAULT'}{unit}"
        self.request_timeout = request_timeout
        self.heartbeat_interval = heartbeat_interval  # ClientConfig.heartbeatBrokerInterval
        self.route_refresh_interval = route_refresh_interval  # ClientConfig.pollNameServerInterval
        self._conns: dict[str, RemotingConnection] = {}
        self._conn_locks: dict[str, asyncio.Lock] = {}
        self._routes: dict[str, TopicRoute] = {}
        self._producers: dict[str, ClientRole] = {}
        self._consumers: dict[str, ClientRole] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        # the brokers of the last GET_BROKER_CLUSTER_INFO, once one was asked (a producer without TBW102
        # learns its brokers so): they stay known, and are refreshed, as the brokers of a route are
        self._cluster_addrs: dict[str, dict[int, str]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._ns_index = 0
        self._started = False
        self._shut_down = False  # from the start of shutdown() to the next start(): no new connections

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._shut_down = False
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._route_refresh_loop()))
        self._tasks.append(loop.create_task(self._heartbeat_loop()))

    async def shutdown(self) -> None:
        """Stop the periodic work and close every connection. From its start on, connection() refuses
        to open new ones (ClientStateError): a send or heartbeat still running would otherwise reopen
        a connection nobody closes any more."""
        self._shut_down = True
        self._tasks.extend(self._background)
        self._background.clear()
        tasks, self._tasks = self._tasks, []
        try:
            await cancel_and_wait(*tasks)
        finally:  # closing takes no time: done even when the caller's cancel ends the wait above
            for conn in list(self._conns.values()):
                conn.close()
            self._conns.clear()
            self._started = False

    async def _route_refresh_loop(self) -> None:
        """Java's updateTopicRouteInfoFromNameServer task: a task of its own, apart from the heartbeat,
        so a name server that is down delays no heartbeat (the brokers would drop our producers and
        consumers after 120 s of silence, and the consumer groups would rebalance without us)."""
        while True:
            await asyncio.sleep(self.route_refresh_interval)
            await self.refresh_routes()

    async def refresh_routes(self) -> None:
        """Refresh every cached route; a topic whose refresh fails keeps its route and stops no other."""
        for topic in list(self._routes):
            try:
                await self.get_route(topic, refresh=True)
            except (RemotingError, BrokerError) as e:
                log.warning("route refresh of %s failed: %s", topic, e)
        if self._cluster_addrs is not None:
            try:
                await self.cluster_info()
            except (RemotingError, BrokerError, BodyError) as e:
                log.warning("cluster info refresh failed: %s", e)

    async def _heartbeat_loop(self) -> None:
        """Java's sendHeartbeatToAllBrokerWithLock task; send_heartbeat_to_all handles each broker's failure."""
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            self.clean_offline_brokers()
            await self.send_heartbeat_to_all()

    def clean_offline_brokers(self) -> None:
        """Java's cleanOfflineBroker: forget the addresses no route (nor the last cluster info) names any
        more. Addresses were only ever added: a broker that left the cluster got a heartbeat every cycle
        forever, each one a logged failure, and a blackholed one held the (sequential) heartbeats of the
        others up for the request timeout."""
        live = {a for route in self._routes.values() for b in route.data.broker_datas
                for a in b.broker_addrs.values()}
        live.update(a for addrs in (self._cluster_addrs or {}).values() for a in addrs.values())
        for name, addrs in list(self._broker_addrs.items()):
            kept = {bid: a for bid, a in addrs.items() if a in live}
            if len(kept) == len(addrs):
                continue
            log.info("broker %s: %s no longer in any route, no heartbeat to it any more", name,
                     ", ".join(sorted(set(addrs.values()) - set(kept.values()))))
            if kept:
                self._broker_addrs[name] = kept
            else:
                del self._broker_addrs[name]

    # ------------------------------------------------------------------ registration
    def register_producer(self, group: str, role: ClientRole) -> None:
        self._producers[group] = role

    def register_consumer(self, group: str, role: ClientRole) -> None:
        self._consumers[group] = role

    async def unregister(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Forget a group and tell every broker (UNREGISTER_CLIENT), as a closing Java client does."""
        if producer_group:
            self._producers.pop(producer_group, None)
        if consumer_group:
            self._consumers.pop(consumer_group, None)
        if self._shut_down:
            return  # its connections are closed, and a broker drops the client of a closed connection
        header = UnregisterClientRequestHeader(client_id=self.client_id, producer_group=producer_group,
                                               consumer_group=consumer_group)
        for addr in self.all_broker_addrs():
            with contextlib.suppress(RemotingError, BrokerError):
                await self.invoke(addr, RequestCode.UNREGISTER_CLIENT, header, timeout=3.0)

    # ------------------------------------------------------------------ connections
    async def connection(self, addr: str) -> RemotingConnection:
        self._check_not_shut_down(addr)
        conn = self._conns.get(addr)
        if conn is not None and conn.is_open:
            return conn
        lock = self._conn_locks.setdefault(addr, asyncio.Lock())
        async with lock:
            self._check_not_shut_down(addr)
            conn = self._conns.get(addr)
            if conn is None or not conn.is_open:
                conn = await RemotingConnection.open(addr, self._on_request, self.credentials)
                if self._shut_down:  # shut down while connecting: shutdown() could not close this one
                    conn.close()
                    self._check_not_shut_down(addr)
                self._conns[addr] = conn
                self._on_channel_active(addr, conn)
            return conn

    def _on_channel_active(self, addr: str, conn: RemotingConnection) -> None:
        """Java's onChannelActive (enableHeartbeatChannelEventListener, on by default): a new connection
        to a broker we know carries our heartbeat first, and once the broker has it every consumer
        rebalances at once. Why: a broker restarted on its address knows no client until it hears from
        it; with the next heartbeat up to 30 s away it answered our group's consumer list without us, so
        a consumer joining meanwhile took every queue while we went on reading ours (each message twice,
        an orderly queue read by two). Written here, before the caller's request goes out on it."""
        if not (self._producers or self._consumers) or addr not in self.all_broker_addrs():
            return
        cmd = RemotingCommand.request(int(RequestCode.HEART_BEAT), {}, self.heartbeat().to_json())
        try:
            answered = conn.write_request(cmd)
        except RemotingError as e:
            log.warning("heartbeat to %s on its new connection failed: %s", addr, e)
            return
        self._spawn(self._rebalance_once_heartbeat_taken(addr, conn, cmd, answered))

    async def _rebalance_once_heartbeat_taken(self, addr: str, conn: RemotingConnection, cmd: RemotingCommand,
                                              answered: asyncio.Future[RemotingCommand]) -> None:
        try:
            self.check(await conn.wait_response(cmd, answered, self.request_timeout), addr=addr)
        except (RemotingError, BrokerError) as e:
            log.warning("heartbeat to %s on its new connection failed: %s", addr, e)
            return
        self.rebalance_immediately()

    def rebalance_immediately(self) -> None:
        """Java's rebalanceImmediately: every consumer that rebalances starts a round now."""
        for role in list(self._consumers.values()):
            if isinstance(role, RebalancingRole):
                role.rebalance_immediately()

    def _check_not_shut_down(self, addr: str) -> None:
        if self._shut_down:
            raise ClientStateError(f"The client instance {self.client_id} is shut down (SHUTDOWN_ALREADY): "
                                   f"no new connection to {addr}")

    async def invoke(self, addr: str, code: int, header: CommandHeader | None = None, body: bytes = b"",
                     timeout: float | None = None, ext: dict[str, str] | None = None) -> RemotingCommand:
        fields = header.to_ext_fields() if header is not None else {}
        if ext:
            fields.update(ext)
        conn = await self.connection(addr)
        return await conn.invoke(RemotingCommand.request(int(code), fields, body), timeout or self.request_timeout)

    async def invoke_oneway(self, addr: str, code: int, header: CommandHeader | None = None,
                            body: bytes = b"") -> None:
        conn = await self.connection(addr)
        conn.invoke_oneway(RemotingCommand.request(int(code), header.to_ext_fields() if header else {}, body))

    async def invoke_namesrv(self, code: int, header: CommandHeader | None = None, body: bytes = b"",
                             timeout: float | None = None, ext: dict[str, str] | None = None) -> RemotingCommand:
        """Ask the name servers in turn until one answers (any code)."""
        last: Exception | None = None
        n = len(self.namesrv_addrs)
        for i in range(n):
            addr = self.namesrv_addrs[(self._ns_index + i) % n]
            try:
                resp = await self.invoke(addr, code, header, body, timeout, ext)
                self._ns_index = (self._ns_index + i) % n
                return resp
            except RemotingError as e:
                last = e
        if isinstance(last, RemotingConnectError) and n == 1:
            raise RemotingConnectError(last.addr, last.reason, "name server")
        if isinstance(last, RemotingConnectError):
            raise RemotingError(f"cannot connect to any name server ({'; '.join(self.namesrv_addrs)}): "
                                f"{last.reason}")
        raise RemotingError(f"no name server answered ({'; '.join(self.namesrv_addrs)}): {last}")

    @staticmethod
    def check(resp: RemotingCommand, *accept: int, addr: str = "") -> RemotingCommand:
        if resp.code not in (accept or (ResponseCode.SUCCESS,)):
            raise BrokerError(resp.code, resp.remark, addr)
        return resp

    # ------------------------------------------------------------------ routes
    async def get_route(self, topic: str, refresh: bool = False) -> TopicRoute | None:
        """The topic's route from the name server (cached); None when no name server ever routed it.

        A TOPIC_NOT_EXIST answer for a topic routed before keeps the cached route, as Java's
        updateTopicRouteInfoFromNameServer does: a name server restarted empty answers so until the
        brokers' next registration (up to 30 s), and dropping the route then would fail every send and
        make the consumers let go of every queue. A topic really deleted keeps its old route too; its
        sends then fail at the broker, which is the authority on it."""
        if not refresh and topic in self._routes:
            return self._routes[topic]
        resp = await self.invoke_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic))
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return self._kept_route(topic)
        self.check(resp)
        try:
            data = TopicRouteData.from_json(resp.body)
        except BodyError as e:
            raise RemotingError(f"route of {topic}: undecodable TopicRouteData: {e}") from None
        route = TopicRoute(topic, data)
        self._routes[topic] = route
        known = set(self.all_broker_addrs())
        for b in data.broker_datas:
            self._broker_addrs[b.broker_name] = dict(b.broker_addrs)
        if self._producers or self._consumers:
            # a broker seen for the first time learns our groups now, not at the next 30 s heartbeat
            # (it needs a producer group's connection to send CHECK_TRANSACTION_STATE back)
            for addr in sorted(set(self.all_broker_addrs()) - known):
                self._spawn(self._heartbeat_quietly(addr))
        return route

    def _kept_route(self, topic: str) -> TopicRoute | None:
        """The cached route of ``topic`` after a name server answered TOPIC_NOT_EXIST (see get_route)."""
        route = self._routes.get(topic)
        if route is not None:
            log.warning("the name server has no route of %s now; keeping the route known before", topic)
        return route

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        if self._shut_down:  # shutdown() already cancelled the background tasks; none starts after it
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _heartbeat_quietly(self, addr: str) -> None:
        try:
            await self.send_heartbeat(addr)
        except (RemotingError, BrokerError) as e:
            log.warning("heartbeat to %s failed: %s", addr, e)

    def broker_addr(self, broker_name: str) -> str | None:
        """The master (else lowest-id) address of a broker seen in any route: where reads go
        (Java's findBrokerAddressInSubscribe(name, MASTER_ID, false)). Never for a write."""
        addrs = self._broker_addrs.get(broker_name)
        if not addrs:
            return None
        return addrs.get(0) or addrs[min(addrs)]

    def master_addr(self, broker_name: str) -> str | None:
        """The master's address of a broker seen in any route, or None when it has no master now
        (Java's findBrokerAddressInPublish): where sends, send-backs and END_TRANSACTION go. A slave
        refuses every write, and a message it stored alone would never reach the master's consumers."""
        return self._broker_addrs.get(broker_name, {}).get(0)

    async def find_broker_addr(self, mq: MessageQueue) -> str:
        """Where ``mq``'s reads go (pull, offsets): its broker's master, else its lowest-id slave, after
        one route refresh of the topic when that broker is not known yet (a new broker, or a queue from
        a route not fetched here)."""
        return await self._find_addr(mq, self.broker_addr)

    async def find_broker_addr_in_publish(self, mq: MessageQueue) -> str:
        """Where ``mq``'s writes go: its broker's master only, after one route refresh when none is
        known; a broker group whose master is gone fails the send (``The broker[...] not exist``), as
        Java's sendKernelImpl, instead of storing it on a slave."""
        return await self._find_addr(mq, self.master_addr)

    async def _find_addr(self, mq: MessageQueue, pick: Callable[[str], str | None]) -> str:
        addr = pick(mq.broker_name)
        if addr is None:
            await self.get_route(mq.topic, refresh=True)
            addr = pick(mq.broker_name)
        if addr is None:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, f"The broker[{mq.broker_name}] not exist")
        return addr

    def all_broker_addrs(self) -> list[str]:
        return sorted({a for addrs in self._broker_addrs.values() for a in addrs.values()})

    async def cluster_info(self) -> ClusterInfo:
        resp = self.check(await self.invoke_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO))
        info = ClusterInfo.from_json(resp.body)
        self._cluster_addrs = {name: dict(b.broker_addrs) for name, b in info.broker_addr_table.items()}
        for name, addrs in self._cluster_addrs.items():
            self._broker_addrs[name] = dict(addrs)
        return info

    # ------------------------------------------------------------------ heartbeat
    def heartbeat(self) -> HeartbeatData:
        producers: list[ProducerData] = []
        consumers: list[ConsumerData] = []
        for role in list(self._producers.values()) + list(self._consumers.values()):
            data = role.heartbeat_data()
            if isinstance(data, ProducerData):
                producers.append(data)
            else:
                consumers.append(data)
        return HeartbeatData(client_id=self.client_id, producer_data_set=producers, consumer_data_set=consumers)

    async def send_heartbeat(self, addr: str) -> None:
        body = self.heartbeat().to_json()
        self.check(await self.invoke(addr, RequestCode.HEART_BEAT, None, body), addr=addr)

    async def send_heartbeat_to_all(self) -> None:
        if not self._producers and not self._consumers:
            return
        for addr in self.all_broker_addrs():
            try:
                await self.send_heartbeat(addr)
            except (RemotingError, BrokerError) as e:
                log.warning("heartbeat to %s failed: %s", addr, e)

    # ------------------------------------------------------------------ broker -> client requests
    async def _on_request(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand | None:
        group = req.ext_fields.get("consumerGroup") or req.ext_fields.get("group")
        if req.code == RequestCode.CHECK_TRANSACTION_STATE:
            # oneway; the half message names its producer group (PGROUP) and only that producer answers
            for role in list(self._producers.values()):
                await role.handle_request(conn, req)
            return None
        if group and group in self._consumers:
            return await self._consumers[group].handle_request(conn, req)
        if req.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            return None
        return req.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
