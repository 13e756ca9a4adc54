"""A plain, sequential Python scan of commitlog files: the oracle the Spark search is compared with.

Deliberately simple and independent of ``spark/``: one ``check_record`` per record (recovery's
verdict, body CRC included) from the start of each file until its first non-valid record, inner
batches unpacked with ``decode_batch``, the query applied afterwards in plain Python with the
broker's SQL92 filter. Only the codec (the one place that knows the bytes) is shared.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from broker_core.broker.filter.sql92 import compile_sql92
from broker_core.store.codec.batch import decode_batch
from broker_core.store.codec.message import RECORD_VALID, check_record
from broker_core.store.codec.message_id import create_offset_msg_id
from broker_core.store.codec.properties import decode_properties

FIELDS = ("store", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "uniqKey", "tags", "keys",
          "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "reconsumeTimes", "sysFlag", "flag",
          "storeSize", "properties", "body", "body_text")


def _host(h: tuple[str, int]) -> str:
    ip, port = h
    if ":" in ip:
        ip = ":".join(format(int(g, 16), "x") for g in ipaddress.IPv6Address(ip).exploded.split(":"))
    return f"{ip}:{port}"


def _text(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def scan_store(store: Path) -> tuple[list[dict], list[tuple[str, int, str]]]:
    """(every message in commitlog order, [(file, offset, reason)] of files that end at invalid data)."""
    out: list[dict] = []
    ends: list[tuple[str, int, str]] = []
    name = str(Path(store).resolve())
    for f in sorted((Path(store) / "commitlog").iterdir()):
        data = f.read_bytes()
        base = int(f.name)
        pos = 0
        while True:
            chk = check_record(data, pos, len(data), True, True)
            if chk.kind != RECORD_VALID:
                ends.append((f.name, base + pos, chk.reason))
                break
            m = chk.message
            props = decode_properties(m.properties_string)
            common = dict(store=name, topic=m.topic, queueId=m.queue_id, commitLogOffset=m.commit_log_offset,
                          msgId=create_offset_msg_id(m.store_host, m.commit_log_offset),
                          bornTimestamp=m.born_timestamp, storeTimestamp=m.store_timestamp,
                          bornHost=_host(m.born_host), storeHost=_host(m.store_host),
                          reconsumeTimes=m.reconsume_times, storeSize=m.store_size)
            if m.sys_flag & 0x80 and "INNER_NUM" in props:
                base_q = int(props.get("INNER_BASE", m.queue_offset))
                for i, item in enumerate(decode_batch(m.body)):
                    out.append(dict(common, queueOffset=base_q + i, uniqKey=item.properties.get("UNIQ_KEY"),
                                    tags=item.properties.get("TAGS"), keys=item.properties.get("KEYS"),
                                    sysFlag=m.sys_flag & ~0xC0, flag=item.flag, properties=item.properties,
                                    body=item.body, body_text=_text(item.body)))
            else:
                out.append(dict(common, queueOffset=m.queue_offset, uniqKey=props.get("UNIQ_KEY"),
                                tags=props.get("TAGS"), keys=props.get("KEYS"), sysFlag=m.sys_flag, flag=m.flag,
                                properties=props, body=m.body, body_text=_text(m.body)))
            pos += chk.size
    return out, ends


def select(messages: list[dict], topic: str | None = None, begin: int | None = None, end: int | None = None,
           where: str | None = None, body_contains: str | None = None) -> list[dict]:
    """The query applied to a plain scan, sorted as the search sorts (store time, store, offsets)."""
    sql = compile_sql92(where) if where else None
    needle = body_contains.encode() if body_contains else None
    out = [m for m in messages
           if (topic is None or m["topic"] == topic)
           and (begin is None or m["storeTimestamp"] >= begin) and (end is None or m["storeTimestamp"] <= end)
           and (sql is None or sql.is_matched_by_commit_log(m["properties"]))
           and (needle is None or needle in m["body"])]
    return sorted(out, key=lambda m: (m["storeTimestamp"], m["store"], m["commitLogOffset"], m["queueOffset"]))
