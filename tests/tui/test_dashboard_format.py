"""How figures read on screen: durations, perms, trends, message bodies."""

from __future__ import annotations

from rich.syntax import Syntax

from tui import format as fmt
from tui.widgets.message_view import hexdump, render_body


def test_duration_perm_and_size():
    assert [fmt.duration(x) for x in (None, 999, 60_000, 61_000, 3_600_000, 90_000_000, 200 * 3_600_000)] == \
        ["-", "0s", "1m", "1m 01s", "1h", "25h", "8d 08h"]
    assert [fmt.perm(p) for p in (6, 7, 4, 2, 0)] == ["RW-", "RWX", "R--", "-W-", "---"]
    assert fmt.size(512) == "512 B" and fmt.size(3 * 1024 ** 2) == "3.0 MiB"


def test_trend_scales_to_its_own_max_and_keeps_the_last_values():
    assert fmt.trend([]) == ""
    assert fmt.trend([0, 0, 0]) == "▁▁▁"
    t = fmt.trend([0, 10, 20, 40, 20, 0])
    assert len(t) == 6 and t[3] == "█" and t[0] == t[-1] == "▁"
    assert len(fmt.trend(list(range(100)), width=12)) == 12


def test_body_views_json_text_and_hex():
    used, r = render_body(b'{"order": 42}', "auto")
    assert used == "json" and isinstance(r, Syntax) and '"order": 42' in r.code
    assert render_body(b"plain words", "auto")[0] == "text"
    assert render_body(b"\xff\xfe\x00", "auto")[0] == "hex"  # not UTF-8
    assert render_body(b"plain", "json")[1].plain == "the body is not JSON"
    assert hexdump(b"AB\x00") == "00000000  41 42 00" + " " * 39 + "  AB."
