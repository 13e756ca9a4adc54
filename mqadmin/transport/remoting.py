"""RemotingBrokerClient: the BrokerClient transport over TCP — a name server and its brokers (``-n``).

Why it is thin: every method is one RocketMQ request (the code is in ``BrokerClient``'s docstring)
sent with our remoting client (``broker_core.client``) and its answer turned into the transport's
value types; the operator logic stays in the one Admin. Requests are signed when credentials are
configured (``--ak/--sk``, ``ROCKETMQ_ACCESS_KEY``/``ROCKETMQ_SECRET_KEY``, or
``$ROCKETMQ_HOME/conf/tools.yml``). Broker refusals become ``mqadmin.errors`` exceptions carrying
the broker's remark, so the CLI prints the same one line as on ``--store``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from broker_core.auth.converter import acl_from_info, acl_to_info, user_from_info
from broker_core.auth.errors import AuthMetadataError
from broker_core.auth.model import Acl, User
from broker_core.broker import route_info
from broker_core.broker.stats import StatsWindow
from broker_core.client.connection import RemotingConnectError, RemotingError
from broker_core.client.credentials import SessionCredentials
from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message, MessageCheckError, decode_records
from broker_core.client.producer import Producer
from broker_core.client.sync_bridge import LoopThread
from broker_core.config_loader import ConfigError, format_property, parse_properties
from broker_core.remoting import CommandHeader, RemotingCommand, RequestCode, ResponseCode, fastjson
from broker_core.remoting.bodies import (
    BrokerStatsData,
    ClusterInfo,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    CreateTopicListRequestBody,
    GetConsumerStatusBody,
    GroupList,
    KVTable,
    MessageQueue,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    SetMessageRequestModeRequestBody,
    SubscriptionGroupList,
    SubscriptionGroupWrapper,
    TopicConfigAndMappingSerializeWrapper,
    TopicConfigBody,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
)
from broker_core.remoting.bodies import (
    ConsumerConnection as ConsumerConnectionBody,
)
from broker_core.remoting.bodies import (
    ProducerConnection as ProducerConnectionBody,
)
from broker_core.remoting.body_base import BodyError
from broker_core.remoting.headers import (
    GET_BROKER_CONFIG_NEXT_START,
    AclRequestHeader,
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteAclRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetMaxOffsetRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetRouteInfoRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PutKVConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicQueueRequestHeader,
    TopicRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    UserRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from broker_core.store.codec.message import RecordError
from broker_core.store.subscription_group_config import SubscriptionGroupConfig
from mqadmin.errors import AdminError, NotFoundError, UnreachableError, UsageProblem, refusal
from mqadmin.records import to_record
from mqadmin.transport.base import (
    BrokerConsumeStatsView,
    ClientConnection,
    ConsumeQueueStats,
    ConsumeQueueView,
    ConsumerConnection,
    ConsumeStatsView,
    CqEntry,
    MessageRecord,
    QueueRead,
    QueueStatus,
    SendResult,
    SubscriptionEntry,
    SubscriptionGroupInfo,
    TopicInfo,
    TopicStatus,
)

T = TypeVar("T")

TOOLS_CONSUMER = "TOOLS_CONSUMER"
SEND_GROUP = "mqadmin_send_group"
DEFAULT_TOPIC = "TBW102"
_NOT_FOUND_CODES = {ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    ResponseCode.QUERY_NOT_FOUND, ResponseCode.NO_MESSAGE}
# PULL response codes -> the GetMessageStatus name when the broker's remark does not carry it
_PULL_STATUS = {ResponseCode.SUCCESS: "FOUND", ResponseCode.PULL_NOT_FOUND: "OFFSET_OVERFLOW_ONE",
                ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MESSAGE",
                ResponseCode.PULL_OFFSET_MOVED: "OFFSET_OVERFLOW_BADLY"}
_PULL_FLAG_SUBSCRIPTION = 0x4


def signed_attributes(attrs: Mapping[str, str]) -> str | None:
    """mqadmin's signed changes (``{"+queue.type": "BatchCQ", "-k": ""}``) as the header string."""
    parts = []
    for key, value in attrs.items():
        if key.startswith("-"):
            parts.append(key)
        else:
            name = key if key.startswith("+") else "+" + key
            parts.append(f"{name}={value}")
    return ",".join(parts) or None


def _check_broker_addr(addr: str) -> None:
    """A broker address (-b) that is not ``host:port`` is the operator's typo: a usage error (exit 2)
    before connecting, as a malformed -n is, not a broker that "cannot be reached"."""
    from broker_core.net.outbound import IllegalAddressError, parse_address

    try:
        parse_address(addr)
    except IllegalAddressError as e:
        raise UsageProblem(f"-b: broker address {e} (expected host:port)") from None


def _naming_mix_up(resp: RemotingCommand, who: str, hint: str) -> RemotingCommand:
    """A server that does not know the request at all was most likely given to the wrong option (a
    broker's address as -n, a name server's as -b): its bare remark (" request type 106 not
    supported") names neither the address nor the likely mix-up, so the remark gains both."""
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        said = (resp.remark or f"request type {resp.code} not supported").strip()
        resp.remark = f"{said} by {who}: {hint}"
    return resp


