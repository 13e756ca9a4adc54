"""Broker handlers for client sessions: HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG,
GET_CONSUMER_LIST_BY_GROUP, GET_CONSUMER_CONNECTION_LIST, QUERY_MESSAGE, and the broker -> client requests
over the client's own connection: NOTIFY_CONSUMER_IDS_CHANGED and CHECK_TRANSACTION_STATE (spec B.4, B.9).

Why together: they all read or write the Broker's client registry, whose connection handles are
this server's ``Channel`` objects.
"""

from __future__ import annotations

import dataclasses
import logging

from broker_core.broker.client_registry import ClientChannelInfo, ConsumerData, SubscriptionData
from broker_core.broker.request_context import RequestContext
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode
from broker_core.remoting import bodies as wire
from broker_core.remoting.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    UnregisterClientRequestHeader,
)
from broker_core.store.codec.message import MessageExt
from broker_core.store.codec.message_id import decode_offset_msg_id
from broker_core.store.codec.properties import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from broker_core.store.codec.wire_record import message_ext_to_record, records_body

from .broker_context import BrokerContext, BrokerHandler
from .channel import Channel
from .outbound import failure_reason

log = logging.getLogger("rmqops.broker.net")
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
MAX_MSGS_NUM_BATCH = 64  # maxMsgsNumBatch: QUERY_MESSAGE's cap
DEFAULT_QUERY_MAX_NUM = 32  # defaultQueryMaxNum: the cap of a unique-key query
RUNNING_INFO_TIMEOUT_S = 5.0


def consumer_data(c: wire.ConsumerData) -> ConsumerData:
    subs = tuple(SubscriptionData(s.topic, s.sub_string, s.expression_type, s.sub_version, tuple(s.tags_set),
                                  tuple(s.code_set)) for s in c.subscription_data_set)
    return ConsumerData(c.group_name, c.consume_type, c.message_model, c.consume_from_where, subs, c.unit_mode)


def wire_subscription(s: SubscriptionData) -> wire.SubscriptionData:
    return wire.SubscriptionData(topic=s.topic, sub_string=s.sub_string, expression_type=s.expression_type,
                                 sub_version=s.sub_version, tags_set=list(s.tags), code_set=list(s.codes))


class ClientHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.broker = ctx.broker
        self._watched: set[str] = set()
        ctx.broker.client_registry.consumer_ids_changed_listeners.append(self._notify_consumer_ids_changed)
        ctx.broker.add_transaction_check_listener(self._check_transaction_state)

    def table(self) -> dict[int, BrokerHandler]:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }

    def _watch(self, ch: Channel) -> None:
        """When a client's connection closes, the registry forgets it (and its consumers rebalance)."""
        if ch.id not in self._watched:
            self._watched.add(ch.id)
            ch.on_close(self._channel_closed)

    def _channel_closed(self, ch: Channel) -> None:
        self._watched.discard(ch.id)
        self.broker.client_registry.channel_closed(ch)

    async def heart_beat(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        hb = wire.HeartbeatData.from_json(req.body)
        self._watch(ch)
        await self.ctx.run(self.broker.heartbeat, ch, hb.client_id, language=req.language.name,
                           version=req.version, remote_addr=ch.remote_addr,
                           producer_groups=[p.group_name for p in hb.producer_data_set],
                           consumers=[consumer_data(c) for c in hb.consumer_data_set], auth=auth)
        return req.response(ext_fields={"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"})

    async def unregister_client(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext_fields(req.ext_fields)
        await self.ctx.run(self.broker.unregister_client, ch, h.producer_group, h.consumer_group, auth=auth)
        return req.response()

    async def check_client_config(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        """What a Java push or lite pull consumer asks at start for each SQL92 subscription: SUCCESS,
        SUBSCRIPTION_PARSE_FAILED (the parser's message) or SYSTEM_ERROR (enablePropertyFilter=false)."""
        body = wire.CheckClientRequestBody.from_json(req.body) if req.body else None
        sub = body.subscription_data if body is not None else None
        if sub is not None:
            await self.ctx.run(self.broker.check_client_config, sub.expression_type, sub.sub_string, auth=auth)
        return req.response()

    async def get_consumer_list_by_group(self, ch: Channel, req: RemotingCommand,
                                         auth: RequestContext) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext_fields(req.ext_fields)
        ids = await self.ctx.run(self.broker.consumer_ids, h.consumer_group, auth=auth)
        if not ids:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
        return req.response(body=wire.GetConsumerListByGroupResponseBody(consumer_id_list=ids).to_json())

    async def get_consumer_connection_list(self, ch: Channel, req: RemotingCommand,
                                           auth: RequestContext) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext_fields(req.ext_fields)
        info = await self.ctx.run(self.broker.consumer_connection, h.consumer_group, auth=auth)
        if info is None or not info.channels:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
        body = wire.ConsumerConnection(
            connection_set=[wire.Connection(client_id=c.client_id, client_addr=c.remote_addr, language=c.language,
                                            version=c.version)
                            for c in sorted(info.channels.values(), key=lambda c: c.client_id)],
            subscription_table={t: wire_subscription(s) for t, s in sorted(info.subscriptions.items())},
            consume_type=info.consume_type, message_model=info.message_model,
            consume_from_where=info.consume_from_where)
        return req.response(body=body.to_json())

    async def get_producer_connection_list(self, ch: Channel, req: RemotingCommand,
                                           auth: RequestContext) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_ext_fields(req.ext_fields)
        clients = await self.ctx.run(self.broker.producer_connection, h.producer_group, auth=auth)
        if not clients:
            return req.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist")
        body = wire.ProducerConnection(connection_set=[
            wire.Connection(client_id=c.client_id, client_addr=c.remote_addr, language=c.language, version=c.version)
            for c in clients])
        return req.response(body=body.to_json())

    async def get_consumer_running_info(self, ch: Channel, req: RemotingCommand,
                                        auth: RequestContext) -> RemotingCommand:
        """mqadmin consumerStatus: the broker relays the request to the client and its answer back."""
        h = GetConsumerRunningInfoRequestHeader.from_ext_fields(req.ext_fields)
        info = await self.ctx.run(self.broker.consumer_running_info_client, h.consumer_group, h.client_id, auth=auth)
        client = info.channel if info is not None else None
        if not isinstance(client, Channel) or client.closed:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer <{h.consumer_group}> <{h.client_id}> not online")
        relay = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, h.to_ext_fields())
        try:
            answer = await client.request(relay, RUNNING_INFO_TIMEOUT_S)
        except (TimeoutError, ConnectionError) as e:
            return req.response(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{h.consumer_group}> <{h.client_id}> "
                                                           f"failed: {failure_reason(e, RUNNING_INFO_TIMEOUT_S)}")
        return req.response(answer.code, answer.remark, answer.ext_fields, answer.body)

    def _consumer_channel(self, group: str, client_id: str) -> Channel | None:
        """The connection of ``client_id`` as a consumer of ``group`` (ConsumerManager#findChannel)."""
        for c in self.broker.client_registry.consumer_clients(group):
            if c.client_id == client_id and isinstance(c.channel, Channel) and not c.channel.closed:
                return c.channel
        return None

    async def get_consumer_status(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        """mqadmin getConsumerStatus (223): ask each client of the group (or the one named) for its
        offsets of the topic (GET_CONSUMER_STATUS_FROM_CLIENT, 221) and gather them by client id.
        A client that does not answer is left out, as Broker2Client does."""
        h = GetConsumerStatusRequestHeader.from_ext_fields(req.ext_fields)
        clients = [c for c in await self.ctx.run(self.broker.consumer_status_clients, h.group, h.topic, auth=auth)
                   if isinstance(c.channel, Channel) and not c.channel.closed]
        if not clients:
            return req.response(ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{h.group}]")
        table: dict[str, dict[wire.MessageQueue, int]] = {}
        for c in clients:
            if h.client_addr and h.client_addr != c.client_id:
                continue
            relay = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, h.to_ext_fields())
            try:
                answer = await c.channel.request(relay, RUNNING_INFO_TIMEOUT_S)
            except (TimeoutError, ConnectionError) as e:
                log.warning("get consumer status from client %s of %s failed: %s", c.client_id, h.group,
                            failure_reason(e, RUNNING_INFO_TIMEOUT_S))
                continue
            if answer.code == ResponseCode.SUCCESS and answer.body:
                try:
                    table[c.client_id] = wire.GetConsumerStatusBody.from_json(answer.body).message_queue_table
                except ValueError as e:
                    log.warning("client %s answered an undecodable consumer status: %s", c.client_id, e)
        return req.response(body=wire.GetConsumerStatusBody(consumer_table=table).to_json())

    async def consume_message_directly(self, ch: Channel, req: RemotingCommand,
                                       auth: RequestContext) -> RemotingCommand:
        """mqadmin queryMsgById -g -d (309): the message at the offset id's commit log offset is pushed
        to that client of the group, which consumes it at once and answers ConsumeMessageDirectlyResult."""
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(req.ext_fields)
        try:
            offset: int | None = decode_offset_msg_id(h.msg_id or "").commit_log_offset
            bad_id = None
        except ValueError as e:
            offset, bad_id = None, e
        # authorized before anything is looked up or answered: the Broker refuses with NO_PERMISSION
        msg = await self.ctx.run(self.broker.message_to_consume_directly, h.consumer_group, h.topic, offset,
                                 auth=auth)
        client = self._consumer_channel(h.consumer_group, h.client_id or "")
        if client is None:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer <{h.consumer_group}> <{h.client_id}> not online")
        if bad_id is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"bad message id {h.msg_id!r}: {bad_id}")
        if msg is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        fields = dict(req.ext_fields)
        fields["brokerName"] = self.broker.config.broker_name
        relay = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields, message_ext_to_record(msg))
        try:
            answer = await client.request(relay, RUNNING_INFO_TIMEOUT_S * 3)
        except (TimeoutError, ConnectionError) as e:
            return req.response(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{h.consumer_group}> <{h.client_id}> "
                                                           f"failed: {failure_reason(e, RUNNING_INFO_TIMEOUT_S * 3)}")
        return req.response(answer.code, answer.remark, answer.ext_fields, answer.body)

    async def query_message(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext_fields(req.ext_fields)
        unique = req.ext_fields.get(UNIQUE_KEY_QUERY, "false").lower() == "true"
        max_num = DEFAULT_QUERY_MAX_NUM if unique else min(h.max_num, MAX_MSGS_NUM_BATCH)
        found = await self.ctx.run(self.broker.query_message, h.topic, h.key, max_num, h.begin_timestamp,
                                   h.end_timestamp, unique_key=unique, auth=auth)
        if not found:
            return req.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
        last = max(m.store_timestamp for m in found)
        header = QueryMessageResponseHeader(index_last_update_timestamp=last,
                                            index_last_update_phyoffset=max(m.commit_log_offset for m in found))
        return req.response(ext_fields=header.to_ext_fields(), body=records_body(found))

    # -- broker -> client ------------------------------------------------------------------------
    def _notify_consumer_ids_changed(self, group: str, clients: list[ClientChannelInfo]) -> None:
        """Called by the registry (any thread): every client of the group rebalances."""
        header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext_fields()
        for client in clients:
            if isinstance(client.channel, Channel) and not client.channel.closed:
                client.channel.send_oneway_threadsafe(
                    RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header))

    def _check_transaction_state(self, half: MessageExt, producer_group: str) -> bool:
        """The transaction check service asks a live producer of the group (oneway, spec B.5); the
        producer answers later with END_TRANSACTION (fromTransactionCheck=true). False: no remoting
        producer of the group is connected."""
        channel = self.broker.client_registry.find_producer_channel(producer_group)
        if not isinstance(channel, Channel) or channel.closed:
            return False
        real_topic = half.get_property(PROPERTY_REAL_TOPIC) or half.topic
        real_qid = half.get_property(PROPERTY_REAL_QUEUE_ID)
        shown = dataclasses.replace(half, topic=real_topic,
                                    queue_id=int(real_qid) if real_qid and real_qid.isdigit() else half.queue_id)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset, commit_log_offset=half.commit_log_offset, topic=real_topic,
            msg_id=half.uniq_key, transaction_id=half.uniq_key, offset_msg_id=half.msg_id)
        channel.send_oneway_threadsafe(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE,
                                                               header.to_ext_fields(), message_ext_to_record(shown)))
        return True
