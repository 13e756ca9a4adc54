"""MQVersion.getVersionDesc: a client's version number (an enum ordinal on the wire) as its name.

Why: consumerConnection/producerConnection print ``V5_3_3`` (or ``V3_4_9`` for an npm ali-ons
client, which sends 121), not the number. The 3.x part of the enum is irregular (alpha/beta
entries, 3.1/3.2 start at _0, 3.3..3.9 at _1), so ordinals 0..211 are a table; from
V4_0_0_SNAPSHOT (ordinal 212) the enum is regular — a SNAPSHOT then a release for every x.y.z up
to V5_9_9 (611) — and is computed; HIGHER_VERSION (612) is the last constant.
"""

from __future__ import annotations

import re

# MQVersion.Version constants V3_0_0_SNAPSHOT (ordinal 0) .. V3_9_9 (211), in enum order.
# Generated (not typed) from apache/rocketmq common/src/main/java/org/apache/rocketmq/common/MQVersion.java
# at commit 8fc57f1468d182eea11c01e089c0250d647dc5f3 (2025-09-19).
V3_NAMES: tuple[str, ...] = (
    "V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_BETA1", "V3_0_0_BETA2", "V3_0_0_BETA3", "V3_0_0_BETA4",
    "V3_0_0_BETA5", "V3_0_0_BETA6_SNAPSHOT", "V3_0_0_BETA6", "V3_0_0_BETA7_SNAPSHOT", "V3_0_0_BETA7",
    "V3_0_0_BETA8_SNAPSHOT", "V3_0_0_BETA8", "V3_0_0_BETA9_SNAPSHOT", "V3_0_0_BETA9", "V3_0_0_FINAL",
    "V3_0_1_SNAPSHOT", "V3_0_1", "V3_0_2_SNAPSHOT", "V3_0_2", "V3_0_3_SNAPSHOT", "V3_0_3",
    "V3_0_4_SNAPSHOT", "V3_0_4", "V3_0_5_SNAPSHOT", "V3_0_5", "V3_0_6_SNAPSHOT", "V3_0_6",
    "V3_0_7_SNAPSHOT", "V3_0_7", "V3_0_8_SNAPSHOT", "V3_0_8", "V3_0_9_SNAPSHOT", "V3_0_9",
    "V3_0_10_SNAPSHOT", "V3_0_10", "V3_0_11_SNAPSHOT", "V3_0_11", "V3_0_12_SNAPSHOT", "V3_0_12",
    "V3_0_13_SNAPSHOT", "V3_0_13", "V3_0_14_SNAPSHOT", "V3_0_14", "V3_0_15_SNAPSHOT", "V3_0_15",
    "V3_1_0_SNAPSHOT", "V3_1_0", "V3_1_1_SNAPSHOT", "V3_1_1", "V3_1_2_SNAPSHOT", "V3_1_2",
    "V3_1_3_SNAPSHOT", "V3_1_3", "V3_1_4_SNAPSHOT", "V3_1_4", "V3_1_5_SNAPSHOT", "V3_1_5",
    "V3_1_6_SNAPSHOT", "V3_1_6", "V3_1_7_SNAPSHOT", "V3_1_7", "V3_1_8_SNAPSHOT", "V3_1_8",
    "V3_1_9_SNAPSHOT", "V3_1_9", "V3_2_0_SNAPSHOT", "V3_2_0", "V3_2_1_SNAPSHOT", "V3_2_1",
    "V3_2_2_SNAPSHOT", "V3_2_2", "V3_2_3_SNAPSHOT", "V3_2_3", "V3_2_4_SNAPSHOT", "V3_2_4",
    "V3_2_5_SNAPSHOT", "V3_2_5", "V3_2_6_SNAPSHOT", "V3_2_6", "V3_2_7_SNAPSHOT", "V3_2_7",
    "V3_2_8_SNAPSHOT", "V3_2_8", "V3_2_9_SNAPSHOT", "V3_2_9", "V3_3_1_SNAPSHOT", "V3_3_1",
    "V3_3_2_SNAPSHOT", "V3_3_2", "V3_3_3_SNAPSHOT", "V3_3_3", "V3_3_4_SNAPSHOT", "V3_3_4",
    "V3_3_5_SNAPSHOT", "V3_3_5", "V3_3_6_SNAPSHOT", "V3_3_6", "V3_3_7_SNAPSHOT", "V3_3_7",
    "V3_3_8_SNAPSHOT", "V3_3_8", "V3_3_9_SNAPSHOT", "V3_3_9", "V3_4_1_SNAPSHOT", "V3_4_1",
    "V3_4_2_SNAPSHOT", "V3_4_2", "V3_4_3_SNAPSHOT", "V3_4_3", "V3_4_4_SNAPSHOT", "V3_4_4",
    "V3_4_5_SNAPSHOT", "V3_4_5", "V3_4_6_SNAPSHOT", "V3_4_6", "V3_4_7_SNAPSHOT", "V3_4_7",
    "V3_4_8_SNAPSHOT", "V3_4_8", "V3_4_9_SNAPSHOT", "V3_4_9", "V3_5_1_SNAPSHOT", "V3_5_1",
    "V3_5_2_SNAPSHOT", "V3_5_2", "V3_5_3_SNAPSHOT", "V3_5_3", "V3_5_4_SNAPSHOT", "V3_5_4",
    "V3_5_5_SNAPSHOT", "V3_5_5", "V3_5_6_SNAPSHOT", "V3_5_6", "V3_5_7_SNAPSHOT", "V3_5_7",
    "V3_5_8_SNAPSHOT", "V3_5_8", "V3_5_9_SNAPSHOT", "V3_5_9", "V3_6_1_SNAPSHOT", "V3_6_1",
    "V3_6_2_SNAPSHOT", "V3_6_2", "V3_6_3_SNAPSHOT", "V3_6_3", "V3_6_4_SNAPSHOT", "V3_6_4",
    "V3_6_5_SNAPSHOT", "V3_6_5", "V3_6_6_SNAPSHOT", "V3_6_6", "V3_6_7_SNAPSHOT", "V3_6_7",
    "V3_6_8_SNAPSHOT", "V3_6_8", "V3_6_9_SNAPSHOT", "V3_6_9", "V3_7_1_SNAPSHOT", "V3_7_1",
    "V3_7_2_SNAPSHOT", "V3_7_2", "V3_7_3_SNAPSHOT", "V3_7_3", "V3_7_4_SNAPSHOT", "V3_7_4",
    "V3_7_5_SNAPSHOT", "V3_7_5", "V3_7_6_SNAPSHOT", "V3_7_6", "V3_7_7_SNAPSHOT", "V3_7_7",
    "V3_7_8_SNAPSHOT", "V3_7_8", "V3_7_9_SNAPSHOT", "V3_7_9", "V3_8_1_SNAPSHOT", "V3_8_1",
    "V3_8_2_SNAPSHOT", "V3_8_2", "V3_8_3_SNAPSHOT", "V3_8_3", "V3_8_4_SNAPSHOT", "V3_8_4",
    "V3_8_5_SNAPSHOT", "V3_8_5", "V3_8_6_SNAPSHOT", "V3_8_6", "V3_8_7_SNAPSHOT", "V3_8_7",
    "V3_8_8_SNAPSHOT", "V3_8_8", "V3_8_9_SNAPSHOT", "V3_8_9", "V3_9_1_SNAPSHOT", "V3_9_1",
    "V3_9_2_SNAPSHOT", "V3_9_2", "V3_9_3_SNAPSHOT", "V3_9_3", "V3_9_4_SNAPSHOT", "V3_9_4",
    "V3_9_5_SNAPSHOT", "V3_9_5", "V3_9_6_SNAPSHOT", "V3_9_6", "V3_9_7_SNAPSHOT", "V3_9_7",
    "V3_9_8_SNAPSHOT", "V3_9_8", "V3_9_9_SNAPSHOT", "V3_9_9",
)

