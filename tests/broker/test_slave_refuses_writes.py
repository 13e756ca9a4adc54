"""A slave (brokerRole=SLAVE) stores no message, as Apache's HookUtils.checkBeforePutMessage: every put
path (sends, batches, send-back, timers, transaction halves) is refused with SERVICE_NOT_AVAILABLE, an
END_TRANSACTION with SLAVE_NOT_AVAILABLE, a server-side offset reset with SYSTEM_ERROR. Its commitlog
is its master's copy; a message stored on the slave alone never reaches the master's consumers."""

from __future__ import annotations

import pytest

from broker_core.broker.errors import BrokerSystemError, ServiceNotAvailableError
from broker_core.broker.transaction.end_transaction import EndTransactionStatus
from broker_core.common.response_code import ResponseCode
from broker_core.store.codec.batch import BatchItem
from broker_core.store.codec.sys_flag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE

SLAVE = {"brokerId": "1", "brokerRole": "SLAVE"}


def test_a_slave_stores_no_message_on_any_put_path(make_broker) -> None:
    b = make_broker(**SLAVE)
    b.create_or_update_topic("T", 4, 4)  # topic configs: not refused on a slave, as Apache's
    before = b.store.get_max_phy_offset()
    with pytest.raises(ServiceNotAvailableError, match="slave mode, so putMessage is forbidden"):
        b.send_message("T", b"one", {}, queue_id=0)
    with pytest.raises(ServiceNotAvailableError, match="slave mode"):
        b.send_batch("T", [BatchItem(body=b"a", properties={}), BatchItem(body=b"b", properties={})], {},
                     queue_id=0)
    with pytest.raises(ServiceNotAvailableError, match="slave mode"):
        b.send_message("T", b"delayed", {"DELAY": "3"}, queue_id=0)
    with pytest.raises(ServiceNotAvailableError, match="slave mode"):
        b.send_message("T", b"half", {"TRAN_MSG": "true", "PGROUP": "PG"}, queue_id=0,
                       sys_flag=TRANSACTION_PREPARED_TYPE, producer_group="PG")
    assert b.store.get_max_phy_offset() == before  # nothing of it in the commitlog


def test_a_slave_ends_no_transaction(make_broker, tmp_path) -> None:
    master = make_broker(tmp_path / "m")
    master.create_or_update_topic("T", 4, 4)
    half = master.send_message("T", b"half", {"TRAN_MSG": "true", "PGROUP": "PG"}, queue_id=0,
                               sys_flag=TRANSACTION_PREPARED_TYPE, producer_group="PG")
    master.shutdown()
    slave = make_broker(tmp_path / "m", **SLAVE)  # the same commitlog, as a slave holds its master's copy
    before = slave.store.get_max_phy_offset()
    r = slave.end_transaction("PG", half.queue_offset, half.commit_log_offset, TRANSACTION_COMMIT_TYPE,
                              msg_id=half.uniq_key, transaction_id=half.transaction_id)
    assert r.status is EndTransactionStatus.SLAVE_NOT_AVAILABLE
    assert r.response_code == ResponseCode.SLAVE_NOT_AVAILABLE and "slave mode" in r.remark
    assert slave.store.get_max_phy_offset() == before


def test_a_slave_resets_no_offset_server_side(make_broker) -> None:
    b = make_broker(**SLAVE)
    b.create_or_update_topic("T", 1, 1)
    b.create_or_update_subscription_group("G")
    b.commit_offset("G", "T", 0, 0)
    with pytest.raises(BrokerSystemError, match="Can not reset offset in slave broker"):
        b.reset_offset("G", "T", offset=0, queue_id=0)
