"""Interop with a client nobody here wrote: ali-ons (npm, a pure-JS RocketMQ 4.x remoting client).

Each test starts a real mqbroker subprocess on free ports, creates a fresh topic with our own client,
and runs one scenario of ``js/scenario.js`` under Node: ali-ons' producer sends and its push consumer
(cluster mode) receives — tags, ordered messages, a delayed message, a transaction with check-back,
redelivery after a failed consume — unsigned, and signed with ACL 2.0 credentials against a broker
that verifies every request. ``.ci/run`` installs the npm packages (``npm ci``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.auth.model import User, UserType
from broker_core.client.credentials import SessionCredentials
from broker_core.client.instance import MQClientInstance
from mqadmin.transport.remoting import RemotingBrokerClient
from tests.client.conftest import FAST_ARGS, create_topic
from tests.remoting_broker import BrokerProcess, running_broker

JS_DIR = Path(__file__).parent / "js"
_names = itertools.count()
# delay level 2 = 2 s (the delayed-message test); retries (level 3 + reconsumeTimes) after 1 s
CONF = {"messageDelayLevel": "1s 2s " + " ".join(["1s"] * 16), "transactionTimeOut": "1000",
        "transactionCheckInterval": "1000"}
SUPER = ("rocketmq", "12345678")
ACL_CONF = dict(CONF, authenticationEnabled="true", authorizationEnabled="true",
                initAuthenticationUser=json.dumps({"username": SUPER[0], "password": SUPER[1]}))


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (.ci/run installs nodejs and npm)")
    if not (JS_DIR / "node_modules" / "ali-ons").is_dir():
        pytest.fail(f"ali-ons is not installed: run `npm ci` in {JS_DIR} (.ci/run does)")
    return node


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("interop")), CONF, extra_args=FAST_ARGS) as b:
        yield b


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("interop-acl")), ACL_CONF, extra_args=FAST_ARGS) as b:
        yield b


def _topic(broker: BrokerProcess, queues: int = 4, credentials: SessionCredentials | None = None) -> str:
    name = f"js{next(_names)}"

    async def go() -> None:
        inst = MQClientInstance(broker.namesrv_addr, credentials=credentials)
        try:
            await create_topic(inst, broker.broker_addr, name, queues)
        finally:
            await inst.shutdown()

    asyncio.run(go())
    return name


def scenario(broker: BrokerProcess, name: str, topic: str, timeout: float = 90, **cfg: Any) -> dict[str, Any]:
    node = _node()
    args = dict(cfg, scenario=name, namesrv=broker.namesrv_addr, topic=topic, group=topic + "_G")
    proc = subprocess.run([node, "scenario.js", json.dumps(args)], cwd=JS_DIR, capture_output=True, text=True,
                          timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no result from ali-ons (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    out = json.loads(lines[-1])
    assert "fatal" not in out, out["fatal"] + "\n--- broker log ---\n" + broker.log_text()[-3000:]
    return out


def _check_cluster_tags(out: dict[str, Any]) -> None:
    sent_a = {s["body"] for s in out["sent"] if s["tag"] == "TagA"}
    assert all(s["status"] == "SEND_OK" for s in out["sent"])
    got = {r["body"] for r in out["received"]}
    assert got == sent_a, f"missing {sent_a - got}, unexpected {got - sent_a}"
    assert all(r["tags"] == "TagA" for r in out["received"])
    # cluster mode: the two clients of the group split the queues, so both consumed a share
    assert {r["who"] for r in out["received"]} == {"c1", "c2"}


def test_ali_ons_cluster_consumers_with_tags(plain_broker: BrokerProcess) -> None:
    out = scenario(plain_broker, "clusterTags", _topic(plain_broker), n=40)
    assert out["split"], "the two ali-ons consumers did not share the queues within 20 s"
    _check_cluster_tags(out)


def test_ali_ons_ordered_messages(plain_broker: BrokerProcess) -> None:
    out = scenario(plain_broker, "ordered", _topic(plain_broker), n=30, queues=4)
    assert len({s["queueId"] for s in out["sent"]}) == 1  # one sharding key, one queue
    assert [r["body"] for r in out["received"]] == [s["body"] for s in out["sent"]]
    assert [r["queueOffset"] for r in out["received"]] == sorted(r["queueOffset"] for r in out["received"])


def test_ali_ons_delayed_message(plain_broker: BrokerProcess) -> None:
    out = scenario(plain_broker, "delayed", _topic(plain_broker), delayLevel=2)
    assert len(out["received"]) == 1 and out["received"][0]["body"] == "delayed-body"
    waited = out["received"][0]["receivedAt"] - out["sent"][0]["sentAt"]
    assert waited >= 1900, f"delivered after {waited} ms, level 2 is 2 s"


def test_ali_ons_transaction_with_check_back(plain_broker: BrokerProcess) -> None:
    out = scenario(plain_broker, "transaction", _topic(plain_broker, queues=1))
    assert out["ok"], out
    assert sorted({r["body"] for r in out["received"]}) == ["tx-commit", "tx-commit-by-check"]
    assert "tx-commit-by-check" in out["checks"] and "tx-rollback" not in out["checks"]


def test_ali_ons_retry_after_failed_consume(plain_broker: BrokerProcess) -> None:
    out = scenario(plain_broker, "retry", _topic(plain_broker, queues=2), n=3)
    by_body: dict[str, list[dict[str, Any]]] = {}
    for r in out["received"]:
        by_body.setdefault(r["body"], []).append(r)
    assert sorted(by_body) == [s["body"] for s in out["sent"]]
    for body, deliveries in by_body.items():
        assert len(deliveries) >= 2, f"{body} was not redelivered: {deliveries}"
        assert deliveries[0]["reconsumeTimes"] == 0 and deliveries[1]["reconsumeTimes"] >= 1
        assert deliveries[1]["topic"] == deliveries[0]["topic"]  # shown under its own topic again


@pytest.fixture(scope="module")
def acl_user(acl_broker: BrokerProcess) -> tuple[str, str]:
    """A Normal user allowed to publish and subscribe topics and groups starting with ``js``."""
    admin = RemotingBrokerClient(acl_broker.namesrv_addr, SessionCredentials(*SUPER))
    try:
        from broker_core.auth.converter import acl_from_info

        admin.create_user(acl_broker.broker_addr, User("alice", "alice-secret", UserType.NORMAL))
        admin.create_acl(acl_broker.broker_addr, acl_from_info({"subject": "User:alice", "policies": [
            {"policyType": "Custom", "entries": [
                {"resource": "Topic:js*", "actions": ["Pub", "Sub", "Get"], "decision": "Allow"},
                {"resource": "Group:js*", "actions": ["Sub", "Get", "Update"], "decision": "Allow"},
                {"resource": "Topic:TBW102", "actions": ["Pub", "Get"], "decision": "Allow"}]}]}))
    finally:
        admin.close()
    return "alice", "alice-secret"


def test_ali_ons_with_acl_credentials(acl_broker: BrokerProcess, acl_user: tuple[str, str]) -> None:
    topic = _topic(acl_broker, credentials=SessionCredentials(*SUPER))
    out = scenario(acl_broker, "clusterTags", topic, n=20, accessKey=acl_user[0], secretKey=acl_user[1])
    _check_cluster_tags(out)


@pytest.mark.parametrize("secret", ["wrong-secret", None])
def test_ali_ons_rejected_without_valid_credentials(acl_broker: BrokerProcess, acl_user: tuple[str, str],
                                                    secret: str | None) -> None:
    topic = _topic(acl_broker, credentials=SessionCredentials(*SUPER))
    creds = {"accessKey": acl_user[0], "secretKey": secret} if secret else {}
    out = scenario(acl_broker, "sendOnly", topic, **creds)
    assert out["ok"] is False
    assert out["codes"] and all(c["code"] == 16 for c in out["codes"]), out  # NO_PERMISSION each try
    expected = "check signature failed" if secret else "username cannot be null"
    assert expected in out["codes"][0]["message"], out


def test_a_body_ali_ons_compressed_reaches_python_consumers_as_sent(plain_broker: BrokerProcess) -> None:
    """ali-ons, like the Java client, zlib-compresses a body over 4 KiB (SYSFLAG COMPRESSED_FLAG): our consumers
    used to hand the application the compressed bytes; they inflate it as Java's MessageDecoder does."""
    from broker_core.client.pull_consumer import PullConsumer
    from broker_core.remoting.bodies import MessageQueue

    topic = _topic(plain_broker, queues=1)
    out = scenario(plain_broker, "sendOnly", topic, bodySize=10_000)
    assert out["ok"], out

    from broker_core.client.message import decode_records
    from broker_core.remoting import RequestCode
    from broker_core.remoting.headers import ViewMessageRequestHeader

    async def pull() -> tuple[list, list]:
        inst = MQClientInstance(plain_broker.namesrv_addr)
        consumer = PullConsumer(topic + "_Py", inst)
        await consumer.start()
        try:
            mq = MessageQueue(topic=topic, broker_name=plain_broker.broker_name, queue_id=0)
            for _ in range(50):
                got = (await consumer.pull(mq, "*", 0, 8)).messages
                if got:
                    view = await inst.invoke(plain_broker.broker_addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                             ViewMessageRequestHeader(offset=got[0].commit_log_offset))
                    return got, decode_records(view.body, decompress=False)
                await asyncio.sleep(0.1)
            return [], []
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    got, stored = asyncio.run(pull())
    assert len(stored) == 1 and stored[0].sys_flag & 1  # stored compressed...
    assert len(got) == 1 and got[0].body == b"a" * 10_000  # ...handed over as sent,
    assert not got[0].sys_flag & 1  # COMPRESSED_FLAG cleared once inflated, as Java's MessageDecoder


