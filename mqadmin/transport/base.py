"""The BrokerClient transport: what the one Admin implementation asks of a name server and brokers.

Why: the operator logic (plans, dry runs, filters, output records) is written once, in
``mqadmin.admin.Admin``. Below it sits this narrow, request-level interface: each method is one
RocketMQ remoting request (its code is named in the docstring) addressed to the name server or to
one broker by address, the way httpx has one client over several transports and RocketMQ's proxy
has local and cluster message services. Two implementations:

* ``mqadmin.transport.local.LocalBrokerClient`` — calls a ``Broker`` over a store directory in
  process (``--store``): read-only opening for inspection, the store lock for writes.
* ``mqadmin.transport.remoting.RemotingBrokerClient`` — frames over TCP to a name server and its
  brokers (``-n``).

Contract every implementation keeps (the contract suite in tests/contract runs on both):
* Values in and out are the dataclasses below and in ``mqadmin.transport.values`` (plus
  ``broker_core.auth.model`` User/Acl, the ``broker_core.broker.route_info`` route types, and the
  client diagnostics ConsumerRunningInfo and ConsumeMessageDirectlyResult, which only a client
  produces): never a store, a Broker or a socket.
* Failures are ``mqadmin.errors`` exceptions carrying the broker's remark as the message:
  ``NotFoundError`` for TOPIC_NOT_EXIST (17), SUBSCRIPTION_GROUP_NOT_EXIST (26), QUERY_NOT_FOUND (22)
  and NO_MESSAGE (208); ``StoreBusyError`` when a local store is held by a running broker;
  ``NoPermissionError`` (an ``AdminError``) for NO_PERMISSION (16) when the remark does not say the
  thing "is not exist"; ``AdminError`` for every other refusal (INVALID_PARAMETER, SYSTEM_ERROR ...).
* ``broker_addr`` is a broker's ``ip:port`` as the name server lists it (ClusterInfo).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker_core.common.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from broker_core.auth.model import Acl, User
    from broker_core.broker.route_info import ClusterInfo, TopicRouteData
    from broker_core.broker.stats import StatsWindow
    from broker_core.remoting.bodies import ConsumeMessageDirectlyResult, ConsumerRunningInfo
    from broker_core.store.verify import LostRecord, VerifyReport
    from mqadmin.transport.values import (
        BrokerConsumeStatsView,
        ClientConnection,
        ConsumeQueueView,
        ConsumerConnection,
        ConsumeStatsView,
        QueueRead,
        SendResult,
        SubscriptionGroupInfo,
        TopicStatus,
    )
    from spark.rebuild import RebuildSummary

# The queue, send, group and connection records live in ``mqadmin.transport.values`` and load on first
# use of their name here (PEP 562): a key query needs only the two records below.
__getattr__ = lazy_exports(__name__, dict.fromkeys((
    "BrokerConsumeStatsView",
    "ClientConnection",
    "ConsumeQueueStats",
    "ConsumeQueueView",
    "ConsumerConnection",
    "ConsumeStatsView",
    "CqEntry",
    "QueueRead",
    "QueueStatus",
    "SendResult",
    "SubscriptionEntry",
    "SubscriptionGroupInfo",
    "TopicStatus",
), "mqadmin.transport.values"), globals())

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: commands pass a rich progress bar here for long scans."""


# ------------------------------------------------------------------------------------ value types

@dataclass
class TopicInfo:
    """A topic's configuration (TopicConfig) plus its queue type."""

    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def queue_type(self) -> str:
        return self.attributes.get("queue.type") or "SimpleCQ"

    def to_dict(self) -> dict[str, Any]:
        return {"topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm,
                "topicFilterType": self.topic_filter_type, "topicSysFlag": self.topic_sys_flag,
                "order": self.order, "attributes": dict(self.attributes), "queueType": self.queue_type}