_V4_0_0_SNAPSHOT = len(V3_NAMES)  # 212
_V5_9_9 = 611
HIGHER_VERSION = _V5_9_9 + 1  # the enum's last constant
_LENGTH = HIGHER_VERSION + 1  # Version.values().length


def version_desc(version: int) -> str:
    """``Version.values()[version].name()``, with anything past the end named HIGHER_VERSION.

    A negative number is an ArrayIndexOutOfBoundsException in Apache; here an IndexError with the
    same message (never Python's wrap-around indexing).
    """
    if version >= HIGHER_VERSION:
        return "HIGHER_VERSION"
    if version < 0:
        raise IndexError(f"Index {version} out of bounds for length {_LENGTH}")
    if version < _V4_0_0_SNAPSHOT:
        return V3_NAMES[version]
    step = version - _V4_0_0_SNAPSHOT
    code = 400 + step // 2
    name = f"V{code // 100}_{code // 10 % 10}_{code % 10}"
    return name + ("_SNAPSHOT" if step % 2 == 0 else "")


def version_ordinal(name: str) -> int | None:
    """``Version.valueOf(name).ordinal()``, or None where Java throws (no constant of that exact name).

    Why: the gRPC proxy (ClientActivity#parseClientVersion) reads a client's version header this way and
    falls back to the current version for anything else, such as the "5.1.2" the official clients send.
    """
    if name == "HIGHER_VERSION":
        return HIGHER_VERSION
    if name in _V3_ORDINALS:
        return _V3_ORDINALS[name]
    m = _REGULAR.fullmatch(name)
    if m is None:
        return None
    code = int(m[1]) * 100 + int(m[2]) * 10 + int(m[3])
    if not 400 <= code <= 599:
        return None
    return _V4_0_0_SNAPSHOT + (code - 400) * 2 + (0 if m[4] else 1)


_V3_ORDINALS: dict[str, int] = {n: i for i, n in enumerate(V3_NAMES)}
_REGULAR = re.compile(r"V([45])_(\d)_(\d)(_SNAPSHOT)?")
