"""Actions over broker resources: topics, topic permissions, groups, users, ACLs, broker config.

Each plans by reading the current state through the Admin interface and comparing it with the
arguments; only the arguments given are managed (``read_queues`` omitted leaves an existing topic's
queues alone, and is 8 when the topic is created, as mqadmin's default). Passwords never appear in a
plan: a changed password is reported as ``********`` -> ``********``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any

from broker_core.auth.errors import AuthError
from broker_core.auth.model import Acl, PolicyType, Resource, normalize_actions
from broker_core.broker.config_update import AUTH_KEYS, START_ONLY_KEYS, update_refusal
from broker_core.broker.limits import MAX_RETRY_TIMES, MAX_TOPIC_QUEUE_NUMS
from broker_core.broker.topic_validator import (
    DLQ_GROUP_TOPIC_PREFIX,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    validate_group,
    validate_topic,
)
from mqadmin.admin import Admin, BrokerIdentity, TopicInfo, change_each
from mqadmin.errors import NotFoundError
from mqadmin.transport.values import SubscriptionGroupInfo
from playbooks.actions.base import (
    PLANNED_IN_CHECK,
    ActionContext,
    Change,
    Outcome,
    Param,
    Plan,
    PlannedAction,
    at_least,
    planned_on,
)
from playbooks.errors import StepError
from playbooks.templating import MASK

STR = (str,)
INT = (int,)
BOOL = (bool,)
LIST_OR_STR = (list, str)
PERM_READ, PERM_WRITE = 4, 2
DEFAULT_QUEUES = 8

# A topic pattern never matches RocketMQ's own topics (TopicValidator's names): not the operator's to drain.
_SYSTEM_PREFIXES = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, SYSTEM_TOPIC_PREFIX)


def parse_perm(value: int | str) -> int:
    """6, "6", "RW", "rw-", "R", "W" -> the perm bits (2 write, 4 read)."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    bits = 0
    for ch in text.upper():
        if ch == "R":
            bits |= PERM_READ
        elif ch == "W":
            bits |= PERM_WRITE
        elif ch == "X":
            bits |= 1
        elif ch != "-":
            raise StepError(f"perm {value!r}: expected a number (2 W, 4 R, 6 RW) or letters like RW")
    return bits


