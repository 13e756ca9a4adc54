"""What POP consumers (remoting POP_MESSAGE, as Java's pop consumers send it) and gRPC consumers (the
official Python client's receive, served by the same pop) take counts in the broker's get figures, as
pulls do: ``mqadmin statsAll`` OutTPS / OutMsg24Hour and ``consumerProgress``'s Consume TPS, over -n on
a real mqbroker. They were 0 for every POP and gRPC group (only the pull path counted gets)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from net_util import RawClient, mqadmin, records

from broker_core.remoting import RequestCode, ResponseCode
from tests.grpc_v2.conftest import run_scenario
from tests.remoting_broker import running_broker


def _pop(client: RawClient, group: str, topic: str) -> int:
    """One POP_MESSAGE of up to 8 messages from the start of ``topic``; how many came."""
    r = client.call(RequestCode.POP_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "8", "invisibleTime": "60000",
        "pollTime": "0", "bornTime": str(int(time.time() * 1000)), "initMode": "0", "expType": "TAG", "exp": "*"})
    assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), r.remark
    return len(records(r.body)) if r.code == ResponseCode.SUCCESS else 0


def _consume_tps(ns: str, group: str) -> float:
    out = mqadmin(ns, "consumerProgress", "-g", group, "-t", "PopStatsT")
    return float(next(line for line in out.splitlines() if line.startswith("Consume TPS: ")).split(": ")[1])


def test_pop_and_grpc_receives_count_in_stats_all_and_consume_tps(tmp_path: Path) -> None:
    with running_broker(tmp_path / "b") as b:
        ns = b.namesrv_addr
        mqadmin(ns, "updateTopic", "-c", "DefaultCluster", "-t", "PopStatsT", "-r", "2", "-w", "2")
        for group in ("PopG", "GrpcG"):
            mqadmin(ns, "updateSubGroup", "-c", "DefaultCluster", "-g", group)
        for i in range(4):
            mqadmin(ns, "sendMessage", "-t", "PopStatsT", "-p", f"m{i}")
        client = RawClient(b.broker_addr)
        try:
            got, deadline = 0, time.monotonic() + 20
            while got < 4 and time.monotonic() < deadline:
                got += _pop(client, "PopG", "PopStatsT")
        finally:
            client.close()
        assert got == 4
        home = tmp_path / "home"
        home.mkdir()
        assert b.grpc_addr is not None
        received = run_scenario(b.grpc_addr, home, "simple_consume", topic="PopStatsT", group="GrpcG", expect=4,
                                timeout=30)["received"]
        assert sorted(m["body"] for m in received) == [f"m{i}" for i in range(4)]
        rows = {r["consumerGroup"]: r for r in json.loads(mqadmin(ns, "statsAll", "-t", "PopStatsT",
                                                                  "--output", "json"))}
        assert {g: (rows[g]["outMsg24Hour"], rows[g]["outTPS"] > 0) for g in ("PopG", "GrpcG")} == {
            "PopG": (4, True), "GrpcG": (4, True)}, rows
        assert _consume_tps(ns, "PopG") > 0 and _consume_tps(ns, "GrpcG") > 0