@dataclass
class MessageRecord:
    """A stored message as operators see it (all record fields, decoded properties, body both ways)."""

    msg_id: str
    uniq_key: str | None
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    sys_flag: int
    flag: int
    body_crc: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    properties: dict[str, str]
    body: bytes = field(repr=False)  # as the producer gave it: a compressed body is decompressed
    body_error: str | None = None  # why a body stored compressed could not be decompressed (body: stored bytes)

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def display_id(self) -> str:
        """What mqadmin prints as the message id: the unique key if present, else the offset id."""
        return self.uniq_key or self.msg_id

    def body_text(self, charset: str = "utf-8") -> str | None:
        try:
            return self.body.decode(charset)
        except (UnicodeDecodeError, LookupError):
            return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "msgId": self.msg_id, "uniqKey": self.uniq_key, "topic": self.topic, "queueId": self.queue_id,
            "queueOffset": self.queue_offset, "commitLogOffset": self.commit_log_offset,
            "storeSize": self.store_size, "sysFlag": self.sys_flag, "flag": self.flag, "bodyCRC": self.body_crc,
            "bornTimestamp": self.born_timestamp, "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp, "storeHost": self.store_host,
            "reconsumeTimes": self.reconsume_times, "preparedTransactionOffset": self.prepared_transaction_offset,
            "tags": self.tags, "keys": self.keys, "properties": dict(self.properties),
            "body": self.body_text(), "bodyBase64": base64.b64encode(self.body).decode("ascii"),
            **({"bodyError": self.body_error} if self.body_error is not None else {}),
        }


# ------------------------------------------------------------------------------------ the transport

