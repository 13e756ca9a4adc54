"""Broker handlers for operators (what mqadmin sends): topics, subscription groups, stats, offsets
reset, runtime info and config, and the message reads by offset (spec B.2, B.3, B.7)."""

from __future__ import annotations

import logging

from broker_core.broker.maintenance import commit_log_summary, expired_queues_summary, unused_topics_summary
from broker_core.broker.request_context import RequestContext
from broker_core.broker.stats import StatsWindow
from broker_core.remoting import LanguageCode, RemotingCommand, RequestCode, ResponseCode, fastjson
from broker_core.remoting.bodies import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeQueueData,
    ConsumeStatsList,
    CreateTopicListRequestBody,
    DataVersion,
    GroupList,
    KVTable,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    SetMessageRequestModeRequestBody,
    SubscriptionGroupList,
    SubscriptionGroupWrapper,
    TopicConfigAndMappingSerializeWrapper,
    TopicList,
)
from broker_core.remoting.body_base import BodyError
from broker_core.remoting.codes import V3_0_7_SNAPSHOT
from broker_core.remoting.headers import (
    GET_BROKER_CONFIG_NEXT_START,
    CloneGroupOffsetRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetAllTopicConfigResponseHeader,
    GetBrokerConfigResponseHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryTopicsByConsumerRequestHeader,
    ResetOffsetRequestHeader,
    TopicQueueRequestHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
)
from broker_core.remoting.mqversion import version_desc
from broker_core.store.codec.wire_record import message_ext_to_record
from broker_core.store.subscription_group_config import SubscriptionGroupConfig, SubscriptionGroupConfigError
from broker_core.store.topic_config import TopicConfig

from .broker_context import BrokerContext, BrokerHandler
from .channel import Channel
from .remoting_server import RequestError
from .wire_convert import (
    consume_stats,
    parse_properties_text,
    properties_text,
    reset_offset_body,
    topic_config_body,
    topic_stats_table,
)

log = logging.getLogger("rmqops.broker.net")

# DELETE_SUBSCRIPTIONGROUP's answer field, "false" when nothing was deleted (rmqops only: Java's broker
# answers SUCCESS with no field, which mqadmin's remoting transport reads as "deleted")
GROUP_DELETED_FIELD = "deleted"

