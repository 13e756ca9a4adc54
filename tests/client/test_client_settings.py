"""Producer and consumer settings out of RocketMQ's ranges fail where they are given, naming the parameter.

Before, each was accepted and failed later, far from its cause: a push consumer with
consume_batch_max_size 0 started and every pull loop died of "range() arg 3 must not be zero" (-1:
nothing consumed, no error), pull_batch_size 0 logged "maxMsgNums must be positive" every 3 s per queue;
a producer with batch_max_bytes 8 MiB failed every send with MESSAGE_ILLEGAL (0 or -1 silently turned
AutoBatch off), retry_times_when_send_failed -1 or send_timeout 0 failed every send unsent with "got no
answer within 3s"; PullConsumer.fetch_subscribe_queues of an unknown topic answered [] (Java's
MQAdminImpl.fetchSubscribeMessageQueues throws "Can not find Message Queue for this topic").
"""

from __future__ import annotations

import asyncio

import pytest

from broker_core.client.config_check import ClientConfigError
from broker_core.client.consumer_api import ConsumerApi
from broker_core.client.instance import BrokerError, MQClientInstance
from broker_core.client.message import Message
from broker_core.client.producer import Producer, SendStatus
from broker_core.client.pull_consumer import PullConsumer
from broker_core.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.headers import CreateTopicRequestHeader
from broker_core.store.codec.message import MessageExt
from tests.client.conftest import create_topic, wait_dispatched
from tests.net.harness import Servers

# never dialled: a setting out of range fails before anything is sent
NO_NAMESRV = "127.0.0.1:9"


def _listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


@pytest.mark.parametrize(("setting", "value", "says"), [
    ("consume_batch_max_size", 0, "consume_batch_max_size Out of range [1, 1024]"),
    ("consume_batch_max_size", -1, "consume_batch_max_size Out of range [1, 1024]"),
    ("consume_batch_max_size", 1025, "consume_batch_max_size Out of range [1, 1024]"),
    ("pull_batch_size", 0, "pull_batch_size Out of range [1, 1024]"),
    ("pull_batch_size", -5, "pull_batch_size Out of range [1, 1024]"),
    ("pull_batch_size", 1025, "pull_batch_size Out of range [1, 1024]"),
    ("consume_concurrency", 0, "consume_concurrency Out of range [1, 1000]"),
    ("consume_concurrency", 1001, "consume_concurrency Out of range [1, 1000]"),
    ("max_reconsume_times", -2, "max_reconsume_times Out of range [-1, 2147483647]"),
    ("consume_timestamp_ms", -1, "consume_timestamp_ms Out of range [0, +inf)"),
    ("pull_batch_size", 32.5, "pull_batch_size must be an integer"),
])
def test_a_push_consumer_setting_out_of_range_fails_its_construction(setting: str, value: object,
                                                                      says: str) -> None:
    with pytest.raises(ClientConfigError) as err:
        PushConsumer("SettingsG", MQClientInstance(NO_NAMESRV), **{setting: value})  # type: ignore[arg-type]
    assert says in str(err.value)
    assert str(err.value).count("\n") == 0


def test_a_push_consumer_setting_changed_out_of_range_fails_start() -> None:
    """The settings are public attributes: start() checks them again, as Java's start() runs checkConfig,
    before the consumer registers or dials anything."""
    async def go() -> None:
        inst = MQClientInstance(NO_NAMESRV)
        c = PushConsumer("SettingsG", inst)
        c.subscribe("SettingsT", "*")
        c.register_concurrently(_listener)
        c.consume_batch_max_size = 0
        with pytest.raises(ClientConfigError, match=r"consume_batch_max_size Out of range \[1, 1024\]"):
            await c.start()
        assert not c._running and not c._tasks

    asyncio.run(go())


def test_push_consumer_settings_at_the_ends_of_their_ranges_are_accepted() -> None:
    PushConsumer("SettingsG", MQClientInstance(NO_NAMESRV), pull_batch_size=1024, consume_batch_max_size=1024,
                 consume_concurrency=1000, max_reconsume_times=-1, consume_timestamp_ms=0)
    PushConsumer("SettingsG", MQClientInstance(NO_NAMESRV), pull_batch_size=1, consume_batch_max_size=1,
                 consume_concurrency=1, max_reconsume_times=0)


@pytest.mark.parametrize(("setting", "value", "says"), [
    ("batch_max_bytes", 8 * 1024 * 1024, "batch_max_bytes Out of range [1, 2097152]"),
    ("batch_max_bytes", 0, "batch_max_bytes Out of range [1, 2097152]"),
    ("batch_max_bytes", -1, "batch_max_bytes Out of range [1, 2097152]"),
    ("batch_max_delay_ms", 0, "batch_max_delay_ms Out of range [1, 30000]"),
    ("batch_max_delay_ms", 30_001, "batch_max_delay_ms Out of range [1, 30000]"),
    ("total_batch_max_bytes", -1, "total_batch_max_bytes Out of range [1, +inf)"),
    ("total_batch_max_bytes", 0, "total_batch_max_bytes Out of range [1, +inf)"),
    ("retry_times_when_send_failed", -1, "retry_times_when_send_failed Out of range [0, 2147483647]"),
    ("send_timeout", 0, "send_timeout must be a number of seconds above 0"),
    ("send_timeout", -1.0, "send_timeout must be a number of seconds above 0"),
    ("max_message_size", 0, "max_message_size Out of range [1, 2147483647]"),
])
@pytest.mark.parametrize("auto_batch", [False, True])
def test_a_producer_setting_out_of_range_fails_its_construction(setting: str, value: object, says: str,
                                                                auto_batch: bool) -> None:
    """Batch settings are checked with AutoBatch off too (it can be switched on later), as Java's setters do."""
    with pytest.raises(ClientConfigError) as err:
        Producer("SettingsP", MQClientInstance(NO_NAMESRV), auto_batch=auto_batch,
                 **{setting: value})  # type: ignore[arg-type]
    assert says in str(err.value)


