"""Issue 16, bug 6: rebuildStore checks --master first, fails in seconds with one line."""

from __future__ import annotations

import socket
import time

import pytest


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("master,expected,code", [
    ("nonsense://x", "unsupported Spark master 'nonsense://x'", 2),  # a URL that cannot be right: usage
    ("spark://", "bad Spark master", 2),
    ("spark://host-without-port", "bad Spark master", 2),
    ("closed", "cannot reach Spark master spark://127.0.0.1:", 1),  # a right URL where nothing answers
])
def test_a_bad_or_unreachable_master_is_one_line_at_once(golden_cli, master, expected, code):
    cli = golden_cli("store-basic")
    if master == "closed":
        master = f"spark://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    r = cli("rebuildStore", "--master", master, "--verify")
    assert time.monotonic() - t0 < 10
    assert r.exit_code == code, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], r.stderr
    assert "Exception" not in r.stderr and "at org." not in r.stderr


def test_local_masters_pass_the_check():
    from spark.master_url import check_master

    for m in ("local", "local[*]", "local[2]", "local[2,3]"):
        check_master(m)