def _reset_body_for_c(body: ResetOffsetBody) -> bytes:
    """ResetOffsetBodyForC: the C++ client reads the table as a list of MessageQueueForC, not a map."""
    rows: list[fastjson.JsonValue] = [
        {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
        for mq, offset in body.offset_table.items()]
    return fastjson.dumps({"offsetTable": rows})


class AdminHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.broker = ctx.broker

    @property
    def broker_name(self) -> str:
        return self.broker.config.broker_name

    def table(self) -> dict[int, BrokerHandler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST: self.update_and_create_topic_list,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_and_create_subscription_group_list,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group_config,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.QUERY_TOPICS_BY_CONSUMER: self.query_topics_by_consumer,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.invoke_broker_to_reset_offset,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.SET_MESSAGE_REQUEST_MODE: self.set_message_request_mode,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
        }

    # -- topics ----------------------------------------------------------------------------------
    async def update_and_create_topic(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext_fields(req.ext_fields)
        await self.ctx.run(self.broker.create_or_update_topic, h.topic, h.read_queue_nums, h.write_queue_nums, h.perm,
                           h.order, h.attributes or None, h.topic_filter_type, h.topic_sys_flag or 0, auth=auth)
        await self.ctx.register_now(h.topic)  # also a topic unchanged: its route is back if the name server lost it
        return req.response()

    async def update_and_create_topic_list(self, ch: Channel, req: RemotingCommand,
                                           auth: RequestContext) -> RemotingCommand:
        """Apache's mqadmin updateTopicList sends the whole file to each broker at once; every topic is
        created or updated, or (one refused) none, and the changed routes reach the name servers before
        the answer, as after UPDATE_AND_CREATE_TOPIC."""
        if not req.body:
            raise BodyError("CreateTopicListRequestBody: the request has no body")
        body = CreateTopicListRequestBody.from_json(req.body)
        configs = [TopicConfig(t.topic_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.topic_filter_type,
                               t.topic_sys_flag, t.order, dict(t.attributes)) for t in body.topic_config_list]
        await self.ctx.run(self.broker.create_or_update_topic_list, configs, auth=auth)
        await self.ctx.register_now(*dict.fromkeys(c.topic_name for c in configs))
        return req.response()

    async def delete_topic(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = DeleteTopicRequestHeader.from_ext_fields(req.ext_fields)
        if not h.topic.strip():
            raise RequestError(ResponseCode.INVALID_PARAMETER, "The specified topic is blank.")
        await self.ctx.run(self.broker.delete_topic, h.topic, auth=auth)
        await self.ctx.register_now()
        return req.response()

    async def get_all_topic_config(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        topics = await self.ctx.run(self.broker.list_topics, auth=auth)
        body = TopicConfigAndMappingSerializeWrapper(
            topic_config_table={t.topic_name: topic_config_body(t) for t in topics})
        header = GetAllTopicConfigResponseHeader(total_topic_num=len(topics))
        return req.response(ext_fields=header.to_ext_fields(), body=body.to_json())

    async def get_topic_config(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = GetTopicConfigRequestHeader.from_ext_fields(req.ext_fields)
        tc = await self.ctx.run(self.broker.get_topic, h.topic, auth=auth)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        return req.response(body=topic_config_body(tc).to_json())

    async def get_topic_stats_info(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = TopicRequestHeader.from_ext_fields(req.ext_fields)
        stats = await self.ctx.run(self.broker.topic_stats, h.topic, auth=auth)
        return req.response(body=topic_stats_table(self.broker_name, stats).to_json())

    # -- subscription groups ---------------------------------------------------------------------
    async def update_and_create_subscription_group(self, ch: Channel, req: RemotingCommand,
                                                   auth: RequestContext) -> RemotingCommand:
        obj = fastjson.loads(req.body) if req.body else None
        if not isinstance(obj, dict) or not isinstance(obj.get("groupName"), str):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "the body is not a SubscriptionGroupConfig with a groupName")
        try:
            cfg = SubscriptionGroupConfig.from_json(obj["groupName"], obj)
        except SubscriptionGroupConfigError as e:  # the store's error, as the wire's (one line, no traceback)
            raise BodyError(f"SubscriptionGroupConfig.{e}") from None
        await self.ctx.run(self.broker.create_or_update_subscription_group, cfg, auth=auth)
        return req.response()

    async def update_and_create_subscription_group_list(self, ch: Channel, req: RemotingCommand,
                                                        auth: RequestContext) -> RemotingCommand:
        """Apache's mqadmin updateSubGroupList: every group of the list, each read as
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP reads its body, created or updated, or (one refused) none."""
        if not req.body:
            raise BodyError("SubscriptionGroupList: the request has no body")
        body = SubscriptionGroupList.from_json(req.body)
        configs = []
        for i, obj in enumerate(body.group_config_list):
            where = f"SubscriptionGroupList.groupConfigList[{i}]"
            name = obj.get("groupName")
            if not isinstance(name, str):
                raise BodyError(f"{where}: missing field groupName")
            try:
                configs.append(SubscriptionGroupConfig.from_json(name, obj))
            except SubscriptionGroupConfigError as e:  # the store's error, as the wire's
                raise BodyError(f"{where}.{e}") from None
        await self.ctx.run(self.broker.create_or_update_subscription_group_list, configs, auth=auth)
        return req.response()

    async def delete_subscription_group(self, ch: Channel, req: RemotingCommand,
                                        auth: RequestContext) -> RemotingCommand:
        """SUCCESS whether or not the group was there, as Java's broker answers; when nothing was deleted
        (no group, and with ``cleanOffset`` no offsets either) the answer says so in a remark and the
        ``deleted`` field, so mqadmin can report a mistyped name without reading the group first (a
        read ACL 2.0 would make the caller need Group [Get] for). Java's clients ignore both."""
        h = DeleteSubscriptionGroupRequestHeader.from_ext_fields(req.ext_fields)
        had_offsets = h.clean_offset and bool(self.broker.offset_manager.which_topic_by_consumer(h.group_name))
        existed = await self.ctx.run(self.broker.delete_subscription_group, h.group_name, h.clean_offset, auth=auth)
        if existed or had_offsets:
            return req.response()
        return req.response(remark=f"subscription group [{h.group_name}] does not exist in this broker",
                            ext_fields={GROUP_DELETED_FIELD: "false"})

    async def get_all_subscription_group_config(self, ch: Channel, req: RemotingCommand,
                                                auth: RequestContext) -> RemotingCommand:
        groups = await self.ctx.run(self.broker.list_subscription_groups, auth=auth)
        body = SubscriptionGroupWrapper(subscription_group_table={g.group_name: g.to_json() for g in groups})
        return req.response(ext_fields={"totalGroupNum": str(len(groups))}, body=body.to_json())

    async def get_subscription_group_config(self, ch: Channel, req: RemotingCommand,
                                            auth: RequestContext) -> RemotingCommand:
        h = GetSubscriptionGroupConfigRequestHeader.from_ext_fields(req.ext_fields)
        cfg = await self.ctx.run(self.broker.get_subscription_group, h.group, auth=auth)
        if cfg is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return req.response(body=fastjson.dumps(cfg.to_json()))

    # -- stats and offsets -----------------------------------------------------------------------
    async def get_consume_stats(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext_fields(req.ext_fields)
        topics = [t for t in (h.topic_list or "").split(";") if t] or [h.topic or None]
        rows = []
        tps = 0.0
        for topic in topics:
            stats = await self.ctx.run(self.broker.consume_stats, h.consumer_group, topic, auth=auth)
            rows += stats.rows
            tps += stats.consume_tps
        return req.response(body=consume_stats(self.broker_name, rows, tps).to_json())

    async def get_broker_consume_stats(self, ch: Channel, req: RemotingCommand,
                                       auth: RequestContext) -> RemotingCommand:
        """mqadmin brokerConsumeStats: every group's ConsumeStats of every topic in one answer."""
        h = GetConsumeStatsInBrokerHeader.from_ext_fields(req.ext_fields)
        stats = await self.ctx.run(self.broker.broker_consume_stats, h.is_order, auth=auth)
        body = ConsumeStatsList(
            consume_stats_list=[{group: [consume_stats(self.broker_name, s.rows, s.consume_tps) for s in per_topic]}
                                for group, per_topic in stats.groups],
            broker_addr=self.broker.config.broker_addr, total_diff=stats.total_diff,
            total_inflight_diff=stats.total_inflight_diff)
        return req.response(body=body.to_json())

    async def query_topic_consume_by_who(self, ch: Channel, req: RemotingCommand,
                                         auth: RequestContext) -> RemotingCommand:
        h = TopicRequestHeader.from_ext_fields(req.ext_fields)
        groups = await self.ctx.run(self.broker.which_group_by_topic, h.topic, auth=auth)
        return req.response(body=GroupList(group_list=sorted(groups)).to_json())

    async def query_topics_by_consumer(self, ch: Channel, req: RemotingCommand,
                                       auth: RequestContext) -> RemotingCommand:
        h = QueryTopicsByConsumerRequestHeader.from_ext_fields(req.ext_fields)
        topics = await self.ctx.run(self.broker.which_topic_by_consumer, h.group, auth=auth)
        return req.response(body=TopicList(topic_list=sorted(topics), broker_addr=self.broker.config.broker_addr)
                            .to_json())

    async def clone_group_offset(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        """AdminBrokerProcessor.cloneGroupOffset: the copy is made by the Broker's offset manager, so a
        pending server-side reset of the destination is kept (and answered first) as in Apache, instead of
        an UPDATE_CONSUMER_OFFSET per queue that the broker drops while the reset waits. SUCCESS, no body."""
        h = CloneGroupOffsetRequestHeader.from_ext_fields(req.ext_fields)
        await self.ctx.run(self.broker.clone_group_offset, h.src_group, h.dest_group, h.topic, auth=auth,
                           offline=h.offline)
        return req.response()

    async def invoke_broker_to_reset_offset(self, ch: Channel, req: RemotingCommand,
                                            auth: RequestContext) -> RemotingCommand:
        """Server-side reset (useServerSideResetOffset): queueId < 0 -> every queue by timestamp.
        Client mode (the setting off, read per request since UPDATE_BROKER_CONFIG changes it live):
        the group's online consumers are told to move (AdminBrokerProcessor.resetOffset)."""
        h = ResetOffsetRequestHeader.from_ext_fields(req.ext_fields)
        if not self.broker.config.use_server_side_reset_offset:
            return await self._reset_offset_in_clients(req, h, auth)
        if h.queue_id >= 0 and h.offset is not None and h.offset != -1:
            plan = await self.ctx.run(self.broker.reset_offset, h.group, h.topic, None, offset=h.offset,
                                      queue_id=h.queue_id, auth=auth)
        else:
            plan = await self.ctx.run(self.broker.reset_offset, h.group, h.topic, h.timestamp,
                                      queue_id=h.queue_id if h.queue_id >= 0 else None, auth=auth)
        return req.response(body=reset_offset_body(self.broker_name, plan).to_json())

    async def _reset_offset_in_clients(self, req: RemotingCommand, h: ResetOffsetRequestHeader,
                                       auth: RequestContext) -> RemotingCommand:
        """Broker2Client.resetOffset: the Broker computes the table (stores nothing: each consumer
        commits its new offsets itself), then every online consumer of the group is sent
        RESET_CONSUMER_CLIENT_OFFSET (oneway). No consumer online is CONSUMER_NOT_ONLINE, which makes
        mqadmin fall back to committing the offsets itself.

        Unlike Apache, whose Broker2Client ignores queueId/offset and so answers Java's per-queue reset
        (-b -q: timestamp 0, queueId, offset) by rewinding every queue of the group to its start, a
        queueId >= 0 limits the table to that queue, at ``offset`` when given: the consumers leave the
        queues not in the table where they are (MQClientInstance.resetOffset)."""
        if h.queue_id >= 0 and h.offset is not None and h.offset != -1:
            plan = await self.ctx.run(self.broker.plan_reset_offset, h.group, h.topic, None, offset=h.offset,
                                      queue_id=h.queue_id, auth=auth)
        else:
            plan = await self.ctx.run(self.broker.plan_reset_offset, h.group, h.topic, h.timestamp,
                                      client_force=h.is_force, auth=auth)
            if h.queue_id >= 0:
                plan = [e for e in plan if e.queue_id == h.queue_id]
        clients = [c for c in self.broker.client_registry.consumer_clients(h.group)
                   if isinstance(c.channel, Channel) and not c.channel.closed]
        if not clients:
            return req.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                f"Consumer not online, so can not reset offset, Group: {h.group} "
                                f"Topic: {h.topic} Timestamp: {h.timestamp}")
        too_old = [c for c in clients if c.version < V3_0_7_SNAPSHOT]
        if too_old:
            # checked before any is told (Apache stops at the first such client, some told already):
            # a group half reset is worse than one not reset
            return req.response(ResponseCode.SYSTEM_ERROR, "the client does not support this feature. "
                                                           f"version={version_desc(too_old[0].version)}")
        body = reset_offset_body(self.broker_name, plan)
        to_clients = _reset_body_for_c(body) if req.language == LanguageCode.CPP else body.to_json()
        header = ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=False)
        for c in clients:
            assert isinstance(c.channel, Channel)
            c.channel.send_oneway_threadsafe(
                RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header.to_ext_fields(), to_clients))
            log.info("[reset-offset] reset offset sent. topic=%s, group=%s, clientId=%s", h.topic, h.group, c.client_id)
        return req.response(body=body.to_json())

    # -- broker ----------------------------------------------------------------------------------
    async def get_broker_runtime_info(self, ch: Channel, req: RemotingCommand,
                                      auth: RequestContext) -> RemotingCommand:
        info = await self.ctx.run(self.broker.broker_runtime_info, auth=auth)
        return req.response(body=KVTable(table=info).to_json())

    async def get_broker_config(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        # nextStart=true (our playbooks' plan): the keys written to the -c file for the next start
        next_start = (req.ext_fields or {}).get(GET_BROKER_CONFIG_NEXT_START, "").strip().lower() == "true"
        props = self.broker.broker_config_properties(auth, next_start=next_start)
        header = GetBrokerConfigResponseHeader(version=DataVersion().to_json().decode())
        return req.response(ext_fields=header.to_ext_fields(), body=properties_text(props))

    async def update_broker_config(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        props = parse_properties_text(req.body) if req.body else {}
        changed = await self.ctx.run(self.broker.update_broker_config, props, auth=auth)
        # brokerPermission changes what the routes advertise of every topic; a namesrvAddr is taken here
        await self.ctx.register_all_now("brokerPermission" in changed)
        return req.response()

    async def query_consume_queue(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = QueryConsumeQueueRequestHeader.from_ext_fields(req.ext_fields)
        lo, hi, units = await self.ctx.run(self.broker.query_consume_queue, h.topic, h.queue_id, h.index, h.count,
                                           auth=auth, group=h.consumer_group or None)
        body = QueryConsumeQueueResponseBody(
            queue_data=[ConsumeQueueData(physic_offset=u.phy_offset, physic_size=u.size, tags_code=u.tags_code)
                        for u in units], max_queue_index=hi, min_queue_index=lo)
        return req.response(body=body.to_json())

    async def get_earliest_msg_storetime(self, ch: Channel, req: RemotingCommand,
                                         auth: RequestContext) -> RemotingCommand:
        h = TopicQueueRequestHeader.from_ext_fields(req.ext_fields)
        ts = await self.ctx.run(self.broker.earliest_msg_store_time, h.topic, h.queue_id, auth=auth)
        return req.response(ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp=ts).to_ext_fields())

    # -- store maintenance -----------------------------------------------------------------------
    async def clean_expired_consume_queue(self, ch: Channel, req: RemotingCommand,
                                          auth: RequestContext) -> RemotingCommand:
        removed = await self.ctx.run(self.broker.clean_expired_consume_queues, auth=auth)
        return req.response(remark=expired_queues_summary(removed))

    async def delete_expired_commit_log(self, ch: Channel, req: RemotingCommand,
                                        auth: RequestContext) -> RemotingCommand:
        report = await self.ctx.run(self.broker.delete_expired_commit_log, auth=auth)
        return req.response(remark=commit_log_summary(report))

    async def clean_unused_topic(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        removed = await self.ctx.run(self.broker.clean_unused_topics, auth=auth)
        if removed:
            await self.ctx.register_now()
        return req.response(remark=unused_topics_summary(removed))

    async def view_broker_stats_data(self, ch: Channel, req: RemotingCommand,
                                     auth: RequestContext) -> RemotingCommand:
        h = ViewBrokerStatsDataRequestHeader.from_ext_fields(req.ext_fields)
        minute, hour, day = await self.ctx.run(self.broker.view_broker_stats_data, h.stats_name, h.stats_key,
                                               auth=auth)

        def item(w: StatsWindow) -> BrokerStatsItem:
            return BrokerStatsItem(sum=w.sum, tps=w.tps, avgpt=w.avgpt)

        body = BrokerStatsData(stats_minute=item(minute), stats_hour=item(hour), stats_day=item(day))
        return req.response(body=body.to_json())

    async def set_message_request_mode(self, ch: Channel, req: RemotingCommand,
                                       auth: RequestContext) -> RemotingCommand:
        body = SetMessageRequestModeRequestBody.from_json(req.body)
        await self.ctx.run(self.broker.set_message_request_mode, body.topic, body.consumer_group, body.mode,
                           body.pop_share_queue_num, auth=auth)
        return req.response()

    async def view_message_by_id(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext_fields(req.ext_fields)
        msg = await self.ctx.run(self.broker.view_message, h.offset, auth=auth)
        if msg is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return req.response(body=message_ext_to_record(msg))
