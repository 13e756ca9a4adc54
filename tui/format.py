"""How numbers and times read on screen (one place, so every screen agrees)."""

from __future__ import annotations

from datetime import datetime


def when(ms: int) -> str:
    """A store timestamp in local time, to the second; '-' for none."""
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def duration(ms: float | None) -> str:
    """'3h 05m', '42s', '-' (None: never)."""
    if ms is None:
        return "-"
    s = int(ms // 1000)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m:02d}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d {h:02d}h" if h else f"{d}d"


def size(n: int) -> str:
    """Bytes as B / KiB / MiB / GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def rate(tps: float) -> str:
    return f"{tps:.1f}"


def count(n: int) -> str:
    return f"{n:,}"


def perm(value: int) -> str:
    """A topic's perm as RocketMQ's PermName.perm2String: R (read), W (write), X (inherit), '-' if not."""
    return "".join(c if value & bit else "-" for c, bit in (("R", 4), ("W", 2), ("X", 1)))


TREND_BLOCKS = " ▁▂▃▄▅▆▇█"


def trend(values: list[float], width: int = 12) -> str:
    """The last ``width`` values as block characters scaled to their own max (a row's lag trend;
    the highlighted group gets Textual's Sparkline widget)."""
    tail = values[-width:]
    top = max(tail, default=0)
    if top <= 0:
        return "▁" * len(tail)
    return "".join(TREND_BLOCKS[max(1, round(v / top * (len(TREND_BLOCKS) - 1)))] if v > 0 else "▁" for v in tail)
