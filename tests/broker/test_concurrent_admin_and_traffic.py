"""One started broker under sends, pulls, pops and admin commands from many threads at once.

Why: the remoting and gRPC servers call the broker from a pool of threads, so an admin's
deleteTopic, resetOffsetByTime or cleanExpiredCQ runs while producers and consumers keep going,
and beside the broker's own flush, commit, reput and revive threads. Each test here ran one
operation at a time; this one runs them together for a few seconds. It found two bugs: a
resetOffsetByTime failing with FileNotFoundError (two threads writing consumerOffset.json through
one temp file) and a deleteTopic whose tombstone was taken before records put a moment earlier
(after the deletion they were dispatched into the topic's new queue, or misaddressed its units).

Checked: no operation fails with anything but a broker error (a refusal with a response code); every
message acknowledged on a topic nobody deletes is at its queue offset with its body, in the running
broker and after a reopen; and ``verifyStore`` finds nothing wrong with the store.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.errors import BrokerError
from broker_core.broker.pop.pop_service import PopStatus
from broker_core.broker.send import SendStatus
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.properties import PROPERTY_POP_CK

from .conftest import small_config

STABLE = ("T0", "T1")  # never deleted: every acknowledged message must stay where it was put
CHURNED = "X"  # deleted and created again all along
BATCH = "B"  # a BatchCQ topic (through the write buffer when it is on), churned too
GROUPS = ("G0", "G1")
QUEUES = 4
THREADS = 6
SECONDS = 3.0


class Run:
    """What the threads share: acknowledged sends on the stable topics, failures that are not refusals."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.acked: list[tuple[str, int, int, bytes]] = []  # (topic, queue id, queue offset, body)
        self.msg_ids: list[str] = []
        self.failures: list[str] = []


def _one_operation(run: Run, rnd: random.Random, n: int) -> None:
    b = run.broker
    topic = rnd.choice((*STABLE, CHURNED))
    group = rnd.choice(GROUPS)
    k = rnd.randrange(16)
    if k < 5:
        body = b"%s-%d-%d" % (topic.encode(), threading.get_ident(), n)
        r = b.send_message(topic, body, {"KEYS": f"k{rnd.randrange(50)}", "TAGS": rnd.choice("ab")},
                           queue_id=rnd.randrange(QUEUES))
        if r.status is SendStatus.SEND_OK:
            run.msg_ids.append(r.msg_id)
            if topic in STABLE:
                run.acked.append((topic, r.queue_id, r.queue_offset, body))
    elif k == 5:
        b.send_batch(BATCH, [BatchItem(b"b%d" % i) for i in range(rnd.randrange(1, 5))], {"KEYS": "batch"},
                     queue_id=rnd.randrange(2))
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
    else:
        b.clone_group_offset(group, rnd.choice(GROUPS), topic)


def _worker(run: Run, seed: int, until: float) -> None:
    rnd = random.Random(seed)
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            _one_operation(run, rnd, n)
        except BrokerError:
            pass  # a refusal (a topic deleted a moment ago, a group not there): what a client gets told
        except Exception:  # noqa: BLE001 - every other failure is the finding
            run.failures.append(traceback.format_exc())


def _message_at(broker: Broker, topic: str, queue_id: int, offset: int) -> bytes | None:
    got = broker.pull_message("VERIFY", topic, queue_id, offset, 1).messages
    return got[0].body if got and got[0].queue_offset == offset else None


@pytest.mark.parametrize("write_buffer", [False, True], ids=["default", "write-buffer"])
def test_concurrent_admin_and_traffic_lose_and_misplace_nothing(make_broker, tmp_path: Path, write_buffer: bool) -> None:
    config = small_config(flushConsumerOffsetInterval="5", reviveInterval="50",
                          transientStorePoolEnable=str(write_buffer).lower(), commitIntervalCommitLog="20")
    broker = make_broker(config=config).start()
    for t in STABLE:
        broker.create_or_update_topic(t, QUEUES, QUEUES)
    broker.create_or_update_topic(CHURNED, QUEUES, QUEUES)
    broker.create_or_update_topic(BATCH, 2, 2, attributes="+queue.type=BatchCQ")
    for g in (*GROUPS, "VERIFY"):
        broker.create_or_update_subscription_group(g)
    run = Run(broker)
    seed = random.randrange(1 << 20)
    until = time.monotonic() + SECONDS
    threads = [threading.Thread(target=_worker, args=(run, seed * 100 + i, until)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not run.failures, f"{len(run.failures)} operations failed (seed {seed}); the first:\n{run.failures[0]}"
    assert len(run.acked) > 100, "the threads hardly sent"
    broker.store.wait_for_dispatch()
    misplaced = [a for a in run.acked if _message_at(broker, *a[:3]) != a[3]]
    assert not misplaced, f"{len(misplaced)} acknowledged messages not at their queue offset, e.g. {misplaced[:3]}"
    broker.shutdown()

    reopened = make_broker(config=config)
    misplaced = [a for a in run.acked if _message_at(reopened, *a[:3]) != a[3]]
    assert not misplaced, f"after a reopen, {len(misplaced)} not at their queue offset, e.g. {misplaced[:3]}"
    report = reopened.verify_store()
    assert not report.issues, report.issues[:5]
