"""A consumer's first heartbeat creates its group's %RETRY% topic and the name server routes it at once
(as Java's broker does), not at the next periodic registration 30 s later."""

from __future__ import annotations

import asyncio
import time

from broker_core.client.instance import MQClientInstance
from broker_core.remoting import RequestCode
from broker_core.remoting.bodies import ConsumerData, HeartbeatData, SubscriptionData
from tests.remoting_broker import running_broker


def test_heartbeat_creates_and_routes_the_retry_topic(tmp_path):
    with running_broker(tmp_path / "b", extra_args=("--registerNameServerPeriod", "600000")) as b:
        async def go() -> float:
            inst = MQClientInstance(b.namesrv_addr)
            hb = HeartbeatData(client_id="retry-test@1", consumer_data_set=[ConsumerData(
                group_name="RetryG", subscription_data_set=[SubscriptionData(topic="AnyTopic", sub_string="*")])])
            inst.check(await inst.invoke(b.broker_addr, RequestCode.HEART_BEAT, body=hb.to_json()))
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                if await inst.get_route("%RETRY%RetryG", refresh=True):
                    break
                await asyncio.sleep(0.1)
            waited = time.monotonic() - t0
            await inst.shutdown()
            return waited

        waited = asyncio.run(asyncio.wait_for(go(), 60))
        assert waited < 5, f"the retry topic was routed only after {waited:.1f} s"
