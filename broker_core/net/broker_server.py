"""The broker's remoting endpoint (default port 10911): the handler table over the Broker, the ACL
pipeline on the wire, and registration with the name servers.

Why here: handlers only translate (``handlers_*``); this module decides what runs before them —
authentication of every request when it is on (spec D.2: AccessKey + Signature, RocketMQ's codes
and remarks) — and keeps the name servers' route data fresh: REGISTER_BROKER at start, every
``register_period_ms`` (RocketMQ: 30 s) and right after a topic change, UNREGISTER_BROKER at stop.
The name servers are the broker's live ``namesrvAddr``: updateBrokerConfig may move the broker to others.

After a topic change the registration carries only the changed topics with the table's new
DataVersion (Apache's registerIncrementBrokerData); the periodic one carries every topic with the
same DataVersion. A name server rewrites every topic of a broker whose DataVersion changed, so a full
registration after each change undid ``wipeWritePerm`` (a broker being drained took writes again as
soon as any topic, even a consumer's %RETRY% topic, was created on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import zlib
from collections.abc import Callable, Iterable

from broker_core.auth.authentication import AuthenticationContext
from broker_core.auth.signer import ACCESS_KEY
from broker_core.broker.broker import Broker
from broker_core.broker.config_update import black_list
from broker_core.broker.errors import InvalidParameterError
from broker_core.broker.request_context import RequestContext
from broker_core.broker.route_info import BrokerRegistration
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigBody,
    TopicConfigSerializeWrapper,
)
from broker_core.remoting.headers import RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader
from broker_core.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.store.topic_config import DataVersion as TableDataVersion

from .broker_context import BrokerContext, BrokerHandler
from .channel import Channel
from .handlers_admin import AdminHandlers
from .handlers_auth import AuthHandlers
from .handlers_client import ClientHandlers
from .handlers_consume import ConsumeHandlers
from .handlers_produce import ProduceHandlers
from .outbound import (
    IllegalAddressError,
    OutboundConnection,
    checked_addresses,
    failure_reason,
    split_addresses,
)
from .remoting_server import Handler, RemotingServer, ServerConfig
from .wire_convert import parse_properties_text

log = logging.getLogger("rmqops.broker.net")

REGISTER_NAME_SERVER_PERIOD_MS = 30_000
REGISTER_PERIOD_MIN_MS = 100
"""The shortest registration period taken. Apache's BrokerController takes max(10000, ...): here short
periods stay possible (tests and demos see route changes quickly), but 0 or a negative period re-registered
in a busy loop at 100% CPU."""
REGISTER_PERIOD_MAX_MS = 60_000
"""The longest, as Apache's min(..., 60000): a broker must register well within the name server's
broker expiry (brokerChannelExpiredTime, 120 s) or it drops out of the routes between registrations."""
REGISTER_TIMEOUT_S = 3.0  # one REGISTER_BROKER (connect and answer); a hung name server costs no more
CLIENT_HOUSEKEEPING_PERIOD_S = 10.0  # ClientHousekeepingService: scan for silent clients every 10 s


class BrokerRemotingServer:
    def __init__(self, broker: Broker, namesrv_addrs: list[str] | None = None, *,
                 register_period_ms: int = REGISTER_NAME_SERVER_PERIOD_MS, heartbeat_timeout_ms: int | None = None,
                 server_config: ServerConfig | None = None, workers: int | None = None,
                 on_namesrv_change: Callable[[list[str]], None] | None = None) -> None:
        self.broker = broker
        self.namesrv_addrs = list(namesrv_addrs or [])
        # the namesrvAddr these name servers came from: a different one (updateBrokerConfig) replaces them
        self._namesrv_addr_applied = broker.config.namesrv_addr
        self.on_namesrv_change = on_namesrv_change
        self.register_period_ms = effective_register_period_ms(register_period_ms)
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.ctx = BrokerContext(broker, workers, self.register_changes, self.register_all)
        # a client that hung up has its calls still waiting for a worker dropped, not answered to no one
        # and its parked long-polling pulls and pops are dropped at once (Apache answers them when woken,
        # cheaply; here a woken pull's read and encode cost a worker for nobody)
        self.server = RemotingServer("broker", self._wrap_all(self._broker_handlers()), server_config,
                                     on_connection_lost=self.ctx.drop_waiting,
                                     cancel_on_loss=(RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE))
        self._namesrv: dict[str, OutboundConnection] = {}
        self._register_task: asyncio.Task[None] | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._register_lock: asyncio.Lock | None = None
        self._pending_register: asyncio.Task[None] | None = None
        self._stopping = False
        # topics changed since they were last registered, and the newest DataVersion seen with them
        # (their listener runs on the thread that changed them)
        self._changes_lock = threading.Lock()
        self._changed_topics: set[str] = set()
        self._changed_version: TableDataVersion | None = None
        # the DataVersion the name servers were last sent with the changes it stands for; the
        # periodic registration carries it (see _full_registration_version)
        self._announced: TableDataVersion | None = None
        self._unannounced_seen: int | None = None

    def _broker_handlers(self) -> dict[int, BrokerHandler]:
        table: dict[int, BrokerHandler] = {}
        for part in (ProduceHandlers(self.ctx), ConsumeHandlers(self.ctx), AdminHandlers(self.ctx),
                     ClientHandlers(self.ctx), AuthHandlers(self.ctx)):
            table.update(part.table())
        table[RequestCode.UPDATE_BROKER_CONFIG] = self._checking_namesrv_addr(table[RequestCode.UPDATE_BROKER_CONFIG])
        return table

    def _checking_namesrv_addr(self, handler: BrokerHandler) -> BrokerHandler:
        """UPDATE_BROKER_CONFIG refused, nothing changed, when it sets a namesrvAddr that is not a
        ``host:port[;host:port]`` list. Why here: the broker registers with that list at its next round,
        so ``garbage`` was taken and the broker dropped out of every name server's routes."""
        async def checked(ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand | None:
            value = parse_properties_text(req.body).get("namesrvAddr") if req.body else None
            cfg = self.broker.config
            if (value is not None and value.strip() != cfg.namesrv_addr.strip()
                    and "namesrvAddr" not in black_list(cfg.properties.get("configBlackList", ""))):
                refusal = namesrv_addr_refusal(value)
                if refusal:
                    raise InvalidParameterError(f"invalid broker config: namesrvAddr: {refusal}")
            return await handler(ch, req, auth)
        return checked

    @property
    def served_codes(self) -> list[int]:
        return sorted(self.server.handlers)

    # -- the ACL pipeline ------------------------------------------------------------------------
    def _wrap_all(self, table: dict[int, BrokerHandler]) -> dict[int, Handler]:
        return {code: self._wrap(h) for code, h in table.items()}

    def _wrap(self, handler: BrokerHandler) -> Handler:
        async def with_auth(ch: Channel, req: RemotingCommand) -> RemotingCommand | None:
            return await handler(ch, req, self._authenticate(ch, req))
        return with_auth

    def _authenticate(self, ch: Channel, req: RemotingCommand) -> RequestContext:
        """Authentication first, for every request (spec D.2); raises NoPermissionError with RocketMQ's remark.
        With authentication off the signed bytes are not even built; authorization (if on) then takes the
        caller from AccessKey, as RocketMQ's context builder does."""
        auth_cfg = self.broker.config.auth
        code = str(req.code)
        if not auth_cfg.authentication_enabled:
            return RequestContext(subject=req.ext_fields.get(ACCESS_KEY) if auth_cfg.authorization_enabled else None,
                                  source_ip=ch.remote_ip, channel_id=ch.id, request_code=code)
        ctx = RequestContext(source_ip=ch.remote_ip, channel_id=ch.id, request_code=code,
                             authentication=AuthenticationContext.from_remoting(
                                 req.ext_fields, req.body, request_code=code, version=req.version, channel_id=ch.id))
        return self.broker.authenticate(ctx)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int | None = None, sock: socket.socket | None = None) -> int:
        """Serve on ``sock`` (already bound, e.g. to learn a free port before the Broker opens) or host:port."""
        self._register_lock = asyncio.Lock()
        bound = await self.server.start(host, self.broker.config.listen_port if port is None else port, sock=sock)
        await self.register_all(new_version=True)
        loop = asyncio.get_running_loop()
        if self.namesrv_addrs:
            self._register_task = loop.create_task(self._register_loop())
            self.broker.add_topic_change_listener(lambda topic, tc: self._topic_changed(loop, topic, tc))
        self._housekeeping = loop.create_task(self._housekeeping_loop())
        return bound

    async def stop(self) -> None:
        self._stopping = True
        for task in (self._register_task, self._housekeeping, self._pending_register):
            if task is not None:
                await _cancel_until_done(task)
        await self._unregister_all()
        await self.server.stop()
        for conn in self._namesrv.values():
            await conn.close()
        self.ctx.close()

    async def _housekeeping_loop(self) -> None:
        """Clients silent past the registry's expiry (120 s) are dropped and their connections closed."""
        while True:
            await asyncio.sleep(CLIENT_HOUSEKEEPING_PERIOD_S)
            for info in self.broker.client_registry.scan_expired():
                log.warning("client %s (%s) sent no heartbeat for %d ms: closing its connection", info.client_id,
                            info.remote_addr, self.broker.client_registry.channel_expired_timeout_ms)
                if isinstance(info.channel, Channel):
                    info.channel.close()

    # -- name servers ----------------------------------------------------------------------------
    def _topic_changed(self, loop: asyncio.AbstractEventLoop, topic: str, tc: TopicConfig | None) -> None:
        """The topic manager's listener, on the thread that made the change (after it is made): note
        the topic and the table's DataVersion now, and have the event loop register it."""
        if self._stopping:
            return
        version = self.broker.topic_config_data_version()
        with self._changes_lock:
            self._changed_topics.add(topic)
            if self._changed_version is None or version.counter > self._changed_version.counter:
                self._changed_version = version
        with contextlib.suppress(RuntimeError):  # the loop is closed: this server is gone
            loop.call_soon_threadsafe(self._topics_changed)

    def _topics_changed(self) -> None:
        """A topic appeared, changed or went (an admin request, a send that auto-created it, the
        broker's own retry/DLQ topics): register the changes soon, once for a burst of them."""
        if self._stopping or not self.namesrv_addrs:
            return
        if self._pending_register is None or self._pending_register.done():
            self._pending_register = asyncio.get_running_loop().create_task(self.register_changes())

    async def _register_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.register_period_ms / 1000)
            await self.register_all()

    def _conn(self, addr: str) -> OutboundConnection:
        conn = self._namesrv.get(addr)
        if conn is None:
            conn = self._namesrv[addr] = OutboundConnection(addr)
        return conn

    async def _follow_namesrv_addr(self) -> None:
        """Take a namesrvAddr changed since the last round (updateBrokerConfig), as Apache's
        BrokerController#updateNamesrvAddr does before registering: this round registers with the new
        list, and the connections to name servers no longer in it are closed, so those drop the broker
        from their routes at once (as for a broker that went away) instead of holding it for 120 s."""
        text = self.broker.config.namesrv_addr
        if text == self._namesrv_addr_applied:
            return
        self._namesrv_addr_applied = text
        refusal = namesrv_addr_refusal(text)
        if refusal:  # set in-process past the UPDATE_BROKER_CONFIG check: keep registering where it does
            log.warning("namesrvAddr %r ignored (%s): still registering with %s", text, refusal,
                        ";".join(self.namesrv_addrs))
            return
        addrs = split_addresses(text)
        if addrs == self.namesrv_addrs:
            return
        log.info("namesrvAddr changed: registering with %s (was %s)", ";".join(addrs), ";".join(self.namesrv_addrs))
        dropped = [a for a in self.namesrv_addrs if a not in addrs]
        self.namesrv_addrs = addrs
        for addr in dropped:
            conn = self._namesrv.pop(addr, None)
            if conn is not None:
                await conn.close()
        if self.on_namesrv_change is not None:
            self.on_namesrv_change(list(addrs))

    async def register_changes(self, topics: Iterable[str] = ()) -> None:
        """REGISTER_BROKER of the topics changed since their last registration, and ``topics``, to every
        name server (Apache's registerIncrementBrokerData): only those topics, with the DataVersion
        seen when they changed. A name server rewrites the queue data of the topics a registration with
        a new DataVersion carries, so carrying only these keeps a wipeWritePerm of the others; a deleted
        topic is in none (DELETE_TOPIC_IN_NAMESRV takes its route), its registration still carries the
        new DataVersion so the next periodic one, with the same, rewrites nothing."""
        if self._register_lock is None:
            return
        async with self._register_lock:
            await self._follow_namesrv_addr()
            await self._send_changes(topics)

    async def _send_changes(self, also: Iterable[str] = ()) -> None:
        """The body of register_changes, under the register lock."""
        with self._changes_lock:
            topics, self._changed_topics = self._changed_topics | set(also), set()
            version, self._changed_version = self._changed_version, None
        if not topics or not self.namesrv_addrs:
            return
        if version is None:  # only topics unchanged: the version the name servers have
            version = self._announced or self.broker.topic_config_data_version()
        elif self._announced is None or version.counter > self._announced.counter:
            self._announced = version
        await self._send(self._registration_command(self.broker.registration(topics), version))

    def _full_registration_version(self, new_version: bool) -> TableDataVersion:
        """The DataVersion of a registration of every topic: the table's, unless a topic change is
        still to be registered. Why: a change bumps the DataVersion before its listener runs (a topic
        deletion removes its queue files in between); a full registration carrying that version then
        made every name server rewrite every topic, undoing a wipeWritePerm as a full registration per
        change did. It carries the version last announced instead, and the change's own registration
        the new one. A version no change announces (none should) is sent at the second round."""
        current = self.broker.topic_config_data_version()
        announced = self._announced
        if new_version or announced is None or current.counter == announced.counter:
            self._announced, self._unannounced_seen = current, None
            return current
        with self._changes_lock:
            pending = bool(self._changed_topics)
        if pending or self._unannounced_seen != current.counter:
            self._unannounced_seen = current.counter
            return announced
        self._announced, self._unannounced_seen = current, None
        return current

    async def register_all(self, new_version: bool = False) -> None:
        """REGISTER_BROKER of every topic to every name server; a name server that is down is logged and
        retried next period. The topic changes not registered yet go first, on their own. ``new_version``:
        carry the table's DataVersion even if no change announced it (at start, and when what the routes
        advertise of every topic changed: brokerPermission), so the name servers rewrite every topic."""
        if self._register_lock is None:
            return
        async with self._register_lock:
            await self._follow_namesrv_addr()
            if not self.namesrv_addrs:
                return
            await self._send_changes()
            version = self._full_registration_version(new_version)
            await self._send(self._registration_command(self.broker.registration(), version))

    def _registration_command(self, reg: BrokerRegistration, version: TableDataVersion) -> RemotingCommand:
        return registration_command(self.broker, reg, version, self.heartbeat_timeout_ms)

    async def _send(self, req: RemotingCommand) -> None:
        """One REGISTER_BROKER to every name server, in turn; a failure is logged."""
        for addr in self.namesrv_addrs:
                try:
                    resp = await self._conn(addr).request(RemotingCommand(req.code, ext_fields=dict(req.ext_fields),
                                                                          body=req.body), timeout=REGISTER_TIMEOUT_S)
                    if resp.code != ResponseCode.SUCCESS:
                        log.warning("register broker to name server %s failed: code %d %s", addr, resp.code,
                                    resp.remark)
                except (OSError, TimeoutError) as e:
                    log.warning("register broker to name server %s failed: %s", addr,
                                failure_reason(e, REGISTER_TIMEOUT_S))

    async def _unregister_all(self) -> None:
        cfg = self.broker.config
        header = UnRegisterBrokerRequestHeader(broker_name=cfg.broker_name, broker_addr=cfg.broker_addr,
                                               cluster_name=cfg.broker_cluster_name, broker_id=cfg.broker_id)
        for addr in self.namesrv_addrs:
            with contextlib.suppress(OSError, TimeoutError):
                await self._conn(addr).request(RemotingCommand.request(RequestCode.UNREGISTER_BROKER,
                                                                       header.to_ext_fields()), timeout=2.0)