class BrokerClient(Protocol):
    """Request-level access to a name server and its brokers (see the module docstring)."""

    @property
    def target(self) -> str:
        """Where requests go, for messages: ``store /path`` or ``name server 127.0.0.1:9876``."""
        ...

    def close(self, failed: bool = False) -> None:
        """Release the target; ``failed``: the command failed, so a store this client built for it
        (``--create``) is taken away again (a failed operation changes nothing)."""
        ...

    # -- name server -------------------------------------------------------------------------------
    def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106)."""
        ...

    def topic_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC (105); None when the name server has no route (TOPIC_NOT_EXIST)."""
        ...

    def all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic the name server routes, sorted."""
        ...

    def delete_topic_in_namesrv(self, topic: str, cluster_name: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV (216) on every name server given (they share no routes)."""
        ...

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every name server given, failing when one does (they share no data)."""
        ...

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101); None when the name server has no such item (QUERY_NOT_FOUND)."""
        ...

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every name server given, failing when one does."""
        ...

    def namesrv_addrs(self) -> list[str]:
        """The name servers this client was given (``-n a;b``), for requests each of them must get."""
        ...

    def operate_write_perm_of_broker(self, namesrv_addr: str, broker_name: str, wipe: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (205) or ADD_WRITE_PERM_OF_BROKER (327) on one name server:
        the number of the broker's topics whose route perm changed."""
        ...

    def get_namesrv_config(self, namesrv_addr: str) -> dict[str, str]:
        """GET_NAMESRV_CONFIG (319) on one name server: its settings, key -> value."""
        ...

    def update_namesrv_config(self, namesrv_addr: str, properties: dict[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG (318) on one name server; its refusal as an AdminError."""
        ...

    # -- topics --------------------------------------------------------------------------------------
    def get_all_topic_config(self, broker_addr: str) -> list[TopicInfo]:
        """GET_ALL_TOPIC_CONFIG (21)."""
        ...

    def get_topic_config(self, broker_addr: str, topic: str) -> TopicInfo | None:
        """GET_TOPIC_CONFIG (351); None when the broker does not have the topic."""
        ...

    def update_and_create_topic(self, broker_addr: str, topic: TopicInfo) -> TopicInfo:
        """UPDATE_AND_CREATE_TOPIC (17). ``topic.attributes`` holds mqadmin's signed changes
        (``{"+queue.type": "BatchCQ", "-k": ""}``); returns the topic as now stored."""
        ...

    def update_and_create_topic_list(self, broker_addr: str, topics: Sequence[TopicInfo]) -> None:
        """UPDATE_AND_CREATE_TOPIC_LIST (18): every topic in one request, as Apache's updateTopicList sends
        them; each ``attributes`` holds signed changes, as update_and_create_topic's. The broker checks
        every entry before it writes any, so one refused entry changes nothing. Nothing is read back."""
        ...

    def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER (215): config, queues and offsets."""
        ...

    def topic_stats(self, broker_addr: str, topic: str) -> TopicStatus:
        """GET_TOPIC_STATS_INFO (202): the broker's queues of the topic and its put TPS there."""
        ...

    def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int, index: int,
                            count: int) -> ConsumeQueueView:
        """QUERY_CONSUME_QUEUE (321): the queue's offsets and ``count`` units from ``index``."""
        ...

    def query_topic_consume_by_who(self, broker_addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300): groups holding offsets on the topic, sorted."""
        ...

    # -- subscription groups -------------------------------------------------------------------------
    def get_all_subscription_group(self, broker_addr: str) -> list[SubscriptionGroupInfo]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)."""
        ...

    def get_subscription_group(self, broker_addr: str, group: str) -> SubscriptionGroupInfo | None:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352); None when absent."""
        ...

    def update_and_create_subscription_group(self, broker_addr: str, config: SubscriptionGroupInfo) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): every field of ``config`` replaces the stored one but
        ``config.attributes``, signed changes (``+k``: v, ``-k``) the broker applies to the group's current
        attributes (none: they stay). Nothing is read back: the answer has no body, and a read would
        need Group [Get] under ACL 2.0, which Apache's updateSubGroup does not."""
        ...

    def update_and_create_subscription_group_list(self, broker_addr: str,
                                                  configs: Sequence[SubscriptionGroupInfo]) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225): every config in one request, as Apache's
        updateSubGroupList sends them, each taken as update_and_create_subscription_group takes its one;
        one refused entry changes nothing."""
        ...

    def delete_subscription_group(self, broker_addr: str, group: str, clean_offset: bool) -> bool:
        """DELETE_SUBSCRIPTIONGROUP (207), with ``cleanOffset``; False when the broker says it deleted
        nothing (no such group, nor offsets to clean). A broker that does not say (Java's) gives True."""
        ...

    def consume_stats(self, broker_addr: str, group: str, topic: str | None = None) -> ConsumeStatsView:
        """GET_CONSUME_STATS (208): every read queue of ``topic`` (or of every topic the group
        committed on), no rows when the group has no offsets; and consumeTps, the group's pulls a second
        over the last minute on that broker (0 on a store directory: no traffic reaches it)."""
        ...

    def broker_consume_stats(self, broker_addr: str, is_order: bool,
                             timeout: float | None = None) -> BrokerConsumeStatsView:
        """GET_BROKER_CONSUME_STATS (317): every subscription group's consume stats on every topic it
        holds offsets on, in one answer (``is_order``: orderly topics only), as Apache's brokerConsumeStats
        asks. ``timeout``: seconds to wait for the answer (None: the transport's own); a store
        directory answers at once."""
        ...

    def consumer_connection(self, broker_addr: str, group: str) -> ConsumerConnection | None:
        """GET_CONSUMER_CONNECTION_LIST (203); None when no client of the group is online."""
        ...

    def producer_connection(self, broker_addr: str, group: str) -> list[ClientConnection]:
        """GET_PRODUCER_CONNECTION_LIST (204): the group's online producers; [] when none is."""
        ...

    def consumer_running_info(self, broker_addr: str, group: str, client_id: str,
                              jstack: bool = False) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO (307), relayed by the broker to the client; NotFoundError when the
        client is not online there."""
        ...

    def consumer_status(self, broker_addr: str, group: str, topic: str,
                        client_id: str | None = None) -> dict[str, dict[tuple[str, int], int]]:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): each online client's (or ``client_id``'s)
        offsets of ``topic``: client id -> (broker name, queue id) -> offset."""
        ...

    def consume_message_directly(self, broker_addr: str, group: str, client_id: str, topic: str,
                                 offset_msg_id: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (309): the broker pushes the message at the offset id to the client."""
        ...

    # -- offsets -------------------------------------------------------------------------------------
    def query_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int) -> int:
        """QUERY_CONSUMER_OFFSET (14); -1 when the group never committed on the queue."""
        ...

    def get_min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        """GET_MIN_OFFSET (31)."""
        ...

    def get_max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET (30)."""
        ...

    def search_offset(self, broker_addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29): the first message stored at or after ``timestamp``."""
        ...

    def reset_offset(self, broker_addr: str, group: str, topic: str, timestamp: int, force: bool,
                     queue_id: int = -1, offset: int | None = None) -> dict[int, int] | None:
        """INVOKE_BROKER_TO_RESET_OFFSET (222) as Apache's mqadmin sends it: the whole topic (``queue_id``
        -1) to ``timestamp`` (-1: the max offset), or one queue to ``offset`` (else to ``timestamp``).
        The broker's table (queue id -> new offset) is returned; None when the broker is in client mode
        (useServerSideResetOffset=false) and no consumer of the group is online (CONSUMER_NOT_ONLINE):
        nothing moved, and the caller commits the offsets itself, as Apache's mqadmin falls back to.
        The broker checks topic and group exist (TOPIC_NOT_EXIST / SUBSCRIPTION_GROUP_NOT_EXIST)."""
        ...

    def commit_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET (15): store ``offset`` as the group's committed offset of the queue."""
        ...

    def clone_group_offset(self, broker_addr: str, src_group: str, dest_group: str, topic: str) -> None:
        """CLONE_GROUP_OFFSET (314)."""
        ...

    # -- messages ------------------------------------------------------------------------------------
    def query_message(self, broker_addr: str, topic: str, key: str, max_num: int, begin_timestamp: int,
                      end_timestamp: int, unique_key: bool = False) -> list[MessageRecord]:
        """QUERY_MESSAGE (12): exact KEYS-token matches, or with ``unique_key`` (_UNIQUE_KEY_QUERY)
        exact UNIQ_KEY matches oldest first."""
        ...

    def view_message(self, broker_addr: str, commit_log_offset: int) -> MessageRecord | None:
        """VIEW_MESSAGE_BY_ID (33): the message at a commit log offset; None past the end."""
        ...

    def read_queue(self, broker_addr: str, topic: str, queue_id: int, offset: int, max_num: int,
                   sub_expression: str = "*") -> QueueRead:
        """PULL_MESSAGE (11) as group TOOLS_CONSUMER, no suspend, no commit: one batch from ``offset``."""
        ...

    def send_message(self, topic: str, body: bytes, properties: dict[str, str], broker_name: str | None = None,
                     queue_id: int | None = None, producer_group: str | None = None,
                     unit_name: str | None = None, msg_trace: bool = False) -> SendResult:
        """SEND_MESSAGE_V2 (310) to ``broker_name``/``queue_id`` or to a queue the route picks, by a
        producer of ``producer_group`` (mqadmin's own group when None); ``unit_name`` ends the
        producer's client id (ip@instance@unit) as Java's ClientConfig builds it; ``msg_trace``
        also writes the send's Pub trace to RMQ_SYS_TRACE_TOPIC (sendMessage -m)."""
        ...

    def set_message_request_mode(self, broker_addr: str, topic: str, group: str, mode: str,
                                 pop_share_queue_num: int) -> None:
        """SET_MESSAGE_REQUEST_MODE (401): PULL or POP for the group on the topic."""
        ...

    def view_broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str
                               ) -> tuple[StatsWindow, StatsWindow, StatsWindow] | None:
        """VIEW_BROKER_STATS_DATA (315): (minute, hour, day) of TOPIC_PUT_NUMS/GROUP_GET_NUMS under
        ``stats_key``; None when the broker never counted anything under it."""
        ...

    # -- store maintenance -----------------------------------------------------------------------------
    def clean_expired_consume_queue(self, broker_addr: str) -> str:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306); what was removed, in words."""
        ...

    def delete_expired_commit_log(self, broker_addr: str) -> str:
        """DELETE_EXPIRED_COMMITLOG (329): retention now; what was deleted, in words."""
        ...

    def clean_unused_topic(self, broker_addr: str) -> str:
        """CLEAN_UNUSED_TOPIC (316); what was removed, in words."""
        ...

    # -- broker runtime --------------------------------------------------------------------------------
    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the KVTable mqadmin brokerStatus prints."""
        ...

    def broker_config(self, broker_addr: str, next_start: bool = False) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): the values the broker runs with; ``next_start``: its ACL keys, identity
        and ports as written to its config file for the next start (what Apache's reports)."""
        ...

    def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG (25): settings of a running broker (black-listed keys refused)."""
        ...

    # -- ACL 2.0 ---------------------------------------------------------------------------------------
    def create_user(self, broker_addr: str, user: User) -> None:
        """AUTH_CREATE_USER (3001); the broker validates (blank name or password, existing user ...)."""
        ...

    def update_user(self, broker_addr: str, username: str, password: str | None, user_type: str | None,
                    user_status: str | None) -> None:
        """AUTH_UPDATE_USER (3002): only the given fields change."""
        ...

    def delete_user(self, broker_addr: str, username: str) -> None:
        """AUTH_DELETE_USER (3003)."""
        ...

    def get_user(self, broker_addr: str, username: str) -> User | None:
        """AUTH_GET_USER (3004)."""
        ...

    def list_users(self, broker_addr: str, filter_text: str | None = None) -> list[User]:
        """AUTH_LIST_USER (3005)."""
        ...

    def create_acl(self, broker_addr: str, acl: Acl) -> None:
        """AUTH_CREATE_ACL (3006): create or merge into the subject's ACL."""
        ...

    def update_acl(self, broker_addr: str, acl: Acl) -> None:
        """AUTH_UPDATE_ACL (3007)."""
        ...

    def delete_acl(self, broker_addr: str, subject: str, resource: str | None = None) -> None:
        """AUTH_DELETE_ACL (3008): the subject's ACL, or one resource's entry."""
        ...

    def get_acl(self, broker_addr: str, subject: str) -> Acl | None:
        """AUTH_GET_ACL (3009); AdminError when the subject's user does not exist."""
        ...

    def list_acls(self, broker_addr: str, subject_filter: str | None = None,
                  resource_filter: str | None = None) -> list[Acl]:
        """AUTH_LIST_ACL (3010)."""
        ...


class StoreMaintenance(Protocol):
    """Jobs on a store directory's files (verifyStore, rebuildStore): local targets only."""

    def verify_store(self, progress: ProgressFn | None = None) -> VerifyReport:
        """Every CQ/BCQ unit and index entry checked against the commitlog, read-only."""
        ...

    def lost_found_records(self) -> list[LostRecord]:
        """Intact records crash recovery kept in the store's lost+found/."""
        ...

    def rebuild_store(self, parts: list[str], master: str, verify: bool, config_file: str | None = None,
                      progress: Callable[[str, int, int], None] | None = None, force: bool = False
                      ) -> RebuildSummary:
        """The Spark rebuild of consume queues, index files and offsets (or ``verify``: compare only);
        ``force``: rebuild up to a corrupt record even when intact data follows it."""
        ...