def _auth(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except AuthError as e:
        raise StepError(e.message) from None


def _perm(value: int | str) -> int:
    try:
        perm = parse_perm(value)
    except StepError as e:
        raise ValueError(e.message.removeprefix(f"perm {value!r}: ")) from None
    if not 0 <= perm <= 15:
        raise ValueError(f"must be a bit set of 8/4/2/1 (0..15), got {value!r}")
    return perm


def _topic_name(value: str) -> str:
    bad = validate_topic(value)
    if bad:
        raise ValueError(f"{value!r}: {bad}")
    return value


def _group_name(value: str) -> str:
    bad = validate_group(value)
    if bad:
        raise ValueError(f"{value!r}: {bad}")
    return value


def _resource_list(value: str | list[Any]) -> str | list[Any]:
    try:
        _resources(value)
    except StepError as e:
        raise ValueError(f"{value!r}: {e.message}") from None
    return value


def _action_list(value: str | list[Any]) -> str | list[str]:
    items = value if isinstance(value, str) else [str(a) for a in value]
    try:
        normalize_actions(items)
    except ValueError as e:
        raise ValueError(f"{value!r}: {e}") from None
    return items


# ------------------------------------------------------------------------------------------- topics

class TopicEnsure(PlannedAction):
    name = "topic.ensure"
    params = {
        "topic": Param(STR, required=True, parse=_topic_name),
        "read_queues": Param(INT, parse=at_least(0, MAX_TOPIC_QUEUE_NUMS)),
        "write_queues": Param(INT, parse=at_least(0, MAX_TOPIC_QUEUE_NUMS)),
        "perm": Param((int, str), parse=_perm), "order": Param(BOOL),
        "queue_type": Param(STR, choices=("SimpleCQ", "BatchCQ")),
        "attributes": Param((dict,), help="topic attributes to set, e.g. {message.type: FIFO}"),
    }

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Each broker of the target is planned against its own config (a cluster's brokers may hold
        the topic with different queue numbers, or one may lack it: it gets it). Also judged here, with
        the broker's own rules (``Admin.topic_update_problem``): a change the broker would refuse (a
        bad name, -1 queues, an unknown attribute) fails the plan, so --check does not promise it and a
        real run fails before it creates or opens a store for writing."""
        topic = args["topic"]
        want = self._wanted(args)
        brokers = admin.brokers()
        changes: list[Change] = []
        differ = []
        data: dict[str, Any] | None = None
        for b in brokers:
            what = _on(f"topic {topic}", b, brokers)
            cur = _topic_on(admin, topic, b)
            if cur is None:
                mine = [Change(what, "exists", False, True)] + [Change(what, k, None, v) for k, v in want.items()]
                seen = {"topic": topic, **want}
            else:
                current = {"read_queues": cur.read_queue_nums, "write_queues": cur.write_queue_nums,
                           "perm": cur.perm, "order": cur.order, "queue_type": cur.queue_type,
                           **{f"attributes.{k}": v for k, v in cur.attributes.items() if k != "queue.type"}}
                mine = [Change(what, k, current.get(k), v) for k, v in want.items() if current.get(k) != v]
                seen = {"topic": topic, **current}
            data = seen if data is None else data  # register: sees the first broker's topic
            if mine:
                problem = admin.topic_update_problem(self._topic_info(topic, want, cur), [b])
                if problem:
                    raise StepError(f"{what}: {problem}")
                changes += mine
                differ.append(b)
        return Plan(changes, data or {"topic": topic}, brokers=differ)

    @staticmethod
    def _wanted(args: dict[str, Any]) -> dict[str, Any]:
        want: dict[str, Any] = {}
        for key in ("read_queues", "write_queues", "order", "queue_type"):
            if args.get(key) is not None:
                want[key] = args[key]
        if args.get("perm") is not None:
            want["perm"] = parse_perm(args["perm"])
        for k, v in (args.get("attributes") or {}).items():
            if k == "queue.type":
                want["queue_type"] = str(v)
            else:
                want[f"attributes.{k}"] = "true" if v is True else "false" if v is False else str(v)
        return want

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        """Only the wanted fields change, over each broker's own topic: another broker's queue
        numbers sent to this one would cut (or grow) its queues."""
        topic = args["topic"]
        want = self._wanted(args)

        def ensure(b: BrokerIdentity) -> TopicInfo:
            return admin.update_topic(self._topic_info(topic, want, _topic_on(admin, topic, b)), targets=[b])

        change_each(plan.brokers, ensure, _broker_addr)

    @staticmethod
    def _topic_info(topic: str, want: dict[str, Any], cur: TopicInfo | None) -> TopicInfo:
        """What UPDATE_AND_CREATE_TOPIC sends: the wanted fields over the current topic (or defaults)."""
        default_q = DEFAULT_QUEUES
        mods = {f"+{k.split('.', 1)[1]}": v for k, v in want.items() if k.startswith("attributes.")}
        if "queue_type" in want:
            mods["+queue.type"] = want["queue_type"]
        return TopicInfo(
            topic,
            want.get("read_queues", cur.read_queue_nums if cur else default_q),
            want.get("write_queues", cur.write_queue_nums if cur else default_q),
            want.get("perm", cur.perm if cur else PERM_READ | PERM_WRITE),
            cur.topic_filter_type if cur else "SINGLE_TAG", cur.topic_sys_flag if cur else 0,
            want.get("order", cur.order if cur else False), mods)


class TopicAbsent(PlannedAction):
    name = "topic.absent"
    params = {"topic": Param(STR, required=True)}

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        topic = args["topic"]
        try:
            admin.topic_info(topic)
        except NotFoundError:
            return Plan([])
        preview = admin.delete_topic(topic, admin.identity().cluster_name, dry_run=True)
        return Plan([Change(f"topic {topic}", "exists", True, False)], {"delete": preview.to_dict()})

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        admin.delete_topic(args["topic"], admin.identity().cluster_name)


class TopicPerm(PlannedAction):
    """Wipe or add read/write permission on topics (drain a broker: ``write: false`` on ``"*"``)."""

    name = "topic.perm"
    params = {"topic": Param(LIST_OR_STR, required=True, help="a name, a glob (orders-*) or a list"),
              "write": Param(BOOL), "read": Param(BOOL)}

    def _topics(self, admin: Admin, args: dict[str, Any], brokers: list[BrokerIdentity]) -> list[str]:
        """The topics named: those that exist and (--check) those an earlier step of this run creates,
        a glob's too (``orders-*`` after ``topic.ensure orders-events``: the real run finds it)."""
        spec = args["topic"]
        patterns = [spec] if isinstance(spec, str) else [str(s) for s in spec]
        existing = admin.list_topics()
        coming = _planned_topics(args)
        out: list[str] = []
        for p in patterns:
            if any(ch in p for ch in "*?["):
                out.extend(t for t in [*existing, *coming] if fnmatch.fnmatchcase(t, p) and not _is_system(t, brokers))
            elif p in existing or p in coming:
                out.append(p)
            else:
                raise StepError(f"topic [{p}] does not exist")
        return list(dict.fromkeys(out))

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Each broker that has a topic is planned from its own perm (a cluster's brokers need not agree);
        under --check, a broker an earlier step creates the topic on from read-write (topic.ensure's
        default perm)."""
        if args.get("write") is None and args.get("read") is None:
            raise StepError("topic.perm needs write: and/or read: (true to add, false to wipe)")
        brokers = admin.brokers()
        changes = []
        perms: dict[str, int] = {}
        differ: list[BrokerIdentity] = []
        for topic in self._topics(admin, args, brokers):
            for b in brokers:
                cur = _topic_on(admin, topic, b)
                if cur is not None:
                    old: int | None = cur.perm
                elif planned_on(args, f"topic {topic}", b.broker_name):
                    old = None  # --check: created (read-write) by an earlier step
                else:
                    continue
                was = PERM_READ | PERM_WRITE if old is None else old
                new = _perm_after(was, args)
                perms.setdefault(topic, new)  # register: sees the first broker's
                if new != was:
                    changes.append(Change(_on(f"topic {topic}", b, brokers), "perm",
                                          None if old is None else _perm_text(old), _perm_text(new)))
                    differ += [] if b in differ else [b]
        return Plan(changes, {"topics": perms}, brokers=differ)

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        """Only the perm changes, on each broker's own topic config (its queue numbers stay its own)."""
        topics = list(plan.data["topics"])

        def wipe_or_add(b: BrokerIdentity) -> None:
            for topic in topics:
                cur = _topic_on(admin, topic, b)
                if cur is not None and _perm_after(cur.perm, args) != cur.perm:
                    admin.update_topic(dataclasses.replace(cur, perm=_perm_after(cur.perm, args), attributes={}),
                                       targets=[b])

        change_each(plan.brokers, wipe_or_add, _broker_addr)


def _perm_after(perm: int, args: dict[str, Any]) -> int:
    for key, bit in (("write", PERM_WRITE), ("read", PERM_READ)):
        if args.get(key) is True:
            perm |= bit
        elif args.get(key) is False:
            perm &= ~bit
    return perm


def _planned_topics(args: dict[str, Any]) -> list[str]:
    """--check: the topics earlier steps of this run create on this target (``topic t [on broker b]``)."""
    out = [p.removeprefix("topic ").split(" on broker ", 1)[0]
           for p in args.get(PLANNED_IN_CHECK) or () if p.startswith("topic ")]
    return list(dict.fromkeys(out))


def _topic_on(admin: Admin, topic: str, broker: BrokerIdentity) -> TopicInfo | None:
    """The topic as ``broker`` itself stores it; None when it does not have it."""
    try:
        return admin.topic_info(topic, among=[broker])
    except NotFoundError:
        return None


def _on(what: str, broker: BrokerIdentity, brokers: list[BrokerIdentity]) -> str:
    """``what`` a change names: with several brokers behind the target, also which broker (each has its
    own config, and the plan lists every broker that differs); a store or a one-broker cluster as before."""
    return what if len(brokers) == 1 else f"{what} on broker {broker.broker_name}"


def _broker_addr(broker: BrokerIdentity) -> str:
    return broker.broker_addr


def _is_system(topic: str, brokers: list[BrokerIdentity]) -> bool:
    return (topic.startswith(_SYSTEM_PREFIXES) or topic in SYSTEM_TOPICS
            or any(topic in (b.cluster_name, b.broker_name, f"{b.cluster_name}_{REPLY_TOPIC_POSTFIX}")
                   for b in brokers))


def _perm_text(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + ("X" if perm & 1 else "-")


# ------------------------------------------------------------------------------------------- groups

_GROUP_FIELDS = ("consume_enable", "consume_from_min_enable", "consume_broadcast_enable",
                 "consume_message_orderly", "retry_queue_nums", "retry_max_times")


class GroupEnsure(PlannedAction):
    name = "group.ensure"
    params = {"group": Param(STR, required=True, parse=_group_name),
              **{f: Param(BOOL) for f in _GROUP_FIELDS if not f.startswith("retry")},
              "retry_queue_nums": Param(INT, parse=at_least(0, MAX_TOPIC_QUEUE_NUMS)),
              "retry_max_times": Param(INT, parse=at_least(-1, MAX_RETRY_TIMES))}

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Every broker of the target against its own config: one that lacks the group (it joined
        later, or missed a partly failed run) gets it."""
        group = args["group"]
        want = {f: args[f] for f in _GROUP_FIELDS if args.get(f) is not None}
        _check_group(group, want)
        brokers = admin.brokers()
        configs = _group_configs(admin, group)
        changes: list[Change] = []
        differ = []
        data: dict[str, Any] | None = None
        for b in brokers:
            what = _on(f"group {group}", b, brokers)
            cur = configs.get(b)
            if cur is None:
                mine = [Change(what, "exists", False, True)] + [Change(what, k, None, v) for k, v in want.items()]
                seen = {"group": group, **want}
            else:
                current = {f: getattr(cur, f) for f in _GROUP_FIELDS}
                mine = [Change(what, k, current[k], v) for k, v in want.items() if current[k] != v]
                seen = {"group": group, **current}
            data = seen if data is None else data  # register: sees the first broker's group
            if mine:
                changes += mine
                differ.append(b)
        return Plan(changes, data or {"group": group}, brokers=differ)

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        """The given fields over each broker's own config (the others stay as that broker has them)."""
        group = args["group"]
        configs = _group_configs(admin, group)

        def ensure(b: BrokerIdentity) -> SubscriptionGroupInfo:
            cur = configs.get(b) or SubscriptionGroupInfo(group)
            for f in _GROUP_FIELDS:
                if args.get(f) is not None:
                    setattr(cur, f, args[f])
            cur.attributes = {}
            return admin.update_sub_group(cur, targets=[b])

        change_each(plan.brokers, ensure, _broker_addr)


def _group_configs(admin: Admin, group: str) -> dict[BrokerIdentity, SubscriptionGroupInfo]:
    """The group's config on each broker that has it."""
    try:
        return dict(admin.consumer_configs(group))
    except NotFoundError:
        return {}


def _check_group(group: str, want: dict[str, Any]) -> None:
    """What UPDATE_AND_CREATE_SUBSCRIPTIONGROUP refuses (SubscriptionGroupManager's name check and
    ranges), judged at plan time: --check must not promise it, nor the real run create a store for it."""
    bad = validate_group(group)
    if bad:
        raise StepError(bad)
    for key, lo, hi in (("retry_queue_nums", 0, MAX_TOPIC_QUEUE_NUMS), ("retry_max_times", -1, MAX_RETRY_TIMES)):
        if key in want and not lo <= want[key] <= hi:
            raise StepError(f"group {group}: {key} must be {lo}..{hi}, got {want[key]}")


class GroupAbsent(PlannedAction):
    name = "group.absent"
    params = {"group": Param(STR, required=True),
              "remove_offsets": Param(BOOL, default=True, help="also drop the group's consumer offsets")}

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        group = args["group"]
        if admin.get_sub_group(group) is None and group not in admin.list_groups():
            return Plan([])
        return Plan([Change(f"group {group}", "exists", True, False)])

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        try:
            admin.delete_sub_group(args["group"], remove_offset=bool(args.get("remove_offsets", True)))
        except NotFoundError:
            pass


# ------------------------------------------------------------------------------------------- users

class UserEnsure(PlannedAction):
    name = "user.ensure"
    params = {"username": Param(STR, required=True), "password": Param(STR),
              "user_type": Param(STR, choices=("Normal", "Super")),
              "user_status": Param(STR, choices=("enable", "disable"))}

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Every broker of the target: each keeps its own users, and one that lacks the user gets it."""
        name = args["username"]
        brokers = admin.brokers()
        changes: list[Change] = []
        differ = []
        data: dict[str, Any] | None = None
        for b in brokers:
            mine, seen = self._plan_on(_auth(admin.get_user, name, b.broker_addr), _on(f"user {name}", b, brokers),
                                       args)
            data = seen if data is None else data  # register: sees the first broker's user
            if mine:
                changes += mine
                differ.append(b)
        return Plan(changes, data or {"username": name}, brokers=differ)

    @staticmethod
    def _plan_on(cur: Any, what: str, args: dict[str, Any]) -> tuple[list[Change], dict[str, Any]]:
        name = args["username"]
        if cur is None:
            if not args.get("password"):
                raise StepError(f"{what} does not exist; give password: to create it")
            changes = [Change(what, "exists", False, True), Change(what, "password", None, MASK)]
            for key in ("user_type", "user_status"):
                if args.get(key):
                    changes.append(Change(what, key, None, args[key]))
            return changes, {"username": name}
        changes = []
        if args.get("password") and args["password"] != cur.password:
            changes.append(Change(what, "password", MASK, MASK))
        if args.get("user_type") and args["user_type"].lower() != cur.user_type.value.lower():
            changes.append(Change(what, "user_type", cur.user_type.value, args["user_type"]))
        if args.get("user_status") and args["user_status"].lower() != cur.user_status.value.lower():
            changes.append(Change(what, "user_status", cur.user_status.value, args["user_status"]))
        return changes, {"username": name, "user_type": cur.user_type.value, "user_status": cur.user_status.value}

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        name = args["username"]

        def ensure(b: BrokerIdentity) -> None:
            addrs = [b.broker_addr]
            if _auth(admin.get_user, name, b.broker_addr) is None:
                _auth(admin.create_user, name, args["password"], args.get("user_type"), addrs, False)
                if args.get("user_status"):
                    _auth(admin.update_user, name, None, None, args["user_status"], addrs, False)
            else:
                _auth(admin.update_user, name, args.get("password"), args.get("user_type"), args.get("user_status"),
                      addrs, False)

        change_each(plan.brokers, ensure, _broker_addr)


class UserAbsent(PlannedAction):
    name = "user.absent"
    params = {"username": Param(STR, required=True)}

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Every broker of the target: each keeps its own users, so one that still has the user (and
        only that one) deletes it; "the first broker has none" is not "no broker has it"."""
        name = args["username"]
        brokers = admin.brokers()
        have = [b for b in brokers if _auth(admin.get_user, name, b.broker_addr) is not None]
        return Plan([Change(_on(f"user {name}", b, brokers), "exists", True, False) for b in have], brokers=have)

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        """AUTH_DELETE_USER on the brokers that have the user: another refuses it ("not exist")."""
        change_each(plan.brokers, lambda b: _auth(admin.delete_user, args["username"], [b.broker_addr]), _broker_addr)


# ------------------------------------------------------------------------------------------- ACLs

def _subject(args: dict[str, Any]) -> str:
    subject = args["subject"].strip()
    return subject if ":" in subject else f"User:{subject}"


def _resources(value: str | list[str]) -> list[Resource]:
    items = [value] if isinstance(value, str) else value
    try:
        return [Resource.parse(str(r)) for r in items]
    except AuthError as e:
        raise StepError(e.message) from None


class AclEnsure(PlannedAction):
    name = "acl.ensure"
    params = {"subject": Param(STR, required=True, help="User:name"),
              "resources": Param(LIST_OR_STR, required=True, parse=_resource_list),
              "actions": Param(LIST_OR_STR, required=True, parse=_action_list),
              "decision": Param(STR, default="Allow", choices=("Allow", "Deny")),
              "source_ips": Param(LIST_OR_STR, default=[])}

    def _entries(self, args: dict[str, Any]) -> tuple[str, list[Resource], list[str], str, list[str]]:
        subject = _subject(args)
        try:
            actions = [a.value for a in normalize_actions(args["actions"])]
        except ValueError as e:
            raise StepError(str(e)) from None
        ips = args.get("source_ips") or []
        ips = [ips] if isinstance(ips, str) else [str(i) for i in ips]
        return subject, _resources(args["resources"]), actions, str(args.get("decision") or "Allow"), ips

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Every broker of the target against its own ACL: one that lacks an entry gets it."""
        subject, resources, actions, decision, ips = self._entries(args)
        _auth(_acl(subject, [r.key for r in resources], actions, decision, ips).validate)  # the broker's checks
        brokers = admin.brokers()
        changes: list[Change] = []
        stale: list[str] = []
        differ = []
        for b in brokers:
            mine = self._plan_on(admin, b, brokers, args)
            if mine:
                changes += [change for _, change in mine]
                stale += [key for key, _ in mine]
                differ.append(b)
        return Plan(changes, {"subject": subject, "resources": list(dict.fromkeys(stale))}, brokers=differ)

    def _plan_on(self, admin: Admin, b: BrokerIdentity, brokers: list[BrokerIdentity],
                 args: dict[str, Any]) -> list[tuple[str, Change]]:
        """(resource key, change) for each entry ``b`` lacks or holds otherwise."""
        subject, resources, actions, decision, ips = self._entries(args)
        username = subject.split(":", 1)[1]
        if _auth(admin.get_user, username, b.broker_addr) is not None:
            acl = _auth(admin.get_acl, subject, b.broker_addr)
        elif _on(f"user {username}", b, brokers) in (args.get(PLANNED_IN_CHECK) or ()):
            acl = None  # --check: an earlier step of this run creates the user
        else:  # AUTH_CREATE_ACL refuses it: "The subject of User:x is not exist."
            raise StepError(f"{_on(f'user {username}', b, brokers)} does not exist; create it first (user.ensure) "
                            f"to give {subject} an ACL")
        policy = acl.policy(PolicyType.CUSTOM) if acl is not None else None
        changes = []
        want = {"actions": sorted(actions), "decision": decision.capitalize(), "source_ips": sorted(ips)}
        for res in resources:
            what = _on(f"acl {subject} {res.key}", b, brokers)
            entry = policy.entry_for(res) if policy is not None else None
            if entry is None:
                changes.append((res.key, Change(what, "entry", None, want)))
                continue
            have = {"actions": sorted(a.value for a in entry.actions), "decision": entry.decision.value,
                    "source_ips": sorted(entry.source_ips)}
            changes += [(res.key, Change(what, key, have[key], want[key])) for key in want if have[key] != want[key]]
        return changes

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        """The planned entries on each broker that differs (AUTH_CREATE_ACL merges: an entry a broker
        already has right is written again unchanged)."""
        subject, _, actions, decision, ips = self._entries(args)
        acl = _acl(subject, plan.data["resources"], actions, decision, ips)
        change_each(plan.brokers, lambda b: _auth(admin.create_acl, acl, [b.broker_addr], False), _broker_addr)


def _acl(subject: str, resources: list[str], actions: list[str], decision: str, ips: list[str]) -> Acl:
    try:
        acl = Acl.of(subject, resources, actions, decision, ips)
    except (AuthError, ValueError) as e:
        raise StepError(getattr(e, "message", str(e))) from None
    return acl


class AclAbsent(PlannedAction):
    name = "acl.absent"
    params = {"subject": Param(STR, required=True),
              "resources": Param(LIST_OR_STR, help="only these entries (default: the whole ACL)")}

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Every broker of the target against its own ACL: a broker that holds the ACL (or one of the
        entries named) deletes it there, and only there (AUTH_DELETE_ACL on a broker without it is
        refused: "The acl is not exist.")."""
        subject = _subject(args)
        brokers = admin.brokers()
        changes: list[Change] = []
        differ = []
        removed: list[str] = []
        whole = args.get("resources") is None
        for b in brokers:
            present = self._present_on(admin, b, subject, args)
            if present is None or (not whole and not present):
                continue
            if whole:
                changes.append(Change(_on(f"acl {subject}", b, brokers), "exists", True, False))
            else:
                changes += [Change(_on(f"acl {subject} {key}", b, brokers), "entry", "present", None)
                            for key in present]
                removed += present
            differ.append(b)
        resources = None if whole else list(dict.fromkeys(removed))
        return Plan(changes, {"subject": subject, "resources": resources}, brokers=differ)

    @staticmethod
    def _present_on(admin: Admin, b: BrokerIdentity, subject: str, args: dict[str, Any]) -> list[str] | None:
        """The named entries ``b`` holds (all of its entries when none are named); None without an ACL."""
        if _auth(admin.get_user, subject.split(":", 1)[1], b.broker_addr) is None:
            return None
        acl = _auth(admin.get_acl, subject, b.broker_addr)
        if acl is None:
            return None
        policy = acl.policy(PolicyType.CUSTOM)
        if args.get("resources") is None:
            return [e.resource.key for p in acl.policies for e in p.entries]
        return [r.key for r in _resources(args["resources"]) if policy is not None and policy.entry_for(r)]

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        """On each planned broker, what it holds itself: the whole ACL, or the named entries it has."""
        subject = plan.data["subject"]

        def delete(b: BrokerIdentity) -> None:
            addrs = [b.broker_addr]
            if args.get("resources") is None:
                _auth(admin.delete_acl, subject, None, addrs)
                return
            for key in self._present_on(admin, b, subject, args) or []:
                _auth(admin.delete_acl, subject, key, addrs)

        change_each(plan.brokers, delete, _broker_addr)


# ------------------------------------------------------------------------------------------- broker config

class BrokerConfigAction(PlannedAction):
    """updateBrokerConfig: set broker config keys (RocketMQ names); persisted where the broker reads them."""

    name = "broker.config"
    params = {"config": Param((dict,), required=True, help="{key: value} with RocketMQ key names")}

    @staticmethod
    def _text(value: Any) -> str:
        return "true" if value is True else "false" if value is False else str(value)

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        """Compared with each broker's config as its next start will read it: the ACL keys, identity and
        ports an update writes only to the broker's -c file (the running broker keeps its own until a
        restart), as written there, so a second run after the update has nothing to change."""
        changes = []
        seen: dict[str, dict[str, str | None]] = {}
        for b in admin.brokers():
            current = admin.get_broker_config(b.broker_addr, next_start=True)
            for key, value in args["config"].items():
                if key not in current:
                    raise StepError(f"unknown broker config key {key!r} (getBrokerConfig lists the known keys)")
                if current[key] != self._text(value):
                    later = " (takes effect at its next start)" if key in AUTH_KEYS | START_ONLY_KEYS else ""
                    changes.append(Change(f"broker {b.broker_name} config{later}", key, current[key],
                                          self._text(value)))
            refusal = update_refusal(current, {k: self._text(v) for k, v in args["config"].items()})
            if refusal is not None:  # --check must not promise what the broker refuses
                raise StepError(f"broker {b.broker_name} would refuse this config: {refusal}")
            seen[b.broker_name] = {k: current.get(k) for k in args["config"]}
        return Plan(changes, {"config": seen})

    def can_apply(self, ctx: ActionContext, args: dict[str, Any]) -> None:
        """A store target persists the change to its config: file (as updateBrokerConfig does with
        --config); without one the apply is refused, so the plan must say so too."""
        if ctx.store_dir is not None and not ctx.config_file:
            raise StepError("updating broker config on a store directory needs the broker's config file "
                            "(config: on the playbook target), where the change is persisted; to change a "
                            "running broker use a namesrv: target")

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        """A store target without its config file is refused before the plan: the plan would refuse the
        identity and ports as "on a running broker" (no broker runs on a store directory), and the run
        would refuse any change there anyway."""
        self.can_apply(ctx, args)
        return super().run(ctx, args, check)

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        admin.update_broker_config({k: self._text(v) for k, v in args["config"].items()})


# ------------------------------------------------------------------------------------------- broker write perm

class BrokerWritePerm(PlannedAction):
    """wipeWritePerm / addWritePerm: one broker's write permission in the name servers' routes.

    Why beside topic.perm: draining one broker for maintenance must stop writes to that broker only.
    topic.perm changes each broker's own topic config (on a cluster target, every broker's: the whole
    cluster read-only); Apache drains one with WIPE_WRITE_PERM_OF_BROKER at the name servers, so
    producers route their sends to the other brokers while consumers still read this one's queues.
    The plan reads the routes of every topic: a route of the broker that has the write bit (wipe) or is
    not read-write (add) is a change; none is ``ok``."""

    wipe = True
    params = {"broker": Param(STR, required=True, help="the broker name (brokerName), as clusterList shows")}

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        if ctx.store_dir is not None:  # a store directory has no name server, so no routes to change
            raise StepError(f"{self.name} needs a namesrv: target: a broker's write permission is name "
                            "server route data (a store directory has none)")
        return super().run(ctx, args, check)

    def plan(self, admin: Admin, args: dict[str, Any]) -> Plan:
        broker = args["broker"].strip()
        names = sorted({b.broker_name for b in admin.brokers()})
        if broker not in names:
            raise StepError(f"broker {broker!r} is not in the cluster (brokers: {', '.join(names) or 'none'})")
        changes = []
        routes: dict[str, str] = {}
        for topic in sorted(admin.list_topics()):
            try:
                route = admin.topic_route(topic)
            except NotFoundError:
                continue
            for qd in route.get("queueDatas") or []:
                if qd.get("brokerName") != broker:
                    continue
                old = int(qd.get("perm", 0))
                new = old & ~PERM_WRITE if self.wipe else PERM_READ | PERM_WRITE
                routes[topic] = _perm_text(new)
                if new != old:
                    changes.append(Change(f"topic {topic} route of broker {broker}", "perm", _perm_text(old),
                                          _perm_text(new)))
        return Plan(changes, {"broker": broker, "routes": routes})

    def apply(self, admin: Admin, args: dict[str, Any], plan: Plan) -> None:
        results = admin.operate_write_perm(plan.data["broker"], self.wipe)
        failed = [f"name server {addr}: {error}" for addr, _, error in results if error is not None]
        if failed:
            raise StepError(f"{self.name} {plan.data['broker']}: " + "; ".join(failed))


class BrokerWipeWritePerm(BrokerWritePerm):
    name = "broker.wipe_write_perm"
    wipe = True


class BrokerAddWritePerm(BrokerWritePerm):
    name = "broker.add_write_perm"
    wipe = False