def test_producer_settings_at_the_ends_of_their_ranges_are_accepted() -> None:
    Producer("SettingsP", MQClientInstance(NO_NAMESRV), auto_batch=True, batch_max_bytes=2 * 1024 * 1024,
             batch_max_delay_ms=30_000, total_batch_max_bytes=1, retry_times_when_send_failed=0,
             send_timeout=0.001, max_message_size=1)
    Producer("SettingsP", MQClientInstance(NO_NAMESRV), batch_max_bytes=1, batch_max_delay_ms=1)


def test_a_producer_setting_changed_out_of_range_fails_start() -> None:
    async def go() -> None:
        p = Producer("SettingsP", MQClientInstance(NO_NAMESRV))
        p.retries = -1
        with pytest.raises(ClientConfigError, match="retry_times_when_send_failed Out of range"):
            await p.start()

    asyncio.run(go())


def test_sends_with_no_retry_and_a_send_timeout_of_their_own(servers: Servers) -> None:
    """retry_times_when_send_failed=0 is one attempt, which is sent; a send's own timeout <= 0 fails the
    call unsent, naming ``timeout`` (before: "got no answer within -1s")."""
    broker_addr = servers.brokers[0][0].config.broker_addr

    async def go() -> None:
        inst = MQClientInstance(servers.namesrv_addr)
        await create_topic(inst, broker_addr, "SettingsT", queues=2)
        p = Producer("SettingsP", inst, retry_times_when_send_failed=0)
        await p.start()
        try:
            sent = await p.send(Message("SettingsT", b"once"))
            assert sent.status == SendStatus.SEND_OK
            for bad in (0, -1.0):
                with pytest.raises(ClientConfigError, match="timeout must be a number of seconds above 0"):
                    await p.send(Message("SettingsT", b"never"), timeout=bad)
                with pytest.raises(ClientConfigError, match="timeout must be a number of seconds above 0"):
                    await p.send_batch([Message("SettingsT", b"never")], timeout=bad)
            # the broker answers once the commitlog has it and dispatches just after: wait for the unit
            mq = sent.message_queue
            await wait_dispatched(inst, "SettingsT", mq.broker_name, {mq.queue_id: sent.queue_offset + 1})
            api = ConsumerApi(inst, "SettingsG")
            assert sum([await api.max_offset(mq) for mq in await api.subscribe_queues("SettingsT")]) == 1
        finally:
            await p.shutdown()
            await inst.shutdown()

    asyncio.run(go())


def test_fetch_subscribe_queues_of_a_topic_without_readable_queues_is_an_error(servers: Servers) -> None:
    broker_addr = servers.brokers[0][0].config.broker_addr

    async def go() -> None:
        inst = MQClientInstance(servers.namesrv_addr)
        consumer = PullConsumer("SettingsG", inst)
        await consumer.start()
        try:
            with pytest.raises(BrokerError) as err:
                await consumer.fetch_subscribe_queues("NoSuchTopic")
            assert err.value.code == ResponseCode.TOPIC_NOT_EXIST
            assert "Can not find Message Queue for this topic, NoSuchTopic" in str(err.value)

            # routed, but write-only (perm 2): no queue to subscribe to either, as Java's
            # topicRouteData2TopicSubscribeInfo keeps readable queues only
            header = CreateTopicRequestHeader(topic="WriteOnlyT", default_topic="TBW102", read_queue_nums=2,
                                              write_queue_nums=2, perm=2, topic_filter_type="SINGLE_TAG")
            inst.check(await inst.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header))
            for _ in range(50):
                if await inst.get_route("WriteOnlyT", refresh=True):
                    break
                await asyncio.sleep(0.1)
            with pytest.raises(BrokerError, match="Can not find Message Queue for this topic, WriteOnlyT"):
                await consumer.fetch_subscribe_queues("WriteOnlyT")

            await create_topic(inst, broker_addr, "SettingsT", queues=2)
            assert [q.queue_id for q in await consumer.fetch_subscribe_queues("SettingsT")] == [0, 1]
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    asyncio.run(go())


def test_a_pull_with_arguments_out_of_range_fails_unsent(servers: Servers) -> None:
    """Java's pullSyncImpl: "offset < 0", "maxNums <= 0"; before, the broker answered a warning."""
    broker_addr = servers.brokers[0][0].config.broker_addr

    async def go() -> None:
        inst = MQClientInstance(servers.namesrv_addr)
        await create_topic(inst, broker_addr, "SettingsT", queues=1)
        consumer = PullConsumer("SettingsG", inst)
        await consumer.start()
        try:
            (mq,) = await consumer.fetch_subscribe_queues("SettingsT")
            with pytest.raises(ClientConfigError, match=r"max_nums Out of range \[1, \+inf\)"):
                await consumer.pull(mq, "*", 0, max_nums=0)
            with pytest.raises(ClientConfigError, match=r"offset Out of range \[0, \+inf\)"):
                await consumer.pull(mq, "*", -1)
            with pytest.raises(ClientConfigError, match=r"block_ms Out of range \[0, \+inf\)"):
                await consumer.pull(mq, "*", 0, block_ms=-1)
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    asyncio.run(go())