def test_a_property_value_holding_x01_from_ali_ons_is_stored_as_sent(plain_broker: BrokerProcess) -> None:
    """A user property value with 0x01 inside (ali-ons and Java's putUserProperty check no separator) was
    refused MESSAGE_ILLEGAL "property pv 'a\\x01b' contains a property separator"; Apache's broker stores it,
    and its decoder (string2messageProperties) splits the pair at the first 0x01, so pv reads back a\\x01b.
    A pull and VIEW_MESSAGE_BY_ID (queryMsgById) show the value byte for byte."""
    from broker_core.client.message import decode_records
    from broker_core.client.pull_consumer import PullConsumer
    from broker_core.remoting import RequestCode
    from broker_core.remoting.bodies import MessageQueue
    from broker_core.remoting.headers import ViewMessageRequestHeader

    topic = _topic(plain_broker, queues=1)
    out = scenario(plain_broker, "sendOnly", topic, props={"pv": "a\x01b", "lead": "\x01z"})
    assert out["ok"] and out["status"] == "SEND_OK" and not out["codes"], out

    async def pull() -> tuple[list, list]:
        inst = MQClientInstance(plain_broker.namesrv_addr)
        consumer = PullConsumer(topic + "_Py", inst)
        await consumer.start()
        try:
            mq = MessageQueue(topic=topic, broker_name=plain_broker.broker_name, queue_id=0)
            for _ in range(50):
                got = (await consumer.pull(mq, "*", 0, 8)).messages
                if got:
                    view = await inst.invoke(plain_broker.broker_addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                             ViewMessageRequestHeader(offset=got[0].commit_log_offset))
                    return got, decode_records(view.body)
                await asyncio.sleep(0.1)
            return [], []
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    got, viewed = asyncio.run(pull())
    assert len(got) == 1 and len(viewed) == 1
    for msg in (got[0], viewed[0]):
        assert msg.properties["pv"] == "a\x01b" and msg.properties["lead"] == "\x01z", msg.properties
