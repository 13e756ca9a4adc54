"""The one-call put (``fast_put.put_fast`` over ``hotpath.put_fast``) against the general put path.

Why: the one-call path writes the record, its consume queue unit and its index entries itself, so
every byte it writes must be what ``CommitLog.put_message`` + dispatch would have written, and every
message it declines must be left to that path untouched. Two stores get the same few thousand puts
(mixed keys, no keys, IPv6 hosts, non-ASCII and long topics, files rolling, messages the fast path
must decline) with the same clock, one through the general path only, one through the one-call path
on each implementation (C and pure Python); their commitlog, consume queue and index files must be
byte-identical and every put must get the same answer. The two implementations of ``put_fast`` are
also compared call by call on random messages, declines included.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_util import BASE_TS

from broker_core.store import fast_put, message_store
from broker_core.store.codec import hot_py
from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.sys_flag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE
from broker_core.store.commit_log import PutMessageResult
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import ASYNC_FLUSH, StoreConfig

try:
    from broker_core.store.codec import _hotpath as compiled
except ImportError:  # no compiler here: only the twin runs
    compiled = None

IMPLEMENTATIONS = [pytest.param(hot_py.put_fast, id="python"),
                   pytest.param(compiled.put_fast if compiled is not None else None, id="c",
                                marks=pytest.mark.skipif(compiled is None, reason="_hotpath is not built here"))]


def config() -> StoreConfig:
    """Files small enough that a few thousand puts roll commitlog, consume queue and index files."""
    return StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 128,
                       max_hash_slot_num=97, max_index_num=400, flush_disk_type=ASYNC_FLUSH)


class StepClock:
    """The store time of the current put: the same however often a path asks within one put."""

    def __init__(self) -> None:
        self.now = BASE_TS

    def __call__(self) -> int:
        return self.now


def messages(count: int, seed: int = 17) -> list[MessageInner]:
    rnd = random.Random(seed)
    topics = ["TopicA", "TopicB", "主题", "T" * 140]  # a non-ASCII topic; a V2 (2-byte length) topic
    hosts = [("10.0.0.1", 40000), ("192.168.7.9", 1), ("::1", 10911), ("2001:db8::ff00:42:8329", 65535)]
    out = []
    for i in range(count):
        props: dict[str, str] = {}
        kind = rnd.randrange(6)
        if kind != 0:
            props["UNIQ_KEY"] = f"7F000001{i:024X}"
        if kind in (2, 3):
            props["KEYS"] = " ".join(f"k{i}-{j}" for j in range(rnd.randrange(1, 4)))
        if kind == 3:
            props["KEYS"] = f"  spaced {i}  key{i} "
        if kind == 4:
            props["KEYS"] = f"ключ{i}"  # non-ASCII key
        if rnd.random() < 0.7:
            props["TAGS"] = rnd.choice(["TagA", "TagB", "", "标签"])
        if rnd.random() < 0.3:
            props["WAIT"] = "true"
        sys_flag = 0
        topic = rnd.choice(topics)
        if i % 97 == 5:
            sys_flag = TRANSACTION_PREPARED_TYPE  # declined: no queue offset
        elif i % 97 == 6:
            sys_flag = TRANSACTION_COMMIT_TYPE  # taken: enters the queue
        elif i % 89 == 7:
            topic = "SCHEDULE_TOPIC_XXXX"  # declined: delay-level tagsCode
            props["DELAY"] = "3"
            props["REAL_TOPIC"] = "TopicA"
        elif i % 83 == 8:
            props["EMPTY"] = None  # type: ignore[assignment]  # declined: a None value is skipped
        body = bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 1, 40, 300, 1500])))
        out.append(MessageInner(topic=topic, body=body, properties=props, queue_id=rnd.randrange(3),
                                sys_flag=sys_flag, born_timestamp=BASE_TS - i, born_host=rnd.choice(hosts),
                                store_host=rnd.choice(hosts), flag=rnd.randrange(-5, 5),
                                reconsume_times=rnd.randrange(3)))
    # a record too large for a mapped copy (vectored write), larger than a whole file: declined/refused
    out.insert(100, MessageInner(topic="TopicA", body=bytes(5000), properties={"UNIQ_KEY": "BIG"},
                                 born_host=hosts[0], store_host=hosts[0]))
    out.insert(200, MessageInner(topic="TopicA", body=bytes(300 * 1024), born_host=hosts[0], store_host=hosts[0]))
    return out


def put_all(root: Path, msgs: list[MessageInner]) -> list[PutMessageResult]:
    clock = StepClock()
    answers = []
    store = MessageStore(root, config(), clock=clock).open()
    try:
        for i, m in enumerate(msgs):
            clock.now = BASE_TS + i * 13
            r = store.put_message(m)
            answers.append(r)  # every field (dataclass equality): msg_num, remark and msg_ids too
    finally:
        store.shutdown()
    return answers


def store_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for sub in ("commitlog", "consumequeue", "index")
            for p in sorted((root / sub).rglob("*")) if p.is_file()}


def copy_msgs(msgs: list[MessageInner]) -> list[MessageInner]:
    """The stores must not share message objects (a put may set properties on them)."""
    return [MessageInner(topic=m.topic, body=m.body, properties=dict(m.properties), queue_id=m.queue_id,
                         flag=m.flag, sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                         store_host=m.store_host, reconsume_times=m.reconsume_times) for m in msgs]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_one_call_path_writes_the_general_paths_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impl) -> None:
    msgs = messages(3000)
    monkeypatch.setattr(message_store, "put_fast", lambda store, msg: None)
    general = put_all(tmp_path / "general", copy_msgs(msgs))
    monkeypatch.undo()

    taken = 0

    def counting(*args):
        nonlocal taken
        done = impl(*args)
        taken += done is not None
        return done

    monkeypatch.setattr(fast_put, "_put_fast", counting)
    fast = put_all(tmp_path / "fast", copy_msgs(msgs))

    assert fast == general
    assert sum(a.status == "PUT_OK" for a in fast) > 2900
    assert general[200].status == "MESSAGE_ILLEGAL"  # the record larger than a file
    # most puts took the one call; the rest (first put of a queue, rolls, declines) the general path
    assert 2000 < taken < len(msgs) - 100
    a, b = store_files(tmp_path / "general"), store_files(tmp_path / "fast")
    assert sorted(a) == sorted(b)
    assert len([n for n in a if n.startswith("index")]) > 3  # index files rolled
    assert len([n for n in a if n.startswith("commitlog")]) > 3
    for name in a:
        assert a[name] == b[name], f"{name} differs"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_declined_put_writes_nothing(tmp_path: Path, impl) -> None:
    """A decline leaves every buffer as it was: the general path then writes the record from scratch."""
    cl, cq, ix = bytearray(4096), bytearray(200), bytearray(40 + 4 * 7 + 20 * 8)
    big = MessageInner(topic="T", body=bytes(4000), properties={"UNIQ_KEY": "U"}, born_host=("1.2.3.4", 1),
                       store_host=("1.2.3.4", 2))
    many_keys = MessageInner(topic="T", body=b"x", properties={"KEYS": " ".join(f"k{i}" for i in range(8))},
                             born_host=("1.2.3.4", 1), store_host=("1.2.3.4", 2))
    bad_host = MessageInner(topic="T", body=b"x", born_host=("1.2.3", 1), store_host=("1.2.3.4", 2))
    for msg in (big, many_keys, bad_host):
        assert impl(msg, 4 << 20, cl, 0, 4096 - 200, 0, 0, BASE_TS, cq, 0, ix, 7, 8, 1, 0, 0, 0) is None
    assert not any(cl) and not any(cq) and not any(ix)
    ok = MessageInner(topic="T", body=b"x", properties={"KEYS": "a b"}, born_host=("1.2.3.4", 1),
                      store_host=("1.2.3.4", 2))
    done = impl(ok, 4 << 20, cl, 0, 4096, 0, 0, BASE_TS, cq, 180, ix, 7, 8, 1, 0, 0, 0)
    assert done is not None and done[7] == 3 and any(cq[180:])
    assert impl(ok, 4 << 20, cl, 0, 4096, 0, 0, BASE_TS, cq, 181, ix, 7, 8, 1, 0, 0, 0) is None  # no room for the unit


class Name(str):
    """A str subclass: its text is a host name's, its type is not one the one-call path takes."""


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_host_equal_to_a_remembered_one_is_still_checked_for_its_types(impl) -> None:
    """The hot path remembers the hosts it has taken; a host merely equal to one of them (a float or
    bool port, a str subclass name, a tuple subclass) is declined as the first time, not taken from
    that memory, and an unhashable one is declined, not an error."""
    cl, cq, ix = bytearray(4096), bytearray(200), bytearray(40 + 4 * 7 + 20 * 8)

    def put(born, store=("10.9.8.7", 1)):
        msg = MessageInner(topic="T", body=b"x", properties={"KEYS": "k"}, born_host=born, store_host=store)
        return impl(msg, 4 << 20, cl, 0, 4096, 0, 0, BASE_TS, cq, 0, ix, 7, 8, 1, 0, 0, 0)

    assert put(("10.9.8.7", 1)) is not None  # now remembered, as born and as store host
    for odd in (("10.9.8.7", 1.0), ("10.9.8.7", True), (Name("10.9.8.7"), 1), ("10.9.8.7", [1]),
                type("Pair", (tuple,), {})(("10.9.8.7", 1))):
        assert put(odd) is None, odd
        assert put(("10.9.8.7", 1), odd) is None, odd


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
awkward = st.one_of(texts, st.sampled_from(["", "a\x01b", "x\x02", "日本語", "😀", "TagA", " k  k2 ", "INNER_NUM"]))
plain = st.text(st.characters(min_codepoint=32, blacklist_categories=("Cs",)), min_size=1, max_size=12)
hosts = st.one_of(st.tuples(st.sampled_from(["10.1.2.3", "fe80::1"]), st.integers(0, 65535)),
                  st.sampled_from([("127.0.0.1", 1), ("::1", 2), ("10.0.0.1", 70000), ("127.1", 5), ("x", 1),
                                   ("10.0.0.1", 5.0), ["10.0.0.1", 5], ("10.0.0.1", True)]))


