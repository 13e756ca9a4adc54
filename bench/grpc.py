"""gRPC v2 (official rocketmq-python-client) vs our remoting path, against one mqbroker process.

Same run, same broker, same counts, 1 KiB bodies:
- gRPC: official Producer.send (sync, one message per RPC), then SimpleConsumer receive (batches
  of 32) + ack of every message;
- remoting: our Producer.send (sync), then a pull consumer reading every queue and committing offsets.
Prints msg/s for each phase, where the CPU went (broker process vs client process, from
/proc/<pid>/stat) and one JSON line with ``grpc_vs_remoting_ratio`` (end-to-end msg/s ratio).

Usage: python bench/grpc.py [--count N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _args import positive_int  # this folder is still on sys.path here

REPO = Path(__file__).resolve().parents[1]
# This file is named as the issue asks (bench/grpc.py); its folder must not shadow the grpc package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(REPO))
BODY = b"x" * 1024
CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def start_broker(workdir: Path) -> tuple[subprocess.Popen[str], str, str, str]:
    conf = workdir / "broker.conf"
    conf.write_text("flushDiskType=ASYNC_FLUSH\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "broker_core.mqbroker", "--store", str(workdir / "store"),
                             "-c", str(conf), "--host", "127.0.0.1", "--listenPort", "0", "--namesrvPort", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    found: dict[str, str] = {}
    patterns = {"namesrv": r"Name Server boot success.*address (\S+:\d+)",
                "broker": r"The broker\[[^,\]]+, (\S+:\d+)\] boot success",
                "grpc": r"gRPC v2 endpoint boot success on (\S+:\d+)"}
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while len(found) < 3 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        for key, pat in patterns.items():
            if m := re.search(pat, line):
                found[key] = m.group(1)
    if len(found) < 3:
        proc.kill()
        raise SystemExit(f"mqbroker did not start: {found}")
    return proc, found["namesrv"], found["broker"], found["grpc"]


def phase(broker_pid: int, fn) -> dict:  # noqa: ANN001 - a zero-argument callable returning a count
    b0, c0, t0 = cpu_seconds(broker_pid), self_cpu(), time.perf_counter()
    n = fn()
    wall = time.perf_counter() - t0
    return {"count": n, "wall_s": round(wall, 3), "msg_s": round(n / wall, 1),
            "broker_cpu_s": round(cpu_seconds(broker_pid) - b0, 3), "client_cpu_s": round(self_cpu() - c0, 3)}


def grpc_phases(addr: str, topic: str, count: int, broker_pid: int) -> tuple[dict, dict]:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    cfg = ClientConfiguration(addr, Credentials())
    producer = Producer(cfg, (topic,))
    producer.startup()

    def produce() -> int:
        for _ in range(count):
            m = Message()
            m.topic, m.body = topic, BODY
            producer.send(m)
        return count

    produced = phase(broker_pid, produce)
    producer.shutdown()
    consumer = SimpleConsumer(cfg, "BenchGrpcGroup", {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()

    def consume() -> int:
        got = 0
        while got < count:
            for m in consumer.receive(32, 60):
                consumer.ack(m)
                got += 1
        return got

    consumed = phase(broker_pid, consume)
    consumer.shutdown()
    return produced, consumed


def remoting_phases(namesrv: str, broker_addr: str, topic: str, count: int, broker_pid: int) -> tuple[dict, dict]:
    from broker_core.client.consumer_api import PullStatus
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.message import Message
    from broker_core.client.producer import Producer
    from broker_core.client.pull_consumer import PullConsumer

    async def produce() -> int:
        inst = MQClientInstance(namesrv)
        p = Producer("BenchRemotingProducer", inst)
        await p.start()
        for _ in range(count):
            await p.send(Message(topic, BODY))
        await p.shutdown()
        await inst.shutdown()
        return count

    async def consume() -> int:
        inst = MQClientInstance(namesrv)
        c = PullConsumer("BenchRemotingGroup", inst)
        await c.start()
        got = 0
        for mq in await c.fetch_subscribe_queues(topic):
            offset = 0
            while True:
                r = await c.pull(mq, "*", offset, 32)
                got += len(r.messages)
                if r.status != PullStatus.FOUND or r.next_begin_offset == offset:
                    break
                offset = r.next_begin_offset
                await c.update_consume_offset(mq, offset)  # the "ack" of the pull model
        await c.shutdown()
        await inst.shutdown()
        return got

    produced = phase(broker_pid, lambda: asyncio.run(produce()))
    consumed = phase(broker_pid, lambda: asyncio.run(consume()))
    return produced, consumed


def create_topics(namesrv: str, broker_addr: str, topics: list[str]) -> None:
    from broker_core.client.instance import MQClientInstance
    from broker_core.remoting import RequestCode
    from broker_core.remoting.headers import CreateTopicRequestHeader

    async def go() -> None:
        inst = MQClientInstance(namesrv)
        for t in topics:
            header = CreateTopicRequestHeader(topic=t, default_topic="TBW102", read_queue_nums=4, write_queue_nums=4,
                                              perm=6, topic_filter_type="SINGLE_TAG")
            inst.check(await inst.invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header))
            for _ in range(100):
                if await inst.get_route(t, refresh=True):
                    break
                await asyncio.sleep(0.1)
        await inst.shutdown()

    asyncio.run(go())


def client_missing() -> str | None:
    """Why the official client (PyPI ``rocketmq-python-client``) cannot be imported, or None."""
    try:
        from rocketmq import (  # noqa: F401
            ClientConfiguration,
            Credentials,
            FilterExpression,
            Message,
            Producer,
            SimpleConsumer,
        )
    except ImportError as e:
        return str(e)
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=positive_int, default=3000, help="messages per side (default 3000)")
    args = ap.parse_args()
    why = client_missing()
    if why is not None:  # checked before the broker starts
        print(f"bench/grpc.py: the official gRPC client is missing ({why}; pip install rocketmq-python-client)",
              file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-grpc-") as tmp:
        os.environ["HOME"] = tmp  # the official client writes its log under $HOME
        proc, namesrv, broker_addr, grpc_addr = start_broker(Path(tmp))
        try:
            create_topics(namesrv, broker_addr, ["BenchGrpc", "BenchRemoting"])
            g_prod, g_cons = grpc_phases(grpc_addr, "BenchGrpc", args.count, proc.pid)
            r_prod, r_cons = remoting_phases(namesrv, broker_addr, "BenchRemoting", args.count, proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    for name, figures in (("grpc produce", g_prod), ("grpc receive+ack", g_cons),
                          ("remoting produce", r_prod), ("remoting pull", r_cons)):
        print(f"{name:18} {figures}")
    grpc_e2e = args.count / (g_prod["wall_s"] + g_cons["wall_s"])
    remoting_e2e = args.count / (r_prod["wall_s"] + r_cons["wall_s"])
    print(json.dumps({
        "count": args.count, "body_bytes": len(BODY),
        "grpc_produce_msg_s": g_prod["msg_s"], "grpc_consume_msg_s": g_cons["msg_s"],
        "remoting_produce_msg_s": r_prod["msg_s"], "remoting_consume_msg_s": r_cons["msg_s"],
        "grpc_msg_s": round(grpc_e2e, 1), "remoting_msg_s": round(remoting_e2e, 1),
        "grpc_broker_cpu_s": round(g_prod["broker_cpu_s"] + g_cons["broker_cpu_s"], 3),
        "grpc_client_cpu_s": round(g_prod["client_cpu_s"] + g_cons["client_cpu_s"], 3),
        "remoting_broker_cpu_s": round(r_prod["broker_cpu_s"] + r_cons["broker_cpu_s"], 3),
        "remoting_client_cpu_s": round(r_prod["client_cpu_s"] + r_cons["client_cpu_s"], 3),
        "grpc_vs_remoting_ratio": round(grpc_e2e / remoting_e2e, 3),
        "loadavg_1m": os.getloadavg()[0],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
