from __future__ import annotations


def test_produce_then_simple_consume(grpc_broker):
    grpc_broker.broker.create_or_update_topic("Orders", 4, 4)
    sent = grpc_broker.client("produce", topic="Orders", count=5, tag="TagA", keys="k")
    assert len(sent["sent"]) == 5, sent
    got = grpc_broker.client("simple_consume", topic="Orders", group="G1", expect=5)
    assert sorted(m["body"] for m in got["received"]) == [f"m-{i}" for i in range(5)]
    assert {m["id"] for m in got["received"]} == set(sent["sent"])
    assert all(m["attempt"] == 1 and m["tag"] == "TagA" and not m["corrupted"] for m in got["received"])
