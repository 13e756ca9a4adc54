"""Authorization: may this subject perform these actions on this resource from this address?

Why this module exists: the remoting adapter, the gRPC adapter and the Broker must demand exactly the
same (resource, actions) pairs for a request — :func:`checks_for_request` and :func:`checks_for_grpc`
are that one mapping (spec D.4 and grpc-v2 2.2) — and must decide them the same way: the Authorizer
runs the evaluator, writes the audit line, raises RocketMQ's error, and in the stateful strategy caches
the decision per connection + subject + resource + actions + source IP until users or ACLs change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from broker_core.auth.audit import AuditLog
from broker_core.auth.cache import CachedDecisions, DecisionCache, stateful_cache
from broker_core.auth.config import Strategy
from broker_core.auth.errors import AuthorizationError
from broker_core.auth.evaluator import Explanation, evaluate
from broker_core.auth.model import (
    Acl,
    Action,
    Resource,
    Subject,
    User,
    is_retry_topic,
    normalize_actions,
)

Check = tuple[Resource, tuple[Action, ...]]


@dataclass(frozen=True)
class AuthorizationContext:
    """One demanded permission. ``actions`` accepts one Action (or name) or several; any one suffices."""

    subject: Subject | None
    resource: Resource
    actions: tuple[Action, ...]
    source_ip: str | None
    request_code: str | None = None
    channel_id: str | None = None

    def __init__(
        self,
        subject: Subject | str | None,
        resource: Resource | str,
        actions: Action | str | Iterable[Action | str],
        source_ip: str | None,
        request_code: int | str | None = None,
        channel_id: str | None = None,
    ) -> None:
        object.__setattr__(self, "subject", Subject.parse(subject) if isinstance(subject, str) else subject)
        object.__setattr__(self, "resource", Resource.parse(resource))
        object.__setattr__(self, "actions", normalize_actions(actions))
        object.__setattr__(self, "source_ip", source_ip_of(source_ip))
        object.__setattr__(self, "request_code", None if request_code is None else str(request_code))
        object.__setattr__(self, "channel_id", channel_id)


def source_ip_of(remote_addr: str | None) -> str | None:
    """The peer address without its port (``10.0.0.5:50001`` -> ``10.0.0.5``, ``[::1]:5`` -> ``::1``)."""
    if not remote_addr:
        return remote_addr
    text = remote_addr.strip()
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text


@dataclass
class Authorizer(CachedDecisions):
    """Decides AuthorizationContexts against the current user and ACL tables."""

    get_user: Callable[[str], User | None]
    get_acl: Callable[[Subject], Acl | None]
    audit: AuditLog
    strategy: Strategy = Strategy.STATELESS
    clock: Callable[[], int] | None = None
    cache_max_entries: int = 10000
    cache_ttl_ms: int = 60_000
    _cache: DecisionCache[Explanation] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._cache = stateful_cache(self.strategy, self.cache_max_entries, self.cache_ttl_ms, self.clock)

    def explain(self, context: AuthorizationContext) -> Explanation:
        """The decision and its reason, from the current tables (no cache, no audit line)."""
        subject = context.subject
        user = self.get_user(subject.name) if subject else None
        acl = self.get_acl(subject) if subject and user else None
        return evaluate(subject, user, acl, context.resource, context.actions, context.source_ip)

    def authorize(self, context: AuthorizationContext) -> Explanation:
        """Return the allowing explanation or raise AuthorizationError (code 16 NO_PERMISSION)."""
        explanation: Explanation | None = None
        key = None
        if self._cache is not None and context.channel_id:
            key = (
                context.channel_id,
                context.subject.key if context.subject else "",
                context.resource.key,
                tuple(a.value for a in context.actions),
                context.source_ip,
            )
            explanation = self._cache.get(key)
        if explanation is None:
            explanation = self.explain(context)
            if key is not None and self._cache is not None:
                self._cache.put(key, explanation)
        self.audit.authorization(
            context.subject, explanation.decision, context.actions, context.source_ip,
            context.resource, context.request_code,
        )
        if not explanation.allowed:
            raise AuthorizationError(explanation.failure_message())
        return explanation



# ---------------------------------------------------------------------------------------------
# Request -> demanded permissions (one mapping for remoting, gRPC and the Broker).

# Requests that are authenticated but demand no authorization context (spec D.4, last row).
AUTHENTICATION_ONLY_REQUESTS = frozenset({
    "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", "GET_BROKER_CONFIG", "UPDATE_BROKER_CONFIG",
    "GET_BROKER_RUNTIME_INFO", "GET_ALL_TOPIC_CONFIG", "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
    # broker maintenance and statistics (mqadmin cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic,
    # setConsumeMode, statsAll): their headers carry no resource to authorize against
    "CLEAN_EXPIRED_CONSUMEQUEUE", "DELETE_EXPIRED_COMMITLOG", "CLEAN_UNUSED_TOPIC", "SET_MESSAGE_REQUEST_MODE",
    # mqadmin updateSubGroupList: a list of what UPDATE_AND_CREATE_SUBSCRIPTIONGROUP sends (Apache: no header)
    "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST",
})
# Broker-wide reads whose header RocketMQ annotates with the Cluster resource (no resource field):
# producer connections (204), broker statistics (315, mqadmin statsAll) and every group's consume stats
# (317, mqadmin brokerConsumeStats) are Cluster:<cluster> [Get].
_CLUSTER_GET = frozenset({"GET_PRODUCER_CONNECTION_LIST", "VIEW_BROKER_STATS_DATA", "GET_BROKER_CONSUME_STATS"})

_SEND = frozenset({"SEND_MESSAGE", "SEND_MESSAGE_V2", "SEND_BATCH_MESSAGE"})
_TOPIC_GET = frozenset({
    "VIEW_MESSAGE_BY_ID", "GET_MAX_OFFSET", "GET_MIN_OFFSET", "SEARCH_OFFSET_BY_TIMESTAMP",
    "GET_EARLIEST_MSG_STORETIME", "GET_TOPIC_STATS_INFO", "GET_TOPIC_CONFIG", "QUERY_TOPIC_CONSUME_BY_WHO",
})
_GROUP_TOPIC_SUB = frozenset({
    "POP_MESSAGE", "ACK_MESSAGE", "BATCH_ACK_MESSAGE", "CHANGE_MESSAGE_INVISIBLETIME",
    "PEEK_MESSAGE", "NOTIFICATION", "POLLING_INFO",
})
_AUTH_UPDATE = frozenset({
    "AUTH_CREATE_USER", "AUTH_UPDATE_USER", "AUTH_DELETE_USER",
    "AUTH_CREATE_ACL", "AUTH_UPDATE_ACL", "AUTH_DELETE_ACL",
})
_AUTH_GET = frozenset({"AUTH_GET_USER", "AUTH_LIST_USER", "AUTH_GET_ACL", "AUTH_LIST_ACL"})

KNOWN_REQUESTS = (
    AUTHENTICATION_ONLY_REQUESTS | _CLUSTER_GET | _SEND | _TOPIC_GET | _GROUP_TOPIC_SUB | _AUTH_UPDATE | _AUTH_GET
    | frozenset({
        "PULL_MESSAGE", "QUERY_MESSAGE", "HEART_BEAT", "UNREGISTER_CLIENT", "GET_CONSUMER_LIST_BY_GROUP",
        "QUERY_CONSUMER_OFFSET", "UPDATE_CONSUMER_OFFSET", "LOCK_BATCH_MQ", "UNLOCK_BATCH_MQ",
        "END_TRANSACTION", "CONSUMER_SEND_MSG_BACK", "UPDATE_AND_CREATE_TOPIC", "UPDATE_AND_CREATE_TOPIC_LIST",
        "DELETE_TOPIC_IN_BROKER",
        "DELETE_SUBSCRIPTIONGROUP", "GET_CONSUME_STATS", "INVOKE_BROKER_TO_RESET_OFFSET", "CLONE_GROUP_OFFSET",
        "GET_CONSUMER_CONNECTION_LIST", "QUERY_CONSUME_QUEUE", "GET_SUBSCRIPTIONGROUP_CONFIG",
        "GET_CONSUMER_RUNNING_INFO", "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", "CONSUME_MESSAGE_DIRECTLY",
    })
)


def _topic_or_group(topic: str) -> Resource:
    """A retry topic stands for its consumer group."""
    return Resource.of_group(topic) if is_retry_topic(topic) else Resource.of_topic(topic)


def _need(value: str | None, what: str, request: str) -> str:
    """``value``, or a refusal: a request naming no topic or group cannot be granted anything (it came
    from a raw client; the official ones check it first), and must not surface as a server error."""
    if not value:
        raise AuthorizationError(f"{request} needs a {what} to be authorized; the request names none")
    return value


def checks_for_request(
    request: str,
    *,
    topic: str | None = None,
    group: str | None = None,
    topics: Iterable[str] = (),
    subscriptions: Mapping[str, Iterable[str]] | None = None,
    cluster_name: str = "DefaultCluster",
) -> list[Check]:
    """The (resource, actions) pairs a remoting request demands, by RocketMQ request name.

    ``group`` is the producer group for sends, the consumer group otherwise; ``topics`` lists extra
    topics (LOCK/UNLOCK_BATCH_MQ, GET_CONSUME_STATS) or the topics of UPDATE_AND_CREATE_TOPIC_LIST; ``subscriptions`` maps each consumer group of a
    HEART_BEAT to its subscribed topics. An unknown request name raises ValueError, so a typo never
    silently skips authorization.
    """
    name = request.strip().upper()
    pub, sub, get = (Action.PUB,), (Action.SUB,), (Action.GET,)
    if name not in KNOWN_REQUESTS:
        raise ValueError(f"no authorization mapping for request {request!r}")
    if name in AUTHENTICATION_ONLY_REQUESTS:
        return []
    if name in _SEND:
        t = _need(topic, "topic", name)
        if is_retry_topic(t):
            return [(Resource.of_group(group or t), sub)]
        return [(Resource.of_topic(t), pub)]
    if name == "PULL_MESSAGE":
        t = _need(topic, "topic", name)
        g = _need(group, "consumer group", name)
        checks: list[Check] = [] if is_retry_topic(t) else [(Resource.of_topic(t), sub)]
        return checks + [(Resource.of_group(g), sub)]
    if name == "QUERY_MESSAGE":
        return [(_topic_or_group(_need(topic, "topic", name)), (Action.SUB, Action.GET))]
    if name in _TOPIC_GET:
        return [(_topic_or_group(_need(topic, "topic", name)), get)]
    if name in _CLUSTER_GET:
        return [(Resource.of_cluster(cluster_name), get)]
    if name == "QUERY_CONSUME_QUEUE":  # mqadmin queryCq -g: the consumer group is optional
        checks = [(_topic_or_group(_need(topic, "topic", name)), get)]
        return checks + ([(Resource.of_group(group), get)] if group else [])
    if name in ("GET_SUBSCRIPTIONGROUP_CONFIG", "GET_CONSUMER_RUNNING_INFO"):
        return [(Resource.of_group(_need(group, "group", name)), get)]
    if name == "INVOKE_BROKER_TO_GET_CONSUMER_STATUS":  # the header's fields in order: topic, then group
        t = _need(topic, "topic", name)
        return [(_topic_or_group(t), get), (Resource.of_group(_need(group, "group", name)), get)]
    if name == "CONSUME_MESSAGE_DIRECTLY":
        # the broker makes a consumer of the group consume a message at once: Sub, as a pull would
        checks = [(Resource.of_group(_need(group, "consumer group", name)), sub)]
        return checks + ([(_topic_or_group(topic), sub)] if topic else [])
    if name == "HEART_BEAT":
        out: list[Check] = []
        for g, subscribed in (subscriptions or {}).items():
            out.append((Resource.of_group(g), sub))
            out.extend((Resource.of_topic(t), sub) for t in subscribed if not is_retry_topic(t))
        return out
    if name == "UNREGISTER_CLIENT":
        return [(Resource.of_group(group), sub)] if group else []
    if name == "GET_CONSUMER_LIST_BY_GROUP":
        return [(Resource.of_group(_need(group, "consumer group", name)), (Action.SUB, Action.GET))]
    if name in ("QUERY_CONSUMER_OFFSET", "UPDATE_CONSUMER_OFFSET"):
        acts = (Action.SUB, Action.GET) if name == "QUERY_CONSUMER_OFFSET" else (Action.SUB, Action.UPDATE)
        t = _need(topic, "topic", name)
        g = _need(group, "consumer group", name)
        checks = [] if is_retry_topic(t) else [(Resource.of_topic(t), acts)]
        return checks + [(Resource.of_group(g), acts)]
    if name in ("LOCK_BATCH_MQ", "UNLOCK_BATCH_MQ"):
        g = _need(group, "consumer group", name)
        all_topics = ([topic] if topic else []) + list(topics)
        return [(Resource.of_group(g), sub)] + [(_topic_or_group(t), sub) for t in dict.fromkeys(all_topics)]
    if name == "END_TRANSACTION":
        return [(Resource.of_topic(topic), pub)] if topic else []
    if name == "CONSUMER_SEND_MSG_BACK":
        return [(Resource.of_group(_need(group, "consumer group", name)), sub)]
    if name == "UPDATE_AND_CREATE_TOPIC":
        return [(_topic_or_group(_need(topic, "topic", name)), (Action.CREATE,))]
    if name == "UPDATE_AND_CREATE_TOPIC_LIST":
        # Create on every topic of the list, as UPDATE_AND_CREATE_TOPIC asks for one. Apache's header says
        # action Create but names no resource, so its broker asks nothing and any signed user may create
        # any topic through the list; the list asking less than the single request would be that hole.
        return [(_topic_or_group(t), (Action.CREATE,)) for t in dict.fromkeys(topics)]
    if name == "DELETE_TOPIC_IN_BROKER":
        return [(_topic_or_group(_need(topic, "topic", name)), (Action.DELETE,))]
    if name == "DELETE_SUBSCRIPTIONGROUP":
        return [(Resource.of_group(_need(group, "group", name)), (Action.DELETE,))]
    if name == "GET_CONSUME_STATS":
        g = _need(group, "consumer group", name)
        all_topics = ([topic] if topic else []) + list(topics)
        return [(Resource.of_group(g), get)] + [(_topic_or_group(t), get) for t in dict.fromkeys(all_topics)]
    if name == "INVOKE_BROKER_TO_RESET_OFFSET":
        g = _need(group, "group", name)
        t = _need(topic, "topic", name)
        return [(Resource.of_group(g), (Action.UPDATE,)), (_topic_or_group(t), (Action.UPDATE,))]
    if name == "CLONE_GROUP_OFFSET":
        # CloneGroupOffsetRequestHeader's annotations: Update on destGroup and on the topic when one is
        # named (none: every topic of the source group); the source group is only read, so not asked
        checks = [(Resource.of_group(_need(group, "destination group", name)), (Action.UPDATE,))]
        return checks + ([(_topic_or_group(topic), (Action.UPDATE,))] if topic else [])
    if name == "GET_CONSUMER_CONNECTION_LIST":
        return [(Resource.of_group(_need(group, "consumer group", name)), get)]
    if name in _GROUP_TOPIC_SUB:
        g = _need(group, "consumer group", name)
        checks = [(Resource.of_group(g), sub)]
        if topic:
            checks.append((_topic_or_group(topic), sub))
        return checks
    if name in _AUTH_UPDATE:
        return [(Resource.of_cluster(cluster_name), (Action.UPDATE,))]
    if name in _AUTH_GET:
        return [(Resource.of_cluster(cluster_name), get)]
    raise ValueError(f"no authorization mapping for request {request!r}")  # pragma: no cover


GRPC_RPCS = frozenset({
    "SendMessage", "RecallMessage", "EndTransaction", "QueryRoute", "Heartbeat", "ReceiveMessage",
    "AckMessage", "ForwardMessageToDeadLetterQueue", "QueryAssignment", "ChangeInvisibleDuration",
    "NotifyClientTermination", "Telemetry",
})


def checks_for_grpc(
    rpc: str,
    *,
    topic: str | None = None,
    group: str | None = None,
    is_consumer: bool = False,
    publishing_topics: Iterable[str] = (),
    subscription_topics: Iterable[str] = (),
) -> list[Check]:
    """The (resource, actions) pairs a gRPC v2 call demands (grpc-v2 spec 2.2), by RPC name.

    For Telemetry pass the settings' publishing topics or the subscription's group + topics; for
    Heartbeat set ``is_consumer`` for consumer client types (producer heartbeats are unchecked).
    """
    pub, sub = (Action.PUB,), (Action.SUB,)
    if rpc not in GRPC_RPCS:
        raise ValueError(f"no authorization mapping for gRPC call {rpc!r}")
    if rpc in ("SendMessage", "RecallMessage", "EndTransaction"):
        return [(Resource.of_topic(_need(topic, "topic", rpc)), pub)]
    if rpc == "QueryRoute":
        return [(Resource.of_topic(_need(topic, "topic", rpc)), (Action.PUB, Action.SUB))]
    if rpc == "Heartbeat":
        return [(Resource.of_group(group), sub)] if is_consumer and group else []
    if rpc in ("ReceiveMessage", "AckMessage", "ForwardMessageToDeadLetterQueue", "QueryAssignment"):
        return [
            (Resource.of_group(_need(group, "group", rpc)), sub),
            (_topic_or_group(_need(topic, "topic", rpc)), sub),
        ]
    if rpc == "ChangeInvisibleDuration":
        return [(Resource.of_group(_need(group, "group", rpc)), sub)]
    if rpc == "NotifyClientTermination":
        return [(Resource.of_group(group), sub)] if group else []
    # Telemetry (settings commands only)
    checks: list[Check] = [(Resource.of_topic(t), pub) for t in publishing_topics]
    sub_topics = list(subscription_topics)
    if group:
        checks.append((Resource.of_group(group), sub))
    checks.extend((Resource.of_topic(t), sub) for t in sub_topics)
    return checks
