"""A pull below a BatchCQ queue's new min offset after deleteExpiredCommitLog, over remoting.

Retention on a running broker deleted commitlog files and the BCQ files pointing at them; when the cut
fell between two BCQ files, the queue's min offset stayed at 0 (only a restart moved it): a pull from 0
got PULL_NOT_FOUND with nextBeginOffset 1, so a long-polling consumer crawled forward one offset every
suspend timeout, and GET_MIN_OFFSET (topicStatus) said 0. SimpleCQ topics got PULL_OFFSET_MOVED to the
new min; BatchCQ topics do now too (Apache's BatchConsumeQueue.correctMinOffset takes the first
remaining file's first msgBaseOffset).
"""

from __future__ import annotations

import os
import time

from net_util import RawClient
from test_server_codes import create_topic, dispatched, pull, records

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.headers import SendMessageRequestHeaderV2
from broker_core.store.batch_consume_queue import BatchConsumeQueue
from broker_core.store.codec.batch import BatchItem, encode_batch
from broker_core.store.codec.properties import encode_properties

TOPIC = "BatchRetPull"
BATCH = 5


def send_inner_batch(bc: RawClient, i: int) -> None:
    """SEND_BATCH_MESSAGE with a batch-level UNIQ_KEY: one inner-batch record of 5 messages."""
    header = SendMessageRequestHeaderV2(a="P", b=TOPIC, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0,
                                        i=encode_properties({"UNIQ_KEY": f"7F00000100002A9F{i:016X}"}), m=True)
    body = encode_batch([BatchItem(b"%d.%d-" % (i, j) + b"y" * 200) for j in range(BATCH)])
    r = bc.call(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_fields(), body)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == str(i * BATCH), r.remark


def test_a_pull_below_the_new_batch_cq_min_is_moved_to_it(servers) -> None:  # noqa: ANN001
    broker, _server, addr = servers.add_broker(props={"mappedFileSizeCommitLog": "4096",
                                                      "mapperFileSizeBatchConsumeQueue": str(46 * 8),
                                                      "fileReservedTime": "1"})
    bc = RawClient(addr)
    try:
        assert create_topic(bc, TOPIC, 1, attributes="+queue.type=BatchCQ").code == ResponseCode.SUCCESS
        for i in range(40):
            send_inner_batch(bc, i)
        dispatched(bc, TOPIC, 0, 40 * BATCH)
        store = broker.store
        cq = store.consume_queues[(TOPIC, 0)]
        assert isinstance(cq, BatchConsumeQueue)
        size = store.commit_log.file_size
        # the first BCQ file (past the first) that starts exactly at a commitlog file: deleting the
        # commitlog files before it takes the BCQ files before it along, and no unit left points below
        starts = [cq._unit_at(mf.mv, 0) for mf in cq.file_queue.files[1:-1]]
        first = next(u for u in starts if u.phy_offset % size == 0)
        want, cut = first.queue_offset, first.phy_offset // size
        assert want > 0
        three_hours_ago = time.time() - 3 * 3600  # fileReservedTime is 1 h
        for mf in store.commit_log.file_queue.files[:cut]:
            os.utime(mf.path, (three_hours_ago, three_hours_ago))

        r = bc.call(RequestCode.DELETE_EXPIRED_COMMITLOG, {})
        assert r.code == ResponseCode.SUCCESS and f"commitlog starts at {cut * size}" in r.remark, r.remark
        assert cq.file_queue.files[0].file_from_offset > 0  # whole BCQ files went

        q = {"topic": TOPIC, "queueId": "0"}
        assert bc.call(RequestCode.GET_MIN_OFFSET, q).ext_fields["offset"] == str(want)
        for offset in (0, want - 1):
            r = pull(bc, TOPIC, 0, offset=offset)
            assert (r.code, r.ext_fields["nextBeginOffset"], r.ext_fields["minOffset"]) == (
                ResponseCode.PULL_OFFSET_MOVED, str(want), str(want)), r.remark
        r = pull(bc, TOPIC, 0, offset=want)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.queue_offset for m in records(r.body)][:2] == [want, want + 1]
    finally:
        bc.close()