def _query_hit(record: MessageRecord, key: str, unique_key: bool) -> bool:
    """MQAdminImpl.queryMessage's check of each record the index answered: the index works by hash, so a
    broker may answer records of another key (a collision); only the msgId (UNIQ_KEY, else offset id)
    equal to ``key``, or a KEYS token equal to it, counts."""
    if unique_key:
        return (record.uniq_key or record.msg_id) == key
    return key in (record.properties.get("KEYS") or "").split(" ")


class RemotingBrokerClient:
    """BrokerClient over the remoting protocol (see ``mqadmin.transport.base``)."""

    def __init__(self, namesrv_addr: str, credentials: SessionCredentials | None = None,
                 timeout: float = 5.0) -> None:
        self._namesrv = namesrv_addr
        self._timeout = timeout
        self._loop = LoopThread("mqadmin-remoting")
        self._credentials = credentials
        self._instance = MQClientInstance(namesrv_addr, credentials=credentials, request_timeout=timeout)
        self._producer: Producer | None = None

    @property
    def target(self) -> str:
        return f"name server {self._namesrv}"

    def close(self, failed: bool = False) -> None:
        async def shutdown() -> None:
            if self._producer is not None:
                await self._producer.shutdown()
                if self._producer.instance is not self._instance:
                    await self._producer.instance.shutdown()
            await self._instance.shutdown()
        try:
            self._loop.run(shutdown(), timeout=10)
        except (RemotingError, BrokerError, TimeoutError):
            pass
        finally:
            self._loop.close()

    # ----------------------------------------------------------------------------------- plumbing
    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None, tries: int = 1) -> T:
        """Run one request; ``tries``: how many servers it may wait on in turn (each up to the request
        timeout), so the outer wait is only a safety net that never cuts the last one short."""
        started = time.monotonic()
        try:
            return self._loop.run(coro, timeout=(timeout or self._timeout) * tries + 5.0)
        except RemotingError as e:
            raise UnreachableError(str(e) + self._waited_note(started, timeout, tries)) from None
        except BrokerError as e:
            raise self._error(e.code, e.remark) from None
        except TimeoutError:  # the message states the wait as it was, not as it was meant to be
            raise UnreachableError(f"no answer from {self.target} within "
                                   f"{time.monotonic() - started:.0f}s") from None

    def _waited_note(self, started: float, timeout: float | None, tries: int) -> str:
        """``; waited 10s in all`` when a request waited on several name servers in turn: the error
        names the last one's timeout only, and the operator waited for them all."""
        waited = time.monotonic() - started
        return f"; waited {waited:.0f}s in all" if tries > 1 and waited > (timeout or self._timeout) + 1.0 else ""

    @staticmethod
    def _error(code: int, remark: str | None) -> AdminError:
        text = remark or f"request failed with code {code}"
        return NotFoundError(text) if code in _NOT_FOUND_CODES else refusal(text, code == ResponseCode.NO_PERMISSION)

    def _call(self, addr: str | None, code: int, header: CommandHeader | None = None, body: bytes = b"",
              ext: dict[str, str] | None = None, timeout: float | None = None) -> RemotingCommand:
        """One request to a broker (or to the name server when ``addr`` is None); any answer is returned."""
        inst = self._instance
        if addr is None:
            resp = self._run(inst.invoke_namesrv(code, header, body, timeout, ext), timeout,
                             tries=len(inst.namesrv_addrs))
            return _naming_mix_up(resp, f"name server {';'.join(inst.namesrv_addrs)}",
                                  "is that a broker's address? -n takes a name server's")
        _check_broker_addr(addr)
        resp = self._run(inst.invoke(addr, code, header, body, timeout, ext), timeout)
        return _naming_mix_up(resp, addr, "is that a name server's address? -b takes a broker's")

    def _ok(self, resp: RemotingCommand, *accept: int) -> RemotingCommand:
        if resp.code not in (accept or (ResponseCode.SUCCESS,)):
            raise self._error(resp.code, resp.remark)
        return resp

    @staticmethod
    def _body(cls: type[T], resp: RemotingCommand) -> T:
        try:
            return cls.from_json(resp.body)  # type: ignore[attr-defined,no-any-return]
        except BodyError as e:
            raise AdminError(f"undecodable {cls.__name__} from the server: {e}") from None

    @staticmethod
    def _json(resp: RemotingCommand) -> Any:
        try:
            return fastjson.loads(resp.body)
        except ValueError as e:
            raise AdminError(f"undecodable JSON body from the server: {e}") from None

    @staticmethod
    def _records(resp: RemotingCommand, unwrap: bool = True) -> list[MessageRecord]:
        """``unwrap``: a pull's BatchCQ inner batch as its messages; a view or query shows the record itself."""
        try:
            # decompress=False: to_record inflates the body itself
            return [to_record(m) for m in decode_records(resp.body, decompress=False, unwrap=unwrap)]
        except RecordError as e:
            raise AdminError(f"undecodable message record from the server: {e}") from None

    # ----------------------------------------------------------------------------------- name server
    def cluster_info(self) -> route_info.ClusterInfo:
        body = self._body(ClusterInfo, self._ok(self._call(None, RequestCode.GET_BROKER_CLUSTER_INFO)))
        return route_info.ClusterInfo(
            broker_addr_table={name: route_info.BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs),
                                                           b.enable_acting_master)
                               for name, b in body.broker_addr_table.items()},
            cluster_addr_table={c: sorted(names) for c, names in body.cluster_addr_table.items()})

    def topic_route(self, topic: str) -> route_info.TopicRouteData | None:
        resp = self._call(None, RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic))
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        body = self._body(TopicRouteData, self._ok(resp))
        return route_info.TopicRouteData(
            queue_datas=[route_info.QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm,
                                              q.topic_sys_flag) for q in body.queue_datas],
            broker_datas=[route_info.BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs), b.enable_acting_master)
                          for b in body.broker_datas],
            filter_server_table={k: list(v) for k, v in body.filter_server_table.items()},
            order_topic_conf=body.order_topic_conf)

    def all_topic_list(self) -> list[str]:
        body = self._body(TopicList, self._ok(self._call(None, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)))
        return sorted(body.topic_list)

    def delete_topic_in_namesrv(self, topic: str, cluster_name: str) -> None:
        self._change_each_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                  DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster_name))

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        self._change_each_namesrv(RequestCode.PUT_KV_CONFIG,
                                  PutKVConfigRequestHeader(namespace=namespace, key=key, value=value))

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        resp = self._call(None, RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace=namespace, key=key))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return GetKVConfigResponseHeader.from_ext_fields(self._ok(resp).ext_fields).value

    def delete_kv_config(self, namespace: str, key: str) -> None:
        self._change_each_namesrv(RequestCode.DELETE_KV_CONFIG,
                                  DeleteKVConfigRequestHeader(namespace=namespace, key=key))

    def _change_each_namesrv(self, code: int, header: CommandHeader) -> None:
        """A change of name server data sent to EVERY name server of ``-n a;b``, as Apache's
        putKVConfigValue / deleteKVConfigValue / deleteTopicInNameServer send it: name servers share
        nothing, so a change made on whichever answers first leaves the others serving the old data.
        As there, a name server that cannot be reached stops the change at once, and a refusal is
        raised once the others have had the request; the failure names where it was made already."""
        done: list[str] = []
        refused: AdminError | None = None
        for addr in self._instance.namesrv_addrs:
            try:
                resp = self._call_namesrv(addr, code, header)
            except AdminError as e:
                raise self._changed_only_on(e, done) from None
            if resp.code == ResponseCode.SUCCESS:
                done.append(addr)
            elif refused is None:
                refused = self._error(resp.code, resp.remark)
        if refused is not None:
            raise self._changed_only_on(refused, done)

    @staticmethod
    def _changed_only_on(error: AdminError, done: list[str]) -> AdminError:
        """``error`` also naming the name servers that did take the change (an operator must know
        which ones now disagree before running the command again)."""
        return error.noting(f"changed only on name server {', '.join(done)}") if done else error

    def namesrv_addrs(self) -> list[str]:
        return list(self._instance.namesrv_addrs)

    def operate_write_perm_of_broker(self, namesrv_addr: str, broker_name: str, wipe: bool) -> int:
        if wipe:
            resp = self._ok(self._call_namesrv(namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                               WipeWritePermOfBrokerRequestHeader(broker_name=broker_name)))
            return WipeWritePermOfBrokerResponseHeader.from_ext_fields(resp.ext_fields).wipe_topic_count
        resp = self._ok(self._call_namesrv(namesrv_addr, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                           AddWritePermOfBrokerRequestHeader(broker_name=broker_name)))
        return AddWritePermOfBrokerResponseHeader.from_ext_fields(resp.ext_fields).add_topic_count

    def get_namesrv_config(self, namesrv_addr: str) -> dict[str, str]:
        resp = self._ok(self._call_namesrv(namesrv_addr, RequestCode.GET_NAMESRV_CONFIG, None))
        try:
            return {e.key: e.value for e in parse_properties(resp.body.decode("utf-8"), "the name server's answer")}
        except (UnicodeDecodeError, ConfigError) as e:
            raise AdminError(f"undecodable config from name server {namesrv_addr}: {e}") from None

    def update_namesrv_config(self, namesrv_addr: str, properties: dict[str, str]) -> None:
        body = "".join(f"{format_property(k, v)}\n" for k, v in properties.items()).encode("utf-8")
        self._ok(self._call_namesrv(namesrv_addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, body))

    def _call_namesrv(self, namesrv_addr: str, code: int, header: CommandHeader | None,
                      body: bytes = b"") -> RemotingCommand:
        """One request to one given name server (``_call(None, ...)`` asks whichever answers)."""
        try:
            return self._loop.run(self._instance.invoke(namesrv_addr, code, header, body),
                                  timeout=self._timeout + 5.0)
        except RemotingConnectError as e:
            raise UnreachableError(f"cannot connect to name server {e.addr}: {e.reason}") from None
        except RemotingError as e:
            raise UnreachableError(str(e)) from None
        except TimeoutError:
            raise UnreachableError(f"no answer from name server {namesrv_addr} within {self._timeout:.0f}s") from None

    # ----------------------------------------------------------------------------------- topics
    @staticmethod
    def _topic_info(tc: TopicConfigBody) -> TopicInfo:
        return TopicInfo(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type,
                         tc.topic_sys_flag, tc.order, dict(tc.attributes))

    def get_all_topic_config(self, broker_addr: str) -> list[TopicInfo]:
        body = self._body(TopicConfigAndMappingSerializeWrapper,
                          self._ok(self._call(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)))
        return [self._topic_info(tc) for _, tc in sorted(body.topic_config_table.items())]

    def get_topic_config(self, broker_addr: str, topic: str) -> TopicInfo | None:
        resp = self._call(broker_addr, RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(topic=topic))
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return self._topic_info(self._body(TopicConfigBody, self._ok(resp)))

    def update_and_create_topic(self, broker_addr: str, topic: TopicInfo) -> TopicInfo:
        header = CreateTopicRequestHeader(
            topic=topic.topic_name, default_topic=DEFAULT_TOPIC, read_queue_nums=topic.read_queue_nums,
            write_queue_nums=topic.write_queue_nums, perm=topic.perm, topic_filter_type=topic.topic_filter_type,
            order=topic.order, topic_sys_flag=topic.topic_sys_flag, attributes=signed_attributes(topic.attributes))
        self._ok(self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header))
        stored = self.get_topic_config(broker_addr, topic.topic_name)
        if stored is None:
            raise AdminError(f"topic {topic.topic_name} was not found on {broker_addr} after creating it")
        return stored

    def update_and_create_topic_list(self, broker_addr: str, topics: Sequence[TopicInfo]) -> None:
        """The body's attributes are the signed changes themselves (``{"+queue.type": "BatchCQ"}``), as
        Apache's updateTopicList sends the file's."""
        body = CreateTopicListRequestBody(topic_config_list=[TopicConfigBody(
            topic_name=t.topic_name, read_queue_nums=t.read_queue_nums, write_queue_nums=t.write_queue_nums,
            perm=t.perm, topic_filter_type=t.topic_filter_type, topic_sys_flag=t.topic_sys_flag, order=t.order,
            attributes={k if k.startswith(("+", "-")) else "+" + k: v for k, v in t.attributes.items()})
            for t in topics])
        self._ok(self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, body.to_json()))

    def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        self._ok(self._call(broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic)))

    def topic_stats(self, broker_addr: str, topic: str) -> TopicStatus:
        resp = self._ok(self._call(broker_addr, RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic=topic)))
        table = self._body(TopicStatsTable, resp)
        return TopicStatus([QueueStatus(mq.broker_name, mq.queue_id, o.min_offset, o.max_offset,
                                        o.last_update_timestamp) for mq, o in sorted(table.offset_table.items())],
                           table.topic_put_tps)

    def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int, index: int,
                            count: int) -> ConsumeQueueView:
        header = QueryConsumeQueueRequestHeader(topic=topic, queue_id=queue_id, index=index, count=count)
        resp = self._ok(self._call(broker_addr, RequestCode.QUERY_CONSUME_QUEUE, header))
        if not resp.body and resp.remark:
            # A Java broker answers an index with no unit SUCCESS, "Index N of Q@T is not exist!" and no
            # body (ours refuses it with that remark): either way the index is not found.
            raise NotFoundError(resp.remark)
        body = self._body(QueryConsumeQueueResponseBody, resp)
        return ConsumeQueueView(body.min_queue_index, body.max_queue_index,
                                [CqEntry(d.physic_offset, d.physic_size, d.tags_code) for d in body.queue_data])

    def query_topic_consume_by_who(self, broker_addr: str, topic: str) -> list[str]:
        resp = self._ok(self._call(broker_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, TopicRequestHeader(topic=topic)))
        return sorted(self._body(GroupList, resp).group_list)

    # ----------------------------------------------------------------------------------- groups
    def get_all_subscription_group(self, broker_addr: str) -> list[SubscriptionGroupInfo]:
        body = self._body(SubscriptionGroupWrapper,
                          self._ok(self._call(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)))
        return [SubscriptionGroupInfo.of_config(SubscriptionGroupConfig.from_json(name, dict(obj)))
                for name, obj in sorted(body.subscription_group_table.items())]

    def get_subscription_group(self, broker_addr: str, group: str) -> SubscriptionGroupInfo | None:
        resp = self._call(broker_addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                          GetSubscriptionGroupConfigRequestHeader(group=group))
        if resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            return None
        obj = self._json(self._ok(resp))
        if not isinstance(obj, dict):
            raise AdminError("undecodable SubscriptionGroupConfig from the server")
        return SubscriptionGroupInfo.of_config(SubscriptionGroupConfig.from_json(group, obj))

    def update_and_create_subscription_group(self, broker_addr: str, config: SubscriptionGroupInfo) -> None:
        """The body is the whole SubscriptionGroupConfig, its attributes the signed changes (see base)."""
        obj = {k: v for k, v in config.to_config().to_json().items() if v is not None}
        self._ok(self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, fastjson.dumps(obj)))

    def update_and_create_subscription_group_list(self, broker_addr: str,
                                                  configs: Sequence[SubscriptionGroupInfo]) -> None:
        """Each entry is the body update_and_create_subscription_group sends for its one."""
        body = SubscriptionGroupList(group_config_list=[
            {k: v for k, v in c.to_config().to_json().items() if v is not None} for c in configs])
        self._ok(self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, None, body.to_json()))

    def delete_subscription_group(self, broker_addr: str, group: str, clean_offset: bool) -> bool:
        from broker_core.net.handlers_admin import GROUP_DELETED_FIELD

        resp = self._ok(self._call(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                   DeleteSubscriptionGroupRequestHeader(group_name=group, clean_offset=clean_offset)))
        return (resp.ext_fields or {}).get(GROUP_DELETED_FIELD) != "false"

    def consume_stats(self, broker_addr: str, group: str, topic: str | None = None) -> ConsumeStatsView:
        resp = self._ok(self._call(broker_addr, RequestCode.GET_CONSUME_STATS,
                                   GetConsumeStatsRequestHeader(consumer_group=group, topic=topic), timeout=15.0))
        stats = self._body(ConsumeStats, resp)
        rows = []
        for mq, o in sorted(stats.offset_table.items()):
            consumer = o.consumer_offset
            if consumer == 0:
                # the wire writes "never committed" as 0 (OffsetWrapper); ask to tell the two apart
                consumer = self.query_consumer_offset(broker_addr, group, mq.topic, mq.queue_id)
            pull = o.pull_offset
            rows.append(ConsumeQueueStats(mq.topic, mq.broker_name, mq.queue_id, o.broker_offset, consumer,
                                          pull, max(pull - max(consumer, 0), 0), o.last_timestamp))
        return ConsumeStatsView(rows, stats.consume_tps)

    def broker_consume_stats(self, broker_addr: str, is_order: bool,
                             timeout: float | None = None) -> BrokerConsumeStatsView:
        """One request, as Apache's fetchConsumeStatsInBroker (15 s unless ``timeout``, as
        consume_stats). A consumer offset of 0 is kept as it comes: telling "never committed" apart
        would cost a request a queue, which the one request is there to avoid."""
        resp = self._ok(self._call(broker_addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                   GetConsumeStatsInBrokerHeader(is_order=is_order), timeout=timeout or 15.0))
        body = self._body(ConsumeStatsList, resp)
        groups = []
        for entry in body.consume_stats_list:
            for group, per_topic in entry.items():
                groups.append((group, [ConsumeStatsView(
                    [ConsumeQueueStats(mq.topic, mq.broker_name, mq.queue_id, o.broker_offset, o.consumer_offset,
                                       o.pull_offset, max(o.pull_offset - max(o.consumer_offset, 0), 0),
                                       o.last_timestamp) for mq, o in sorted(stats.offset_table.items())],
                    stats.consume_tps) for stats in per_topic]))
        return BrokerConsumeStatsView(groups, body.total_diff, body.total_inflight_diff)

    def consumer_connection(self, broker_addr: str, group: str) -> ConsumerConnection | None:
        resp = self._call(broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                          GetConsumerConnectionListRequestHeader(consumer_group=group))
        if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        body = self._body(ConsumerConnectionBody, self._ok(resp))
        return ConsumerConnection(
            group=group, consume_type=body.consume_type or "", message_model=body.message_model or "",
            consume_from_where=body.consume_from_where or "",
            connections=sorted((ClientConnection(c.client_id, c.client_addr, c.language, c.version)
                                for c in body.connection_set), key=lambda c: c.client_id),
            subscriptions=[SubscriptionEntry(s.topic, s.sub_string, s.expression_type)
                           for _, s in sorted(body.subscription_table.items())])

    def producer_connection(self, broker_addr: str, group: str) -> list[ClientConnection]:
        resp = self._call(broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                          GetProducerConnectionListRequestHeader(producer_group=group))
        if resp.code == ResponseCode.SYSTEM_ERROR and "not exist" in (resp.remark or ""):
            return []  # the broker's answer when no producer of the group is online
        body = self._body(ProducerConnectionBody, self._ok(resp))
        return sorted((ClientConnection(c.client_id, c.client_addr, c.language, c.version)
                       for c in body.connection_set), key=lambda c: c.client_id)

    def consumer_running_info(self, broker_addr: str, group: str, client_id: str,
                              jstack: bool = False) -> ConsumerRunningInfo:
        header = GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id, jstack_enable=jstack)
        resp = self._call(broker_addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header, timeout=15.0)
        if resp.code == ResponseCode.SYSTEM_ERROR and "not online" in (resp.remark or ""):
            raise NotFoundError(resp.remark or f"The Consumer <{group}> <{client_id}> not online")
        return self._body(ConsumerRunningInfo, self._ok(resp))

    def consumer_status(self, broker_addr: str, group: str, topic: str,
                        client_id: str | None = None) -> dict[str, dict[tuple[str, int], int]]:
        header = GetConsumerStatusRequestHeader(topic=topic, group=group, client_addr=client_id or "")
        resp = self._call(broker_addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, header, timeout=15.0)
        if resp.code == ResponseCode.SYSTEM_ERROR and "No Any Consumer online" in (resp.remark or ""):
            raise NotFoundError(resp.remark or f"No Any Consumer online in the consumer group: [{group}]")
        body = self._body(GetConsumerStatusBody, self._ok(resp))
        return {cid: {(mq.broker_name, mq.queue_id): off for mq, off in sorted(table.items())}
                for cid, table in sorted(body.consumer_table.items())}

    def consume_message_directly(self, broker_addr: str, group: str, client_id: str, topic: str,
                                 offset_msg_id: str) -> ConsumeMessageDirectlyResult:
        header = ConsumeMessageDirectlyResultRequestHeader(consumer_group=group, client_id=client_id,
                                                           msg_id=offset_msg_id, topic=topic)
        resp = self._call(broker_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, timeout=20.0)
        if resp.code == ResponseCode.SYSTEM_ERROR and "not online" in (resp.remark or ""):
            raise NotFoundError(resp.remark or f"The Consumer <{group}> <{client_id}> not online")
        return self._body(ConsumeMessageDirectlyResult, self._ok(resp))

    # ----------------------------------------------------------------------------------- offsets
    def query_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int) -> int:
        resp = self._call(broker_addr, RequestCode.QUERY_CONSUMER_OFFSET,
                          QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                           set_zero_if_not_found=False))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return OffsetResponseHeader.from_ext_fields(self._ok(resp).ext_fields).offset

    def _offset(self, broker_addr: str, code: int, header: CommandHeader) -> int:
        resp = self._ok(self._call(broker_addr, code, header))
        return OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset

    def get_min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        return self._offset(broker_addr, RequestCode.GET_MIN_OFFSET, TopicQueueRequestHeader(topic=topic, queue_id=queue_id))

    def get_max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        return self._offset(broker_addr, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id))

    def search_offset(self, broker_addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        return self._offset(broker_addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                            SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp))

    def reset_offset(self, broker_addr: str, group: str, topic: str, timestamp: int, force: bool,
                     queue_id: int = -1, offset: int | None = None) -> dict[int, int] | None:
        """One request for the whole topic, carrying the real timestamp: a broker in client mode builds
        its consumers' table from the timestamp alone (Broker2Client.resetOffset), so a request per
        queue with timestamp 0 rewound every live consumer to the start of every queue, once per queue."""
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=force,
                                          queue_id=queue_id, offset=offset)
        resp = self._call(broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        if resp.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        if not self._ok(resp).body:
            return {}
        table = self._body(ResetOffsetBody, resp).offset_table
        return {mq.queue_id: off for mq, off in sorted(table.items(), key=lambda e: e[0].queue_id) if mq.topic == topic}

    def commit_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                                   commit_offset=offset)
        self._ok(self._call(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, header))

    def clone_group_offset(self, broker_addr: str, src_group: str, dest_group: str, topic: str) -> None:
        """CLONE_GROUP_OFFSET; a broker without it gets what Apache mqadmin itself sends: the source
        group's stored offsets (GET_CONSUME_STATS) copied with UPDATE_CONSUMER_OFFSET per queue."""
        header = CloneGroupOffsetRequestHeader(src_group=src_group, dest_group=dest_group, topic=topic, offline=False)
        resp = self._call(broker_addr, RequestCode.CLONE_GROUP_OFFSET, header)
        if resp.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            self._ok(resp)
            return
        for row in self.consume_stats(broker_addr, src_group, topic).rows:
            if row.consumer_offset >= 0:
                header = UpdateConsumerOffsetRequestHeader(consumer_group=dest_group, topic=row.topic,
                                                           queue_id=row.queue_id, commit_offset=row.consumer_offset)
                self._ok(self._call(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, header))

    # ----------------------------------------------------------------------------------- messages
    def query_message(self, broker_addr: str, topic: str, key: str, max_num: int, begin_timestamp: int,
                      end_timestamp: int, unique_key: bool = False) -> list[MessageRecord]:
        header = QueryMessageRequestHeader(topic=topic, key=key, max_num=max_num, begin_timestamp=begin_timestamp,
                                           end_timestamp=end_timestamp)
        resp = self._call(broker_addr, RequestCode.QUERY_MESSAGE, header,
                          ext={"_UNIQUE_KEY_QUERY": "true" if unique_key else "false"}, timeout=15.0)
        if resp.code in (ResponseCode.QUERY_NOT_FOUND, ResponseCode.NO_MESSAGE):
            return []
        return [r for r in self._records(self._ok(resp), unwrap=False) if _query_hit(r, key, unique_key)]

    def view_message(self, broker_addr: str, commit_log_offset: int) -> MessageRecord | None:
        resp = self._call(broker_addr, RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=commit_log_offset))
        if resp.code == ResponseCode.SYSTEM_ERROR and (resp.remark or "").startswith("can not find message"):
            return None
        records = self._records(self._ok(resp), unwrap=False)
        return records[0] if records else None

    def read_queue(self, broker_addr: str, topic: str, queue_id: int, offset: int, max_num: int,
                   sub_expression: str = "*") -> QueueRead:
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_num,
            sys_flag=_PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
            subscription=sub_expression or "*", expression_type="TAG")
        resp = self._call(broker_addr, RequestCode.PULL_MESSAGE, header)
        if resp.code not in _PULL_STATUS:
            raise self._error(resp.code, resp.remark)
        h = PullMessageResponseHeader.from_ext_fields(resp.ext_fields)
        status = resp.remark if resp.remark and resp.remark.isupper() else _PULL_STATUS[resp.code]
        msgs = self._records(resp) if resp.code == ResponseCode.SUCCESS else []
        return QueueRead(status, h.next_begin_offset, h.min_offset, h.max_offset, msgs)

    def send_message(self, topic: str, body: bytes, properties: dict[str, str], broker_name: str | None = None,
                     queue_id: int | None = None, producer_group: str | None = None,
                     unit_name: str | None = None, msg_trace: bool = False) -> SendResult:
        props = dict(properties)
        msg = Message(topic, body, properties=props)
        group = producer_group or SEND_GROUP

        async def send() -> SendResult:
            if self._producer is not None and (self._producer.group, self._producer.instance.unit_name,
                                               self._producer.trace is not None) != (group, unit_name, msg_trace):
                await self._producer.shutdown()
                if self._producer.instance is not self._instance:
                    await self._producer.instance.shutdown()
                self._producer = None
            if self._producer is None:
                inst = self._instance
                if unit_name:  # a client id of its own: ip@instance@unit
                    inst = MQClientInstance(self._namesrv, credentials=self._credentials,
                                            request_timeout=self._timeout, unit_name=unit_name)
                self._producer = Producer(group, inst, enable_msg_trace=msg_trace)
                await self._producer.start()
            mq = None
            if broker_name is not None:
                mq = MessageQueue(topic=topic, broker_name=broker_name, queue_id=queue_id or 0)
                await self._instance.get_route(topic)
            try:
                r = await self._producer.send(msg, mq)
            except MessageCheckError as e:  # refused before sending: one line, as the broker's refusals
                raise AdminError(e.message) from None
            await self._wait_dispatched(r.message_queue, r.queue_offset)
            return SendResult(r.message_queue.broker_name, r.message_queue.queue_id, r.status.value, r.msg_id,
                              r.offset_msg_id, r.queue_offset)

        return self._run(send())

    async def _wait_dispatched(self, mq: MessageQueue, queue_offset: int, timeout: float = 3.0) -> None:
        """The broker answers a send once the commitlog has it; its consume queue follows shortly
        (reput). Wait for that, as the in-process transport does, so the next command (topicStatus,
        consumeMessage...) sees the message: sendMessage has the same effect on -n as on --store."""
        addr = self._instance.broker_addr(mq.broker_name)
        if addr is None:
            return
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            resp = await self._instance.invoke(addr, RequestCode.GET_MAX_OFFSET, header)
            if resp.code != ResponseCode.SUCCESS or \
                    OffsetResponseHeader.from_ext_fields(resp.ext_fields).offset > queue_offset:
                return
            await asyncio.sleep(0.01)

    def set_message_request_mode(self, broker_addr: str, topic: str, group: str, mode: str,
                                 pop_share_queue_num: int) -> None:
        body = SetMessageRequestModeRequestBody(topic=topic, consumer_group=group, mode=mode,
                                                pop_share_queue_num=pop_share_queue_num)
        self._ok(self._call(broker_addr, RequestCode.SET_MESSAGE_REQUEST_MODE, body=body.to_json()))

    def view_broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str
                               ) -> tuple[StatsWindow, StatsWindow, StatsWindow] | None:
        resp = self._call(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA,
                          ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key))
        if resp.code == ResponseCode.SYSTEM_ERROR and "not exist" in (resp.remark or ""):
            return None
        data = self._body(BrokerStatsData, self._ok(resp))
        return tuple(StatsWindow(i.sum, i.tps, i.avgpt)  # type: ignore[return-value]
                     for i in (data.stats_minute, data.stats_hour, data.stats_day))

    # ----------------------------------------------------------------------------------- maintenance
    def clean_expired_consume_queue(self, broker_addr: str) -> str:
        return self._ok(self._call(broker_addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, timeout=30.0)).remark or ""

    def delete_expired_commit_log(self, broker_addr: str) -> str:
        return self._ok(self._call(broker_addr, RequestCode.DELETE_EXPIRED_COMMITLOG, timeout=30.0)).remark or ""

    def clean_unused_topic(self, broker_addr: str) -> str:
        return self._ok(self._call(broker_addr, RequestCode.CLEAN_UNUSED_TOPIC, timeout=30.0)).remark or ""

    # ----------------------------------------------------------------------------------- broker
    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = self._ok(self._call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO))
        return dict(self._body(KVTable, resp).table)

    def broker_config(self, broker_addr: str, next_start: bool = False) -> dict[str, str]:
        ext = {GET_BROKER_CONFIG_NEXT_START: "true"} if next_start else None
        resp = self._ok(self._call(broker_addr, RequestCode.GET_BROKER_CONFIG, ext=ext))
        out: dict[str, str] = {}
        for line in resp.body.decode("utf-8", errors="replace").splitlines():
            line = line.strip()
            if line and line[0] not in "#!":
                key, _, value = line.partition("=")
                out[key.strip()] = value.strip()
        return out

    def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> None:
        # the body is key=value lines: a line break inside a key or value would set keys of its own
        # ("05\nfileReservedTime=1" changed two keys and passed by the unknown-key check); refused,
        # nothing sent. Every separator str.splitlines knows, as the broker splits the body with it.
        for k, v in properties.items():
            for what, text in ((f"key {k!r}", k), (f"value of {k!r}", v)):
                if len(f"{text}.".splitlines()) != 1:
                    raise UsageProblem(f"broker config {what} has a line break: the broker would read "
                                       "what follows it as a key of its own")
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode("utf-8")
        self._ok(self._call(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=body))

    # ----------------------------------------------------------------------------------- ACL 2.0
    def create_user(self, broker_addr: str, user: User) -> None:
        info = {"username": user.username, "password": user.password, "userType": user.user_type.value,
                "userStatus": user.user_status.value}
        self._ok(self._call(broker_addr, RequestCode.AUTH_CREATE_USER, UserRequestHeader(username=user.username),
                            fastjson.dumps(info)))

    def update_user(self, broker_addr: str, username: str, password: str | None, user_type: str | None,
                    user_status: str | None) -> None:
        info = {k: v for k, v in (("username", username), ("password", password), ("userType", user_type),
                                  ("userStatus", user_status)) if v is not None}
        self._ok(self._call(broker_addr, RequestCode.AUTH_UPDATE_USER, UserRequestHeader(username=username),
                            fastjson.dumps(info)))

    def delete_user(self, broker_addr: str, username: str) -> None:
        self._ok(self._call(broker_addr, RequestCode.AUTH_DELETE_USER, UserRequestHeader(username=username)))

    def _user(self, obj: Any) -> User:
        try:
            return user_from_info(obj)
        except AuthMetadataError as e:
            raise AdminError(f"undecodable UserInfo from the server: {e}") from None

    def get_user(self, broker_addr: str, username: str) -> User | None:
        resp = self._ok(self._call(broker_addr, RequestCode.AUTH_GET_USER, UserRequestHeader(username=username)))
        return self._user(self._json(resp)) if resp.body else None

    def list_users(self, broker_addr: str, filter_text: str | None = None) -> list[User]:
        resp = self._ok(self._call(broker_addr, RequestCode.AUTH_LIST_USER, ListUsersRequestHeader(filter=filter_text)))
        items = self._json(resp) if resp.body else []
        return sorted((self._user(i) for i in items or []), key=lambda u: u.username)

    def _acl(self, obj: Any) -> Acl:
        try:
            return acl_from_info(obj)
        except AuthMetadataError as e:
            raise AdminError(f"undecodable AclInfo from the server: {e}") from None

    def create_acl(self, broker_addr: str, acl: Acl) -> None:
        self._ok(self._call(broker_addr, RequestCode.AUTH_CREATE_ACL, AclRequestHeader(subject=acl.subject.key),
                            fastjson.dumps(acl_to_info(acl))))

    def update_acl(self, broker_addr: str, acl: Acl) -> None:
        self._ok(self._call(broker_addr, RequestCode.AUTH_UPDATE_ACL, AclRequestHeader(subject=acl.subject.key),
                            fastjson.dumps(acl_to_info(acl))))

    def delete_acl(self, broker_addr: str, subject: str, resource: str | None = None) -> None:
        self._ok(self._call(broker_addr, RequestCode.AUTH_DELETE_ACL,
                            DeleteAclRequestHeader(subject=subject, resource=resource)))

    def get_acl(self, broker_addr: str, subject: str) -> Acl | None:
        resp = self._ok(self._call(broker_addr, RequestCode.AUTH_GET_ACL, AclRequestHeader(subject=subject)))
        return self._acl(self._json(resp)) if resp.body else None

    def list_acls(self, broker_addr: str, subject_filter: str | None = None,
                  resource_filter: str | None = None) -> list[Acl]:
        resp = self._ok(self._call(broker_addr, RequestCode.AUTH_LIST_ACL,
                                   ListAclsRequestHeader(subject_filter=subject_filter,
                                                         resource_filter=resource_filter)))
        items = self._json(resp) if resp.body else []
        return sorted((self._acl(i) for i in items or []), key=lambda a: a.subject.key)
