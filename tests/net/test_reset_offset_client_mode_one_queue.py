"""INVOKE_BROKER_TO_RESET_OFFSET (222) with queueId >= 0 on a broker in client mode
(useServerSideResetOffset=false), with raw frames against real servers on 127.0.0.1.

Why: Apache's Broker2Client ignores queueId/offset, so Java mqadmin's per-queue reset (-b -q -o: timestamp 0,
queueId, offset) told every live consumer to go back to the start of every queue. Here the table sent to
the consumers (and answered) holds that one queue only, at the offset asked (or at the timestamp's).
"""

from __future__ import annotations

import pytest
import test_reset_offset_client_mode as base
from test_reset_offset_client_mode import call, commit, heartbeat, mq, next_request

from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.bodies import ResetOffsetBody

RC = RequestCode


@pytest.fixture
def one_broker(servers):
    """The client-mode broker of test_reset_offset_client_mode (topic T: 2 queues, 3 messages each)."""
    yield from base.client_mode.__wrapped__(servers)


def _reset_queue(bc, queue_id: int, timestamp: int, offset: int):
    ext = {"topic": "T", "group": "G", "timestamp": str(timestamp), "isForce": "true",
           "queueId": str(queue_id), "offset": str(offset)}
    return call(bc, RC.INVOKE_BROKER_TO_RESET_OFFSET, ext)


def test_one_queue_to_an_offset_tells_the_consumers_that_queue_only(one_broker):
    broker, bc, _ = one_broker
    commit(bc, "G", 0, 3)
    commit(bc, "G", 1, 3)
    heartbeat(bc, "G", "c1")
    r = _reset_queue(bc, 0, 0, 1)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert ResetOffsetBody.from_json(r.body).offset_table == {mq(0): 1}
    assert ResetOffsetBody.from_json(next_request(bc).body).offset_table == {mq(0): 1}
    # by timestamp (offset -1): that queue only, to the timestamp's offset (before every message: 0)
    r = _reset_queue(bc, 1, 0, -1)
    assert ResetOffsetBody.from_json(r.body).offset_table == {mq(1): 0}
    assert ResetOffsetBody.from_json(next_request(bc).body).offset_table == {mq(1): 0}
    assert [broker.query_offset("G", "T", q) for q in (0, 1)] == [3, 3]  # the consumers commit, not the broker


def test_one_queue_to_an_offset_outside_the_queue_is_refused(one_broker):
    _, bc, _ = one_broker
    commit(bc, "G", 0, 3)
    commit(bc, "G", 1, 3)
    heartbeat(bc, "G", "c1")
    r = _reset_queue(bc, 0, 0, 9)
    assert r.code != ResponseCode.SUCCESS
    assert "not in consume queue range" in (r.remark or ""), r.remark
