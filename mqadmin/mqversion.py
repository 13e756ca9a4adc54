"""MQVersion.getVersionDesc: a client's version number (an enum ordinal on the wire) as its name.

Why: consumerConnection/producerConnection print ``V5_3_3``, not ``479``. From V4_0_0_SNAPSHOT
(ordinal 212) the enum is regular — a SNAPSHOT then a release for every x.y.z up to V5_9_9 (611),
then HIGHER_VERSION; older (3.x) clients are named by their ordinal.
"""

from __future__ import annotations

_V4_0_0_SNAPSHOT = 212
_V5_9_9 = 611


def version_desc(version: int) -> str:
    if version > _V5_9_9:
        return "HIGHER_VERSION"
    if version < _V4_0_0_SNAPSHOT:
        return f"V3({version})"
    step = version - _V4_0_0_SNAPSHOT
    code = 400 + step // 2
    name = f"V{code // 100}_{code // 10 % 10}_{code % 10}"
    return name + ("_SNAPSHOT" if step % 2 == 0 else "")
