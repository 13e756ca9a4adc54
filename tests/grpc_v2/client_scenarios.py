"""Scenarios for the official rocketmq-python-client, run as a child process by the gRPC tests.

Usage: client_scenarios.py SCENARIO ENDPOINT JSON_ARGS. Prints one JSON line with what happened.
Every scenario is bounded in time and shuts its client down.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import FilterType


def config(endpoint: str, args: dict) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials(args.get("ak", ""), args.get("sk", "")), request_timeout=5)


def view(m: Message) -> dict:
    return {"id": m.message_id, "body": m.body.decode("utf-8", "replace"), "tag": m.tag, "keys": list(m.keys or []),
            "group": m.message_group, "attempt": m.delivery_attempt, "properties": dict(m.properties or {}),
            "corrupted": m.corrupted, "topic": m.topic}


def build(topic: str, args: dict, i: int) -> Message:
    m = Message()
    m.topic = topic
    m.body = f"{args.get('prefix', 'm')}-{i}".encode()
    if args.get("tag"):
        m.tag = args["tag"] if isinstance(args["tag"], str) else args["tag"][i % len(args["tag"])]
    if args.get("keys"):
        m.keys = f"{args['keys']}-{i}"
    if args.get("groups"):
        m.message_group = args["groups"][i % len(args["groups"])]
    if args.get("delay_s"):
        m.delivery_timestamp = int(time.time()) + int(args["delay_s"])
    for k, v in (args.get("props") or {}).items():
        m.add_property(k, str(v) if not isinstance(v, list) else str(v[i % len(v)]))
    return m


def produce(endpoint: str, args: dict) -> dict:
    topic = args["topic"]
    producer = Producer(config(endpoint, args), (topic,))
    producer.startup()
    sent, errors = [], []
    try:
        for i in range(int(args.get("count", 1))):
            try:
                r = producer.send(build(topic, args, i))
                sent.append(r.message_id)
            except Exception as e:  # the test asserts on the error text
                errors.append(f"{type(e).__name__}: {e}")
    finally:
        producer.shutdown()
    return {"sent": sent, "errors": errors}


def filter_of(args: dict) -> FilterExpression:
    if args.get("sql"):
        return FilterExpression(args["sql"], FilterType.SQL)
    return FilterExpression(args.get("tag_filter", "*"))


def simple_consume(endpoint: str, args: dict) -> dict:
    topic, group = args["topic"], args["group"]
    consumer = SimpleConsumer(config(endpoint, args), group, {topic: filter_of(args)},
                              await_duration=int(args.get("await", 5)))
    consumer.startup()
    got, errors = [], []
    last_at = None
    if args.get("start_at"):  # started ahead (client startup), the first receive waits for this epoch time
        time.sleep(max(0.0, float(args["start_at"]) - time.time()))
    deadline = time.time() + float(args.get("timeout", 20))
    try:
        while len(got) < int(args["expect"]) and time.time() < deadline:
            try:
                batch = consumer.receive(int(args.get("batch", 16)), int(args.get("invisible", 15)))
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
                time.sleep(0.5)
                continue
            for m in batch:
                last_at = time.time()
                got.append(view(m))
                if args.get("change_invisible") is not None:
                    consumer.change_invisible_duration(m, int(args["change_invisible"]))
                if args.get("ack", True):
                    consumer.ack(m)
    finally:
        consumer.shutdown()
    return {"received": got, "errors": errors, "last_received_at": last_at}


def push_consume(endpoint: str, args: dict) -> dict:
    topic, group = args["topic"], args["group"]
    got: list[dict] = []
    lock = threading.Lock()
    fail_ids = set(args.get("fail_bodies", []))

    class Listener(MessageListener):
        def consume(self, message: Message) -> ConsumeResult:
            with lock:
                got.append(view(message) | {"at": time.time()})
                if args.get("log_file"):  # each delivery as it happens, for a test that acts meanwhile
                    with open(args["log_file"], "a") as f:
                        f.write(json.dumps(got[-1]) + "\n")
            time.sleep(float(args.get("consume_s", 0)))  # a slow listener: the rest wait in the client's cache
            if message.body.decode() in fail_ids or args.get("fail_all"):
                return ConsumeResult.FAILURE
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(config(endpoint, args), group, Listener(), {topic: filter_of(args)},
                            consumption_thread_count=int(args.get("threads", 4)))
    consumer.startup()
    deadline = time.time() + float(args.get("timeout", 20))
    try:
        stop_file = args.get("stop_file")
        while time.time() < deadline:
            with lock:
                done = sum(1 for g in got if g["body"] not in fail_ids) >= int(args.get("expect", 10**9))
            if stop_file is not None:
                done = os.path.exists(stop_file)
            if done:
                break
            time.sleep(0.1)
        time.sleep(float(args.get("linger", 0.5)))
    finally:
        consumer.shutdown()
    return {"received": got}


class Checker(TransactionChecker):
    def __init__(self, resolution: TransactionResolution) -> None:
        self.resolution = resolution
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.message_id)
        return self.resolution


def transaction(endpoint: str, args: dict) -> dict:
    topic = args["topic"]
    checker = Checker(TransactionResolution.COMMIT if args.get("check") == "commit" else TransactionResolution.ROLLBACK)
    producer = Producer(config(endpoint, args), (topic,), checker)
    producer.startup()
    try:
        tx = producer.begin_transaction()
        r = producer.send(build(topic, args, 0), tx)
        mode = args["mode"]
        if mode == "commit":
            tx.commit()
        elif mode == "rollback":
            tx.rollback()
        else:  # leave it open: the broker must ask us
            deadline = time.time() + float(args.get("timeout", 15))
            while not checker.checked and time.time() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
    finally:
        producer.shutdown()
    return {"id": r.message_id, "checked": checker.checked}


def transaction_checker(endpoint: str, args: dict) -> dict:
    """A producer that only answers check-backs (``check``: commit, rollback or unknown) until
    ``stop_file`` exists or ``timeout`` passes; another instance of the same app owns the transaction."""
    resolutions = {"commit": TransactionResolution.COMMIT, "rollback": TransactionResolution.ROLLBACK,
                   "unknown": TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED}
    checker = Checker(resolutions[args.get("check", "unknown")])
    producer = Producer(config(endpoint, args), (args["topic"],), checker)
    producer.startup()
    if args.get("ready_file"):
        open(args["ready_file"], "w").close()
    try:
        deadline = time.time() + float(args.get("timeout", 30))
        while not os.path.exists(args["stop_file"]) and time.time() < deadline:
            time.sleep(0.1)
    finally:
        producer.shutdown()
    return {"checked": checker.checked}


SCENARIOS = {"produce": produce, "simple_consume": simple_consume, "push_consume": push_consume,
             "transaction": transaction, "transaction_checker": transaction_checker}

if __name__ == "__main__":
    name, endpoint, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    out = SCENARIOS[name](endpoint, json.loads(raw))
    print(json.dumps(out), flush=True)
