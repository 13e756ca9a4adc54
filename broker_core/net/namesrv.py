"""The name server (default port 9876): brokers register here, clients and mqadmin read routes (spec B.1).

Why a thin adapter: every rule lives in ``RouteInfoManager``; this module decodes the request
headers/bodies, calls it and encodes the answers. Like RocketMQ's, the name server does no
authentication (spec D.2): signed requests are simply accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from broker_core.broker.config_update import persist_changes
from broker_core.broker.errors import config_written
from broker_core.broker.kv_config import KVConfigManager
from broker_core.broker.route_info import (
    BROKER_CHANNEL_EXPIRED_TIME_MS,
    BrokerRegistration,
    RouteInfoManager,
    TopicQueueConfig,
)
from broker_core.config_loader import ConfigError, apply_properties, format_property, parse_properties
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, fastjson
from broker_core.remoting.bodies import KVTable, RegisterBrokerBody, TopicList
from broker_core.remoting.codes import V4_9_4
from broker_core.remoting.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)

from .channel import Channel
from .net_config import NetConfig
from .remoting_server import Handler, RemotingServer, RequestError, ServerConfig

log = logging.getLogger("rmqops.namesrv")

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


# NamesrvConfig's configBlackList default, and the keys DefaultRequestProcessor always refuses besides
DEFAULT_CONFIG_BLACK_LIST = "configBlackList;configStorePath;kvConfigPath"
BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"})
# Keys UPDATE_NAMESRV_CONFIG changes in the running name server (each is read where it is used)
RUNTIME_KEYS = frozenset({"scanNotActiveBrokerInterval", "enableAllTopicList", "orderMessageEnable"})
# Keys read once at start: the bound socket, the connections' limits, and brokerChannelExpiredTime, which
# in mqbroker's shared config file is also what its broker sends as heartbeatTimeoutMillis
START_ONLY_KEYS = frozenset({"listenPort", "bindAddress", "serverChannelMaxIdleTimeSeconds", "frameMaxLength",
                             "brokerChannelExpiredTime"})
# NamesrvConfig keys mqbroker reads from its -c file besides NetConfig's. Not deleteTopicWithBrokerRegistration:
# our brokers register a topic change with only the changed topics (as Apache's registerIncrementBrokerData),
# which that switch would take as "every other topic is gone" (Apache pairs it with the broker's
# enableSingleTopicRegister, which we do not have); it stays off, as Apache's default
FILE_KEYS = frozenset({"enableAllTopicList", "orderMessageEnable", "configBlackList"})


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class NamesrvConfig:
    """RocketMQ's NamesrvConfig names: how often to scan for silent brokers and when one is dead.

    Only keys this name server acts on are here (Apache's rocketmqHome, clusterTest, thread pool
    sizes... are not: getNamesrvConfig must not report a setting that changes nothing)."""

    listen_port: int = 9876
    listen_host: str = "127.0.0.1"
    scan_not_active_broker_interval: int = 5_000  # ms
    # ms; only for a broker whose REGISTER_BROKER has no heartbeatTimeoutMillis (Java's default): a
    # broker that sends one (its brokerChannelExpiredTime) expires by its own, as RocketMQ's name server
    broker_channel_expired_time: int = BROKER_CHANNEL_EXPIRED_TIME_MS
    enable_all_topic_list: bool = True
    # a route carries the topic's ORDER_TOPIC_CONFIG as orderTopicConf only with this on (Apache's default
    # off): clients take that value as the topic's queue list instead of the queues' perms, so with it a
    # wipeWritePerm'd broker would keep getting the topic's messages
    order_message_enable: bool = False
    kv_config_path: str | None = None  # kvConfig.json (Java: ~/namesrv/kvConfig.json); None keeps it in memory
    # the file updateNamesrvConfig writes (Java: ~/namesrv/namesrv.properties; here mqbroker's -c file);
    # None: changes live in the running process only
    config_store_path: str | None = None
    config_black_list: str = DEFAULT_CONFIG_BLACK_LIST

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> NamesrvConfig:
        """The NamesrvConfig keys of a config file (FILE_KEYS; NetConfig holds the scan and expiry
        intervals). A value that does not parse is ConfigError naming the key, as for every other key."""
        return apply_properties(cls, {k: v for k, v in props.items() if k in FILE_KEYS})

    def black_list(self) -> frozenset[str]:
        """The keys UPDATE_NAMESRV_CONFIG refuses: the fixed ones and ``configBlackList`` (``a;b``), as
        DefaultRequestProcessor.initConfigBlackList reads them."""
        return BLACK_LIST | {k.strip() for k in self.config_black_list.split(";") if k.strip()}


class NameServer:
    def __init__(self, config: NamesrvConfig | None = None, server_config: ServerConfig | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.routes = RouteInfoManager(_now_ms, self.config.broker_channel_expired_time)
        self.server = RemotingServer("namesrv", self._handlers(), server_config)
        self._scan: asyncio.Task[None] | None = None
        self._watched: set[str] = set()
        self.kv = KVConfigManager(self.config.kv_config_path)

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self, sock: socket.socket | None = None) -> int:
        """Serve on ``sock`` when given (already bound), else on listen_host:listen_port (0 = free port).
        The KV config is loaded first: a damaged kvConfig.json (and .bak) stops the start with its name."""
        self.kv.load()
        port = await self.server.start(self.config.listen_host, self.config.listen_port, sock=sock)
        self._scan = asyncio.get_running_loop().create_task(self._scan_loop())
        return port

    async def stop(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan
        await self.server.stop()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)
            for addr in self.routes.scan_not_active_brokers():
                log.warning("broker %s removed from routes: no registration within its heartbeatTimeoutMillis "
                            "(the broker's brokerChannelExpiredTime; %d ms when it sent none)", addr,
                            self.config.broker_channel_expired_time)

    def _on_channel_close(self, ch: Channel) -> None:
        self._watched.discard(ch.id)
        for addr in self.routes.channel_closed(ch.id):
            log.info("broker %s removed from routes: its connection closed", addr)

    def _handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
        }

    def config_properties(self) -> dict[str, str]:
        """What getNamesrvConfig shows: Apache's NamesrvConfig and NettyServerConfig keys this name server
        acts on (plus brokerChannelExpiredTime and frameMaxLength, mqbroker's own), as in use now."""
        c, server = self.config, self.server.config

        def flag(v: bool) -> str:
            return "true" if v else "false"
        return {
            "listenPort": str(self.port), "bindAddress": c.listen_host,
            "serverChannelMaxIdleTimeSeconds": f"{server.idle_timeout:g}", "frameMaxLength": str(server.frame_max_length),
            "scanNotActiveBrokerInterval": str(c.scan_not_active_broker_interval),
            "brokerChannelExpiredTime": str(self.routes.broker_channel_expired_time_ms),
            "enableAllTopicList": flag(c.enable_all_topic_list),
            "orderMessageEnable": flag(c.order_message_enable),
            "kvConfigPath": c.kv_config_path or "", "configStorePath": c.config_store_path or "",
            "configBlackList": c.config_black_list,
        }

    def _checked_changes(self, changes: Mapping[str, str]) -> dict[str, object]:
        """``changes`` as the values they set (field name -> value), or RequestError saying why the whole
        update is refused. Why NetConfig/apply_properties: a value is held to exactly the range the
        start-up holds the same key in the config file to."""
        black = sorted(self.config.black_list() & changes.keys())
        if black:  # Apache's remark, naming the keys
            raise RequestError(ResponseCode.NO_PERMISSION, f"Can not update config in black list: {', '.join(black)}.")
        unknown = sorted(changes.keys() - RUNTIME_KEYS - START_ONLY_KEYS)
        if unknown:  # Apache skips them silently; a misspelt key then "succeeded" and changed nothing
            raise RequestError(ResponseCode.INVALID_PARAMETER,
                               f"unknown name server config key {', '.join(unknown)} (getNamesrvConfig lists the keys)")
        current = self.config_properties()
        start_only = sorted(k for k in START_ONLY_KEYS & changes.keys() if changes[k].strip() != current[k])
        if start_only:  # the same value again (a round trip of getNamesrvConfig's output) is no change
            # in mqbroker's file listenPort is the name server's only with --namesrv-only (else the broker's)
            where = (" (the name server's port there is namesrvPort, or listenPort for mqbroker --namesrv-only)"
                     if "listenPort" in start_only else "")
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"{', '.join(start_only)} cannot be changed on a running name server (read once at "
                               f"start): set it in mqbroker's config file{where} or on its command line and "
                               "restart it")
        runtime = {k: changes[k] for k in RUNTIME_KEYS & changes.keys()}
        try:
            net = NetConfig.from_properties(runtime)
            own = apply_properties(NamesrvConfig, {k: v for k, v in runtime.items() if k in FILE_KEYS})
        except ConfigError as e:
            raise RequestError(ResponseCode.INVALID_PARAMETER, str(e)) from None
        out: dict[str, object] = {}
        if "scanNotActiveBrokerInterval" in runtime:
            out["scan_not_active_broker_interval"] = net.scan_not_active_broker_interval
        if "enableAllTopicList" in runtime:
            out["enable_all_topic_list"] = own.enable_all_topic_list
        if "orderMessageEnable" in runtime:
            out["order_message_enable"] = own.order_message_enable
        return out

    # -- handlers --------------------------------------------------------------------------------
    async def register_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext_fields(req.ext_fields)
        if h.body_crc32 and (zlib.crc32(req.body) & 0x7FFFFFFF) != h.body_crc32:
            return req.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if h.compressed:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "register broker failed: compressed registration bodies "
                                                          "are not supported by this name server")
        body = RegisterBrokerBody.from_json(req.body) if req.body else RegisterBrokerBody()
        wrapper = body.topic_config_serialize_wrapper
        if ch.id not in self._watched:  # a broker's connection closing drops what it registered
            self._watched.add(ch.id)
            ch.on_close(self._on_channel_close)
        topics = [TopicQueueConfig(name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag, tc.order)
                  for name, tc in wrapper.topic_config_table.items()]
        result = self.routes.register_broker(BrokerRegistration(h.cluster_name, h.broker_name, h.broker_addr,
                                                                h.broker_id, h.ha_server_addr, topics,
                                                                wrapper.data_version.counter,
                                                                h.heartbeat_timeout_millis or None), ch.id)
        resp = RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr or None,
                                            master_addr=result.master_addr or None)
        order = self.kv.namespace(ORDER_TOPIC_CONFIG)
        body_out = KVTable(table=dict(order)).to_json() if order else b""
        return req.response(ext_fields=resp.to_ext_fields(), body=body_out)

    async def unregister_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = UnRegisterBrokerRequestHeader.from_ext_fields(req.ext_fields)
        self.routes.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return req.response()

    async def get_route_info(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext_fields(req.ext_fields)
        route = self.routes.pick_topic_route(h.topic)
        if route is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {h.topic}{FAQ}")
        browser = req.version >= V4_9_4 or bool(h.accept_standard_json_only)
        obj = route.to_dict()
        # as Apache's ClientRequestProcessor: only with orderMessageEnable (read per request, so
        # updateNamesrvConfig takes effect at once); the KV item itself is kept either way
        order_conf = self.kv.get(ORDER_TOPIC_CONFIG, h.topic) if self.config.order_message_enable else None
        if order_conf:
            obj["orderTopicConf"] = order_conf
        return req.response(body=fastjson.dumps(obj, browser_compatible=browser))

    async def get_cluster_info(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=fastjson.dumps(self.routes.cluster_info().to_dict()))

    async def get_all_topic_list(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        if not self.config.enable_all_topic_list:
            return req.response(ResponseCode.SYSTEM_ERROR, "disable")
        return req.response(body=TopicList(topic_list=self.routes.topic_list()).to_json())

    async def delete_topic(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(req.ext_fields)
        self.routes.delete_topic(h.topic, h.cluster_name)
        return req.response()

    async def put_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = PutKVConfigRequestHeader.from_ext_fields(req.ext_fields)
        with config_written(f"KV config {h.namespace}/{h.key} was not put"):
            self.kv.put(h.namespace, h.key, h.value)
        return req.response()

    async def get_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = GetKVConfigRequestHeader.from_ext_fields(req.ext_fields)
        value = self.kv.get(h.namespace, h.key)
        if value is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
        return req.response(ext_fields=GetKVConfigResponseHeader(value=value).to_ext_fields())

    async def delete_kv_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = DeleteKVConfigRequestHeader.from_ext_fields(req.ext_fields)
        with config_written(f"KV config {h.namespace}/{h.key} was not deleted"):
            self.kv.delete(h.namespace, h.key)
        return req.response()

    async def get_kv_list(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        namespace = req.ext_fields.get("namespace", "")
        table = self.kv.namespace(namespace)
        if not table:
            return req.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return req.response(body=KVTable(table=dict(table)).to_json())

    async def get_topics_by_cluster(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = GetTopicsByClusterRequestHeader.from_ext_fields(req.ext_fields)
        return req.response(body=TopicList(topic_list=self.routes.topics_of_cluster(h.cluster)).to_json())

    async def wipe_write_perm_of_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_ext_fields(req.ext_fields)
        count = self.routes.operate_write_perm_of_broker(h.broker_name, wipe=True)
        log.info("wipe write perm of broker[%s], client: %s, %d", h.broker_name, ch.remote_addr, count)
        return req.response(ext_fields=WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext_fields())

    async def add_write_perm_of_broker(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        h = AddWritePermOfBrokerRequestHeader.from_ext_fields(req.ext_fields)
        count = self.routes.operate_write_perm_of_broker(h.broker_name, wipe=False)
        log.info("add write perm of broker[%s], client: %s, %d", h.broker_name, ch.remote_addr, count)
        return req.response(ext_fields=AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext_fields())

    async def update_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: the body's ``key=value`` lines, all taken or none. Written to the config
        file first (configStorePath, as Apache's Configuration.persist; here the -c file, its other lines
        kept), so a write that fails changes nothing, then set on the running name server."""
        try:
            entries = parse_properties(req.body.decode("utf-8"), "the request body") if req.body else []
        except (UnicodeDecodeError, ConfigError) as e:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {e}") from None
        changes = {e.key: e.value.strip() for e in entries}
        if not changes:
            return req.response()
        values = self._checked_changes(changes)
        kept = {k: v for k, v in changes.items() if k in RUNTIME_KEYS}  # never a start-only key given again:
        if self.config.config_store_path and kept:  # in a shared -c file listenPort is the broker's
            path = Path(self.config.config_store_path)
            with config_written(f"name server config {', '.join(sorted(changes))} was not updated"):
                try:
                    persist_changes(path, kept)
                except OSError as e:
                    raise RequestError(ResponseCode.SYSTEM_ERROR, f"cannot write {path}: {e.strerror or e}; "
                                       f"name server config {', '.join(sorted(changes))} was not updated") from None
        for field, value in values.items():
            setattr(self.config, field, value)
        log.info("updateConfig called by %s: %s", ch.remote_addr, changes)
        return req.response()

    async def get_config(self, ch: Channel, req: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG: the settings as properties text, sorted by key (MixAll.properties2String)."""
        text = "".join(f"{format_property(k, v)}\n" for k, v in sorted(self.config_properties().items()))
        return req.response(body=text.encode("utf-8"))
