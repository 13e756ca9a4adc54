"""Re-put the golden manifests into empty stores: the files must come out byte-identical to Java's.

Why: this is the writing direction of byte compatibility — record encoding, blank tails, CQ and BCQ
units (incl. INNER_BASE/INNER_NUM), file rolling and index files, all checked against Java output.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from golden_helpers import GOLDEN_ROOT, golden_store_config

from broker_core.store.codec.hosts import parse_host
from broker_core.store.codec.message import MessageInner
from broker_core.store.codec.properties import decode_properties
from broker_core.store.message_store import MessageStore
from broker_core.store.store_config import StoreConfig
from broker_core.store.topic_config import TopicConfig


def manifest_message(x: dict) -> MessageInner:
    return MessageInner(
        topic=x["topic"], body=base64.b64decode(x["body"]), properties=decode_properties(x["propertiesString"]),
        queue_id=x["queueId"], flag=x["flag"], sys_flag=x["sysFlag"] & ~0x30, born_timestamp=x["bornTimestamp"],
        born_host=parse_host(x["bornHost"]), store_host=parse_host(x["storeHost"]),
        reconsume_times=x["reconsumeTimes"], prepared_transaction_offset=x["preparedTransactionOffset"],
        store_timestamp=x["storeTimestamp"], keep_store_timestamp=True)


def files_under(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["store-basic", "store-batchcq"])
def test_reput_manifest_is_byte_identical(name: str, tmp_path: Path, manifests) -> None:
    man = manifests[name]
    root = tmp_path / name
    ts = [man["messages"][0]["storeTimestamp"]]
    store = MessageStore(root, StoreConfig.from_properties(golden_store_config(name)), clock=lambda: ts[0]).open()
    for topic, attrs in man.get("topicAttributes", {}).items():
        store.topic_table.put(TopicConfig(topic, 2, 2, attributes=dict(attrs)), 0)
    for x in man["messages"]:
        ts[0] = x["storeTimestamp"]  # index file names come from the clock; keep it in the data's era
        msg = manifest_message(x)
        r = store.put_inner_batch(msg, x["innerNum"]) if x.get("innerBatch") else store.put_message(msg)
        assert r.ok, (x["index"], r)
        assert (r.wrote_offset, r.wrote_bytes, r.queue_offset) == (x["physicalOffset"], x["size"], x["queueOffset"])
        assert r.msg_id == x["offsetMsgId"] and r.msg_num == x["msgNum"]
    assert store.get_max_phy_offset() == man["commitLogMaxOffset"]
    store.shutdown()

    golden = GOLDEN_ROOT / name
    for sub in ("commitlog", "consumequeue", "batchconsumequeue"):
        if not (golden / sub).exists():
            assert not (root / sub).exists()
            continue
        want, got = files_under(golden / sub), files_under(root / sub)
        assert sorted(got) == sorted(want), sub
        for rel in want:
            assert got[rel] == want[rel], f"{sub}/{rel} differs"
    # index files are named by creation time: compare in name order
    want_idx = [p.read_bytes() for p in sorted((golden / "index").iterdir())]
    got_idx = [p.read_bytes() for p in sorted((root / "index").iterdir())]
    assert len(got_idx) == len(want_idx)
    for i, (a, b) in enumerate(zip(got_idx, want_idx, strict=True)):
        assert a == b, f"index file #{i} differs"
    assert not (root / "abort").exists() and (root / "lock").read_bytes() == b"lock"
