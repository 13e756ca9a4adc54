"""A BatchCQ topic deleted and made again while producers send batches to it.

Why: a send resolves the topic's config, then puts. Between the two the topic could be deleted and
made again by a plain send as a normal topic, whose first record's dispatch made a SimpleCQ queue;
the inner batch (INNER_NUM queue offsets, one record) then got one SimpleCQ unit, and every later
unit of that queue sat at the wrong offset: pulls failed with CorruptDataError ("expected the record
with queue offset 3 ... found queue offset 6"), verifyStore found misplaced units. Seen once in the
full suite's concurrent admin test; this mix shows it in 5 of 6 runs of 1.5 s on the code before.
Now an inner batch's queue is a BatchCQ from before its put (a plain record put a moment before is
dispatched into it as a unit of batch size 1), and a SimpleCQ queue already there refuses it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.errors import BrokerError
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.message import MessageInner
from broker_core.store.commit_log import PutMessageStatus
from broker_core.store.message_store import MessageStore

from .conftest import small_config


def _msg(topic: str, body: bytes, inner_num: int = 0) -> MessageInner:
    props = {"INNER_NUM": str(inner_num)} if inner_num else {}
    return MessageInner(topic=topic, body=body, properties=props, queue_id=0, born_timestamp=1,
                        born_host=("10.0.0.1", 1), store_host=("127.0.0.1", 10911))


def test_a_simplecq_queue_refuses_an_inner_batch(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config().store).open()
    try:
        for i in range(2):
            assert store.put_message(_msg("B", b"plain%d" % i)).ok  # a normal topic: a SimpleCQ queue
        batch = _msg("B", encode_batch([BatchItem(b"item%d" % i) for i in range(3)]), inner_num=3)
        before = store.get_max_phy_offset()
        r = store.put_inner_batch(batch, 3)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "is a SimpleCQ" in r.remark
        assert store.get_max_phy_offset() == before  # nothing written
        assert store.put_message(_msg("B", b"plain2")).queue_offset == 2
        assert [bytes(m.body) for m in store.get_messages("B", 0, 0, 10).messages] == [b"plain0", b"plain1", b"plain2"]
    finally:
        store.shutdown()


@pytest.mark.parametrize("write_buffer", [False, True], ids=["default", "write-buffer"])
def test_batch_topic_deleted_and_made_again_under_sends(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                       write_buffer: bool) -> None:
    config = small_config(transientStorePoolEnable=str(write_buffer).lower(), commitIntervalCommitLog="20")
    broker = Broker(tmp_path / "store", config).start()
    broker.create_or_update_topic("B", 2, 2, attributes="+queue.type=BatchCQ")
    broker.create_or_update_subscription_group("G")
    failures: list[str] = []
    until = time.monotonic() + 1.5

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        while time.monotonic() < until:
            k = rnd.randrange(10)
            try:
                if k < 5:
                    items = [BatchItem(b"b%d" % j) for j in range(rnd.randrange(1, 5))]
                    broker.send_batch("B", items, {"KEYS": "batch", "UNIQ_KEY": f"B{rnd.getrandbits(64):016X}"},
                                      queue_id=rnd.randrange(2))
                elif k == 5:
                    broker.send_message("B", b"plain", queue_id=rnd.randrange(2))  # makes B a normal topic
                elif k == 6:
                    broker.create_or_update_topic("B", 2, 2, attributes="+queue.type=BatchCQ")
                elif k == 7:
                    broker.delete_topic("B")
                else:
                    broker.pull_message("G", "B", rnd.randrange(2), 0, 16)
            except BrokerError:
                pass  # a refusal: the topic was deleted a moment ago, or is of the other queue type
            except Exception:  # noqa: BLE001 - anything else is the finding
                failures.append(traceback.format_exc())

    with caplog.at_level(logging.WARNING, logger="rmqops.store"):
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            assert broker.store.wait_for_dispatch()
            assert not failures, failures[0]
            assert not broker.verify_store().issues
        finally:
            broker.shutdown()
        reopened = Broker(tmp_path / "store", config)
        try:
            assert not reopened.verify_store().issues
        finally:
            reopened.shutdown()
    misplaced = [r.getMessage() for r in caplog.records if "expected logic offset" in r.getMessage()]
    assert not misplaced, misplaced[:3]