@pytest.mark.skipif(compiled is None, reason="_hotpath is not built here")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topic=st.one_of(plain, st.just("x" * 130), awkward, st.just("SCHEDULE_TOPIC_XXXX")),
       body=st.one_of(st.binary(max_size=64), st.binary(max_size=8).map(bytearray)),
       props=st.one_of(st.dictionaries(plain, plain, max_size=4),
                       st.dictionaries(awkward, st.one_of(awkward, st.none()), max_size=4)),
       keys=st.one_of(st.none(), plain, awkward), uniq=st.one_of(st.none(), plain),
       sys_flag=st.sampled_from([0, 0, 4, 8, 12, 0x10, 0x80]), born=hosts, store=hosts,
       index_count=st.integers(1, 9), limit=st.one_of(st.just(600), st.integers(0, 600)),
       keep=st.sampled_from([False, False, True]))
def test_both_implementations_agree(topic, body, props, keys, uniq, sys_flag, born, store, index_count, limit,
                                    keep) -> None:
    if keys is not None:
        props = {**props, "KEYS": keys}
    if uniq is not None:
        props = {**props, "UNIQ_KEY": uniq}
    msg = MessageInner(topic=topic, body=body, properties=props, sys_flag=sys_flag, born_host=born,
                       store_host=store, keep_store_timestamp=keep, store_timestamp=BASE_TS)
    results = []
    for impl in (hot_py.put_fast, compiled.put_fast):
        cl, cq, ix = bytearray(600), bytearray(40), bytearray(40 + 4 * 5 + 20 * 30)
        done = impl(msg, 4 << 20, cl, 3, limit, 1000, 7, BASE_TS, cq, 20, ix, 5, 30, index_count, BASE_TS - 5000,
                    900, 1)
        results.append((done, bytes(cl), bytes(cq), bytes(ix)))
    assert results[0] == results[1]