def namesrv_addr_refusal(text: str) -> str | None:
    """Why ``text`` is no namesrvAddr a broker can register with (None: it is one): a ``;``-separated
    list of ``host:port``, at least one, as Apache's BrokerStartup requires of -n and namesrvAddr."""
    try:
        addrs = checked_addresses(text)
    except IllegalAddressError as e:
        return f"{e} (expected host:port[;host:port])"
    if not addrs:
        return "empty: the broker would register with no name server (expected host:port[;host:port])"
    return None


def effective_register_period_ms(period_ms: int) -> int:
    """registerNameServerPeriod as used: within [REGISTER_PERIOD_MIN_MS, REGISTER_PERIOD_MAX_MS], with a
    warning when the setting is outside (Apache clamps it the same way, to [10000, 60000], silently)."""
    used = min(max(period_ms, REGISTER_PERIOD_MIN_MS), REGISTER_PERIOD_MAX_MS)
    if used != period_ms:
        log.warning("registerNameServerPeriod %d ms is outside [%d, %d]: registering every %d ms", period_ms,
                    REGISTER_PERIOD_MIN_MS, REGISTER_PERIOD_MAX_MS, used)
    return used


async def _cancel_until_done(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for it, cancelling again until it ends.

    Why again: Python 3.11's asyncio.wait_for swallows a cancellation that arrives just as the awaited
    answer does (a REGISTER_BROKER reply, here), so one cancel() could be lost and ``await task`` waited
    for ever — mqbroker then ignored SIGTERM. asyncio.wait never cancels or re-raises, so it polls safely.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    if not task.cancelled() and task.exception() is not None:
        log.warning("background task %s ended with %r", task.get_name(), task.exception())


def register_broker_request(broker: Broker, heartbeat_timeout_ms: int | None) -> RemotingCommand:
    """The REGISTER_BROKER request of ``broker`` now: its identity in the header, every topic in the body."""
    return registration_command(broker, broker.registration(), broker.topic_config_data_version(),
                                heartbeat_timeout_ms)


def registration_command(broker: Broker, reg: BrokerRegistration, version: TableDataVersion,
                         heartbeat_timeout_ms: int | None) -> RemotingCommand:
    """REGISTER_BROKER of ``reg`` (every topic of ``broker``, or some) with the topic table's ``version``
    as it is (its own timestamp: Apache's name server compares all of a DataVersion, so a timestamp of
    now made every registration a changed topic table to it)."""
    # a broker that is not both readable and writable advertises its topics masked (wipeWritePerm);
    # otherwise each topic's own perm, the inherit bit included (BrokerController#registerBrokerAll)
    broker_perm = broker.config.broker_permission
    read_write = PERM_READ | PERM_WRITE
    mask = -1 if broker_perm & read_write == read_write else broker_perm
    topics = {t.topic_name: TopicConfigBody(topic_name=t.topic_name, read_queue_nums=t.read_queue_nums,
                                            write_queue_nums=t.write_queue_nums, perm=t.perm & mask,
                                            topic_sys_flag=t.topic_sys_flag, order=t.order) for t in reg.topics}
    body = RegisterBrokerBody(topic_config_serialize_wrapper=TopicConfigSerializeWrapper(
        topic_config_table=topics, data_version=DataVersion(counter=version.counter,
                                                            state_version=version.state_version,
                                                            timestamp=version.timestamp))).to_json()
    header = RegisterBrokerRequestHeader(broker_name=reg.broker_name, broker_addr=reg.broker_addr,
                                         cluster_name=reg.cluster_name, ha_server_addr=reg.ha_server_addr,
                                         broker_id=reg.broker_id, heartbeat_timeout_millis=heartbeat_timeout_ms,
                                         body_crc32=zlib.crc32(body) & 0x7FFFFFFF)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
