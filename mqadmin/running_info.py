"""ConsumerRunningInfo as Apache prints it (formatString) and its consistency checks (consumerStatus).

Why a module: consumerStatus writes one formatted report per client and then compares the clients
(same subscriptions, queues blocked or unlockable); the texts and fixed widths are Apache's so an
operator's scripts and habits carry over.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

from mqadmin.cli import java_text, jformat

if TYPE_CHECKING:
    from broker_core.remoting.bodies import (
        ConsumeMessageDirectlyResult,
        ConsumerRunningInfo,
        ProcessQueueInfo,
    )

PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"
STARTED_FOR_A_WHILE_MS = 2 * 60 * 1000


def human_millis(ms: int) -> str:
    """UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS in local time."""
    t = datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y%m%d%H%M%S") + f"{ms % 1000:03d}"


def process_queue_text(pq: ProcessQueueInfo) -> str:
    """ProcessQueueInfo.toString."""
    return (f"ProcessQueueInfo [commitOffset={pq.commit_offset}, cachedMsgMinOffset={pq.cached_msg_min_offset}, "
            f"cachedMsgMaxOffset={pq.cached_msg_max_offset}, cachedMsgCount={pq.cached_msg_count}, "
            f"cachedMsgSizeInMiB={pq.cached_msg_size_in_mi_b}, transactionMsgMinOffset={pq.transaction_msg_min_offset}, "
            f"transactionMsgMaxOffset={pq.transaction_msg_max_offset}, transactionMsgCount={pq.transaction_msg_count}, "
            f"locked={java_text(pq.locked)}, tryUnlockTimes={pq.try_unlock_times}, "
            f"lastLockTimestamp={human_millis(pq.last_lock_timestamp)}, droped={java_text(pq.droped)}, "
            f"lastPullTimestamp={human_millis(pq.last_pull_timestamp)}, "
            f"lastConsumeTimestamp={human_millis(pq.last_consume_timestamp)}]")


def format_running_info(info: ConsumerRunningInfo) -> str:
    """ConsumerRunningInfo.formatString: properties, subscriptions, offsets, queue details, RT&TPS."""
    out = ["#Consumer Properties#\n"]
    out += [jformat("%-40s: %s%n", k, v) for k, v in info.properties.items()]
    out.append("\n\n#Consumer Subscription#\n")
    out += [jformat("%03d Topic: %-40s ClassFilter: %-8s SubExpression: %s%n", i, s.topic, s.class_filter_mode,
                    s.sub_string) for i, s in enumerate(info.subscription_set, 1)]
    out.append("\n\n#Consumer Offset#\n")
    out.append(jformat("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID", "#Consumer Offset"))
    out += [jformat("%-32s  %-32s  %-4d  %-20d%n", mq.topic, mq.broker_name, mq.queue_id, pq.commit_offset)
            for mq, pq in sorted(info.mq_table.items())]
    out.append("\n\n#Consumer MQ Detail#\n")
    out.append(jformat("%-64s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo"))
    out += [jformat("%-64s  %-32s  %-4d  %s%n", mq.topic, mq.broker_name, mq.queue_id, process_queue_text(pq))
            for mq, pq in sorted(info.mq_table.items())]
    out.append("\n\n#Consumer Pop Detail#\n")
    out.append(jformat("%-32s  %-32s  %-4s  %-20s%n", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo"))
    out += [jformat("%-32s  %-32s  %-4d  %s%n", mq.topic, mq.broker_name, mq.queue_id, java_text(pq))
            for mq, pq in sorted(info.mq_pop_table.items())]
    out.append("\n\n#Consumer RT&TPS#\n")
    out.append(jformat("%-64s  %14s %14s %14s %14s %18s %25s%n", "#Topic", "#Pull RT", "#Pull TPS", "#Consume RT",
                       "#ConsumeOK TPS", "#ConsumeFailed TPS", "#ConsumeFailedMsgsInHour"))
    out += [jformat("%-32s  %14.2f %14.2f %14.2f %14.2f %18.2f %25d%n", topic, s.pull_rt, s.pull_tps, s.consume_rt,
                    s.consume_ok_tps, s.consume_failed_tps, s.consume_failed_msgs)
            for topic, s in sorted(info.status_table.items())]
    out.append("\n\n#User Consume Info#\n")
    out += [jformat("%-40s: %s%n", k, v) for k, v in sorted(info.user_consumer_info.items())]
    if info.jstack is not None:
        out.append("\n\n#Consumer jstack#\n")
        out.append(info.jstack)
    return "".join(out)


def is_push(info: ConsumerRunningInfo) -> bool:
    return info.properties.get(PROP_CONSUME_TYPE) == "CONSUME_PASSIVELY"


def analyze_subscription(table: dict[str, ConsumerRunningInfo], now_ms: int | None = None) -> bool:
    """ConsumerRunningInfo.analyzeSubscription: push clients started over 2 minutes ago must all
    subscribe the same (topic, expression) set."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    infos = [table[k] for k in sorted(table)]
    first = infos[0]
    started = int(first.properties.get(PROP_CONSUMER_START_TIMESTAMP) or 0)
    if not (is_push(first) and now - started > STARTED_FOR_A_WHILE_MS):
        return True

    def subs(info: ConsumerRunningInfo) -> set[tuple[str, str, str]]:
        return {(s.topic, s.sub_string, s.expression_type) for s in info.subscription_set}

    return all(subs(i) == subs(first) for i in infos)


def analyze_process_queue(client_id: str, info: ConsumerRunningInfo, now_ms: int | None = None) -> str:
    """ConsumerRunningInfo.analyzeProcessQueue: orderly queues not locked (or failing to unlock),
    concurrent queues holding messages with no consumption for over a minute."""
    if not is_push(info):
        return ""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    orderly = info.properties.get(PROP_CONSUME_ORDERLY, "false").lower() == "true"
    out = []
    for mq, pq in sorted(info.mq_table.items()):
        shown = f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"
        if orderly:
            if not pq.locked:
                out.append(f"{client_id} {shown} can't lock for a while, {now - pq.last_lock_timestamp}ms\n")
            elif pq.droped and pq.try_unlock_times > 0:
                out.append(f"{client_id} {shown} unlock {pq.try_unlock_times} times, still failed\n")
        else:
            diff = now - pq.last_consume_timestamp
            if diff > 60_000 and pq.cached_msg_count > 0:
                out.append(f"{client_id} {shown} can't consume for a while, maybe blocked, {diff}ms\n")
    return "".join(out)


def direct_result_text(r: ConsumeMessageDirectlyResult) -> str:
    """ConsumeMessageDirectlyResult.toString."""
    return (f"ConsumeMessageDirectlyResult [order={java_text(r.order)}, autoCommit={java_text(r.auto_commit)}, "
            f"consumeResult={java_text(r.consume_result)}, remark={java_text(r.remark)}, "
            f"spentTimeMills={r.spent_time_mills}]")
