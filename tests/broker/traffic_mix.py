"""The operation mix of the concurrency tests: sends, pulls, pops and admin commands on one broker.

Why a module: the in-process test (``test_concurrent_admin_and_traffic.py``) and the kill -9 loop's
writer process (``traffic_kill_writer.py``) run the same mix, the way the remoting and gRPC servers'
thread pools call one broker (delayed and transactional sends among them): an admin's deleteTopic, resetOffsetByTime, cleanExpiredCQ or deleteExpiredCommitLog beside
producers and consumers, and beside the broker's own flush, commit, reput and revive threads.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.errors import BrokerError
from broker_core.broker.pop.pop_service import PopStatus
from broker_core.broker.send import SendStatus
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.properties import PROPERTY_POP_CK

STABLE = ("T0", "T1")  # never deleted: every acknowledged message must stay where it was put
CHURNED = "X"  # deleted and created again all along
BATCH = "B"  # a BatchCQ topic (through the write buffer when it is on), churned too
GROUPS = ("G0", "G1")
QUEUES = 4


Ack = tuple[str, int, int, bytes, int]  # (topic, queue id, queue offset, body, commitlog offset) of an acknowledged send


def broker_properties(write_buffer: bool) -> dict[str, str]:
    """Small files (rolls within seconds), offsets flushed every 5 ms, revive scans every 50 ms, every
    commitlog file but the last expired at once (fileReservedTime 0) for the forced retention runs."""
    return {"mappedFileSizeCommitLog": str(1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 1000),
            "mapperFileSizeBatchConsumeQueue": str(46 * 1000), "maxHashSlotNum": "64", "maxIndexNum": "400",
            "flushConsumerOffsetInterval": "5", "reviveInterval": "50",
            "transientStorePoolEnable": str(write_buffer).lower(), "commitIntervalCommitLog": "20",
            "fileReservedTime": "0"}


def broker_config(write_buffer: bool) -> BrokerConfig:
    return BrokerConfig.from_properties(broker_properties(write_buffer))


def create_resources(broker: Broker) -> None:
    """The topics and groups, those missing only (a restarted writer finds them; queue.type cannot
    be set again on a topic with messages)."""
    for t in STABLE:
        broker.create_or_update_topic(t, QUEUES, QUEUES)
    broker.create_or_update_topic(CHURNED, QUEUES, QUEUES)
    if broker.get_topic(BATCH) is None:
        broker.create_or_update_topic(BATCH, 2, 2, attributes="+queue.type=BatchCQ")
    for g in (*GROUPS, "VERIFY"):
        broker.create_or_update_subscription_group(g)


class Run:
    """What the threads share: acknowledged sends on the stable topics, failures that are not refusals."""

    def __init__(self, broker: Broker, on_ack: Callable[[Ack], None] | None = None,
                 on_failure: Callable[[str], None] | None = None, retention: bool = True) -> None:
        self.broker = broker
        # deleteExpiredCommitLog in the mix; a last phase without it leaves messages to check
        self.retention = retention
        self.acked: list[Ack] = []
        self.msg_ids: list[str] = []
        self.failures: list[str] = []
        self.on_ack = on_ack
        self.on_failure = on_failure


def one_operation(run: Run, rnd: random.Random, n: int) -> None:
    b = run.broker
    topic = rnd.choice((*STABLE, CHURNED))
    group = rnd.choice(GROUPS)
    k = rnd.randrange(19)
    if k < 5:
        body = b"%s-%d-%d" % (topic.encode(), threading.get_ident(), n)
        r = b.send_message(topic, body, {"KEYS": f"k{rnd.randrange(50)}", "TAGS": rnd.choice("ab")},
                           queue_id=rnd.randrange(QUEUES))
        if r.status is SendStatus.SEND_OK:
            run.msg_ids.append(r.msg_id)
            if topic in STABLE:
                ack = (topic, r.queue_id, r.queue_offset, body, r.commit_log_offset)
                run.acked.append(ack)
                if run.on_ack is not None:
                    run.on_ack(ack)
    elif k == 5:
        b.send_batch(BATCH, [BatchItem(b"b%d" % i) for i in range(rnd.randrange(1, 5))],
                     {"KEYS": "batch", "UNIQ_KEY": f"B{rnd.getrandbits(64):016X}"}, queue_id=rnd.randrange(2))
    elif k == 6:
        qid = rnd.randrange(QUEUES)
        r = b.pull_message(group, topic, qid, b.query_offset(group, topic, qid) if rnd.random() < 0.5 else 0, 16)
        if r.messages:
            b.commit_offset(group, topic, qid, r.next_begin_offset)
    elif k in (7, 8):
        r = b.pop_message(group, topic, max_msgs=4, invisible_time_ms=rnd.choice((100, 1000)))
        if r.status is PopStatus.FOUND:
            for m in r.messages:
                handle = m.properties[PROPERTY_POP_CK]
                if rnd.random() < 0.3:
                    b.change_invisible_time(group, topic, handle, 200)
                elif rnd.random() < 0.8:
                    b.ack_message(group, topic, handle)
    elif k == 9:
        b.query_message(topic, f"k{rnd.randrange(50)}")
        if run.msg_ids:
            b.view_message_by_id(rnd.choice(run.msg_ids))
    elif k == 10:
        if rnd.random() < 0.5:
            b.create_or_update_topic(CHURNED, rnd.randrange(1, QUEUES + 1), QUEUES)
        else:
            b.delete_topic(CHURNED)
    elif k == 11:
        if rnd.random() < 0.5:
            b.create_or_update_topic(BATCH, 2, 2, attributes="+queue.type=BatchCQ")
        else:
            b.delete_topic(BATCH)
    elif k == 12:
        b.reset_offset(group, topic, rnd.choice((0, int(time.time() * 1000) - 300, -1)))
    elif k == 13:
        b.consume_stats(group, topic)
        b.topic_stats(topic)
    elif k == 14:
        b.clean_expired_consume_queues()
    elif k == 15:
        b.clone_group_offset(group, rnd.choice(GROUPS), topic)
    elif k == 17:  # delayed: a delay level or the timer wheel
        delay = {"DELAY": str(rnd.randrange(1, 3))} if rnd.random() < 0.5 else {"TIMER_DELAY_MS": str(rnd.randrange(50, 800))}
        b.send_message(topic, b"delayed", {**delay, "KEYS": "delayed"}, queue_id=rnd.randrange(QUEUES))
    elif k == 18:  # a transaction's half, most ended at once (the others left to the check service)
        r = b.send_message(topic, b"half", {"TRAN_MSG": "true", "PGROUP": "PG", "KEYS": "tx"}, sys_flag=0x4,
                           producer_group="PG", queue_id=rnd.randrange(QUEUES))
        if rnd.random() < 0.7:
            b.end_transaction("PG", r.queue_offset, r.commit_log_offset, rnd.choice((8, 12)), msg_id=r.msg_id)
    elif run.retention and rnd.random() < 0.25:  # (rarer: each run leaves the last commitlog file only)
        b.delete_expired_commit_log()  # mqadmin deleteExpiredCommitLog


def worker(run: Run, seed: int, until: float) -> None:
    rnd = random.Random(seed)
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            one_operation(run, rnd, n)
        except BrokerError:
            pass  # a refusal (a topic deleted a moment ago, a group not there): what a client gets told
        except Exception:  # noqa: BLE001 - every other failure is the finding
            run.failures.append(traceback.format_exc())
            if run.on_failure is not None:
                run.on_failure(run.failures[-1])


def run_threads(run: Run, seed: int, threads: int, seconds: float) -> None:
    """``threads`` workers on ``run``'s broker for ``seconds``, each with its own random sequence."""
    until = time.monotonic() + seconds
    workers = [threading.Thread(target=worker, args=(run, seed * 100 + i, until)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()


def message_at(broker: Broker, topic: str, queue_id: int, offset: int) -> bytes | None:
    """The body at ``offset`` of the queue, as a consumer pulls it (None: no message there)."""
    got = broker.pull_message("VERIFY", topic, queue_id, offset, 1).messages
    return got[0].body if got and got[0].queue_offset == offset else None


def still_stored(broker: Broker, acked: list[Ack]) -> list[Ack]:
    """The acknowledged sends whose records retention has not deleted."""
    cl_min = broker.store.commit_log.min_offset()
    return [a for a in acked if a[4] >= cl_min]


def misplaced(broker: Broker, acked: list[Ack]) -> list[Ack]:
    """The acknowledged sends still stored but not found at their queue offset with their body."""
    return [a for a in still_stored(broker, acked) if message_at(broker, *a[:3]) != a[3]]


def assert_in_place_and_verified(broker: Broker, acked: list[Ack]) -> None:
    """Every acknowledged send still stored is at its queue offset with its body; verifyStore is clean."""
    lost = misplaced(broker, acked)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages not at their queue offset, e.g. {lost[:3]}"
    report = broker.verify_store()
    assert not report.issues, report.issues[:5]
