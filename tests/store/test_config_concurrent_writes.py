"""Config files written by several threads at once: each write lands whole, none fails.

Why: a broker writes one config file from more than one thread (consumerOffset.json from the offset
flush thread, and from an admin's resetOffsetByTime or deleteSubscriptionGroup on a request thread).
Two writers sharing ``<name>.tmp`` made one rename fail (FileNotFoundError: the other had renamed
it) or, one truncating the temp file under the other, left a mix of two contents as the config file.
"""

from __future__ import annotations

import threading
from pathlib import Path

from broker_core.store.config_file import atomic_write_bytes

WRITERS = 6
WRITES = 60


def test_concurrent_atomic_writes_each_land_whole(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    # payloads of different lengths: a longer one cut by a shorter one's truncate would show
    payloads = {w: (f'{{"writer":{w},"pad":"' + "x" * (w * 997) + '"}').encode() for w in range(WRITERS)}
    atomic_write_bytes(path, payloads[0])
    errors: list[BaseException] = []
    seen: list[bytes] = []
    stop = threading.Event()

    def write(w: int) -> None:
        try:
            for _ in range(WRITES):
                atomic_write_bytes(path, payloads[w])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def read() -> None:
        while not stop.is_set():
            seen.append(path.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()

    assert not errors, errors[:3]
    known = set(payloads.values())
    assert all(content in known for content in seen), "a reader saw a config file that no writer wrote"
    assert path.read_bytes() in known
    assert path.with_name(path.name + ".bak").read_bytes() in known
    assert sorted(p.name for p in path.parent.iterdir()) == ["consumerOffset.json", "consumerOffset.json.bak"]
