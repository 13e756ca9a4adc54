"""Transaction check-backs go to the half's own producer group, whichever protocol its producers speak.

Why: a remoting app (producer group PG1) left halves UNKNOWN on a topic and stopped; an unrelated gRPC
producer of the same topic was then sent PG1's check-backs (bodies included) and its ROLLBACK destroyed
them, so PG1, back with a committing checker, found nothing left. Upstream (5.x) checks a half through a
channel of its PROPERTY_PRODUCER_GROUP; gRPC producers are registered under each topic they publish (the
proxy's producer group is the topic, which it also stamps on its halves), so a PG1 half never reaches a
gRPC client and waits for PG1.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from broker_core.client.instance import MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import LocalTransactionState, TransactionProducer
from broker_core.remoting import RequestCode
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic
from tests.net.net_util import RawClient
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

from .conftest import run_scenario

TOPIC, GROUP = "PayT", "PG1"


class _App:
    """PG1's transaction listener: the local transaction stays undecided, a check answers ``check``."""

    def __init__(self, check: LocalTransactionState) -> None:
        self.check = check
        self.checked: list[bytes] = []

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg.body)
        return self.check


def _max_offset(b: BrokerProcess) -> int:
    client = RawClient(b.broker_addr)
    try:
        return int(client.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}).ext_fields["offset"])
    finally:
        client.close()


async def _leave_two_halves(b: BrokerProcess) -> None:
    inst = MQClientInstance(b.namesrv_addr, instance_name="pg1-first")
    await create_topic(inst, b.broker_addr, TOPIC, queues=1, attributes="+message.type=TRANSACTION")
    producer = TransactionProducer(GROUP, inst, _App(LocalTransactionState.UNKNOW))
    await producer.start()
    for body in (b"pay-1", b"pay-2"):
        await producer.send_in_transaction(Message(TOPIC, body))
    await producer.shutdown()  # unregisters: no producer of PG1 is online
    await inst.shutdown()


async def _pg1_returns(b: BrokerProcess) -> list[bytes]:
    inst = MQClientInstance(b.namesrv_addr, instance_name="pg1-back")
    app = _App(LocalTransactionState.COMMIT_MESSAGE)
    producer = TransactionProducer(GROUP, inst, app)
    await producer.start()
    try:
        for _ in range(300):
            if set(app.checked) >= {b"pay-1", b"pay-2"} and _max_offset(b) == 2:
                break
            await asyncio.sleep(0.1)
    finally:
        await producer.shutdown()
        await inst.shutdown()
    return app.checked


def test_a_grpc_producer_of_the_topic_is_never_asked_about_another_groups_halves(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    conf = {"transactionTimeOut": "1000", "transactionCheckInterval": "500"}
    with running_broker(tmp_path / "b", conf) as b:
        assert b.grpc_addr is not None
        asyncio.run(asyncio.wait_for(_leave_two_halves(b), 60))
        ready, stop = tmp_path / "ready", tmp_path / "stop"
        unrelated: dict = {}

        def unrelated_app() -> None:  # a gRPC producer of PayT whose checker rolls back what it is asked
            unrelated.update(run_scenario(b.grpc_addr or "", home, "transaction_checker", topic=TOPIC,
                                          check="rollback", ready_file=str(ready), stop_file=str(stop),
                                          timeout=90, limit=120))

        def unanswered() -> int:  # check-backs of a PG1 half that reached no producer (one line each)
            return b.log_text().count(f"no live producer of group {GROUP} to check the transaction")

        t = threading.Thread(target=unrelated_app)
        t.start()
        try:
            wait_for(ready.exists, "the gRPC producer started", 30)
            # the halves are due after 1 s and checked every 0.5 s: two rounds over both halves with only
            # the gRPC producer online, then PG1 comes back beside it
            before = unanswered()
            wait_for(lambda: unanswered() >= before + 4, "two check rounds of PG1's halves", 30, 0.1)
            checked = asyncio.run(asyncio.wait_for(_pg1_returns(b), 60))
        finally:
            stop.touch()
            t.join(120)
        assert unrelated == {"checked": []}, unrelated
        assert set(checked) >= {b"pay-1", b"pay-2"}, checked
        assert _max_offset(b) == 2
        # a gRPC transactional half (producer group = its topic) is still checked through its gRPC producer
        own = run_scenario(b.grpc_addr, home, "transaction", topic=TOPIC, mode="open", check="commit",
                           prefix="grpc", timeout=25)
        assert own["id"] in own["checked"], own
        wait_for(lambda: _max_offset(b) == 3, "the gRPC half committed", 20, 0.1)
