"""The bloom filter and ConsumeQueueExt unit formats against values computed by Java's rules.

The vectors below were printed by tests/filter/java/BloomVectors.java (our own program: Guava 33's
``Hashing.murmur3_128().hashString(s, UTF_8).asLong()`` plus RocketMQ's calcBitPositions, BitsArray and
CqExtUnit.write rules); ``test_java_cross_check`` runs it again where a JDK and a Guava jar exist.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from broker_core.store.codec.bloom_filter import BloomFilter, BloomFilterData, murmur3_x64_128
from broker_core.store.codec.cq_ext import (
    MAX_ADDR,
    MAX_REAL_OFFSET,
    MIN_EXT_UNIT_SIZE,
    CqExtUnit,
    decorate,
    is_ext_addr,
    pack_cq_ext_unit,
    read_cq_ext_unit,
    undecorate,
)

JAVA_SHAPES = {(20, 32): (3, 112), (10, 128): (4, 616), (20, 64): (3, 216), (1, 1): (7, 16), (99, 1000): (1, 24),
               (5, 7): (5, 48)}
# string -> (Guava murmur3_128 asLong as a Java long, positions with k=3 m=112)
JAVA_HASHES = {
    "": (0, (0, 0, 0)),
    "a": (-8839064797231613815, (94, 99, 7)),
    "G#T": (7050150325894562489, (24, 26, 83)),
    "CID_SQL#TopicTest": (-9133735402591880069, (25, 65, 99)),
    "groupA#TopicTest": (-7809687849175387849, (49, 5, 28)),
    "0123456789abcdef": (5467490433528156583, (11, 47, 60)),  # exactly one 16-byte block, no tail
    "0123456789abcdefXYZ": (-7362412312553418723, (47, 94, 19)),  # a block and a 3-byte tail
    "\u7ec4#\u4e3b\u9898": (-3220610555414713741, (38, 9, 19)),  # UTF-8 multi-byte
    "%RETRY%g1#t1": (-2019072775543138488, (69, 3, 49)),  # tail of 12 bytes: both k1 and k2
}
JAVA_BITMAP_GT_AND_GROUPA = bytes.fromhex("2000001500000200000008000000")
JAVA_EXT_UNIT = bytes.fromhex("0022ffffffffaaaaaaaa0000018bcfe5687b000e2000001500000200000008000000")


def _signed64(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


@pytest.mark.parametrize(("fn", "km"), JAVA_SHAPES.items())
def test_k_and_m_as_java_computes_them(fn: tuple[int, int], km: tuple[int, int]) -> None:
    bf = BloomFilter(*fn)
    assert (bf.k, bf.m) == km
    assert bf.byte_length * 8 == bf.m


@pytest.mark.parametrize("text", JAVA_HASHES)
def test_murmur3_and_bit_positions_match_guava(text: str) -> None:
    h64, positions = JAVA_HASHES[text]
    assert _signed64(murmur3_x64_128(text.encode())[0]) == h64
    assert BloomFilter(20, 32).calc_bit_positions(text) == positions


def test_positions_with_four_hashes_and_a_wide_bitmap() -> None:
    bf = BloomFilter(10, 227)
    assert (bf.k, bf.m) == (4, 1088)
    assert bf.calc_bit_positions("groupA#TopicTest") == (449, 389, 972, 620)


def test_bitmap_bytes_and_hits_follow_bits_array() -> None:
    bf = BloomFilter(20, 32)
    bitmap = bf.new_bitmap()
    a, b = bf.generate("G#T"), bf.generate("groupA#TopicTest")
    bf.hash_to(a, bitmap)
    bf.hash_to(b, bitmap)
    assert bytes(bitmap) == JAVA_BITMAP_GT_AND_GROUPA
    assert bf.is_hit(a, bitmap) and bf.is_hit(b, bitmap)
    assert bf.byte_masks(a) == ((3, 1), (3, 4), (10, 8))  # bits 24, 26, 83
    assert not bf.is_hit(bf.generate("CID_SQL#TopicTest"), bitmap)  # 65 and 99 are not set
    assert bf.is_valid(a) and not bf.is_valid(BloomFilterData((1, 2, 3), 216))
    with pytest.raises(ValueError, match="does not belong"):
        bf.is_hit(a, bytes(27))
    with pytest.raises(ValueError, match="maxErrorRateOfBloomFilter"):
        BloomFilter(100, 32)


def test_ext_unit_layout_matches_cq_ext_unit_write() -> None:
    unit = CqExtUnit(tags_code=-1431655766, msg_store_time=1700000000123, filter_bit_map=JAVA_BITMAP_GT_AND_GROUPA)
    assert pack_cq_ext_unit(unit) == JAVA_EXT_UNIT
    assert unit.size == len(JAVA_EXT_UNIT) == MIN_EXT_UNIT_SIZE + 14
    assert read_cq_ext_unit(JAVA_EXT_UNIT, 0) == unit
    bare = CqExtUnit(7, 8)
    assert pack_cq_ext_unit(bare) == bytes.fromhex("0014" "0000000000000007" "0000000000000008" "0000")
    assert read_cq_ext_unit(pack_cq_ext_unit(bare), 0) == bare


def test_torn_or_inconsistent_units_do_not_read() -> None:
    assert read_cq_ext_unit(JAVA_EXT_UNIT[:-1], 0) is None  # bitmap cut short
    assert read_cq_ext_unit(bytes(40), 0) is None  # zeros: no unit
    assert read_cq_ext_unit(b"\xff\xff" + bytes(30), 0) is None  # the end marker
    assert read_cq_ext_unit(b"\x00\x21" + JAVA_EXT_UNIT[2:], 0) is None  # size disagrees with bitMapSize


def test_ext_addresses_as_java_decorates_them() -> None:
    assert MAX_ADDR == -2147483649 and MAX_REAL_OFFSET == 9223372034707292159
    assert decorate(0) == -9223372036854775808 and decorate(4096) == -9223372036854771712
    assert undecorate(decorate(4096)) == 4096 and decorate(decorate(5)) == decorate(5)
    assert is_ext_addr(decorate(MAX_REAL_OFFSET)) and not is_ext_addr(-(1 << 31))  # an int tags hash
    assert not is_ext_addr(1_700_000_000_000)  # a delay-level due time


def _guava_classpath() -> str | None:
    jars = sorted(glob.glob(os.path.expanduser("~/.m2/repository/com/google/guava/guava/*/guava-*.jar")))
    return jars[-1] if jars else None


@pytest.mark.skipif(shutil.which("javac") is None or _guava_classpath() is None, reason="needs a JDK and Guava")
def test_java_cross_check(tmp_path: Path) -> None:
    src = Path(__file__).parent / "java" / "BloomVectors.java"
    shutil.copy(src, tmp_path)
    cp = _guava_classpath()
    subprocess.run(["javac", "-cp", cp, "BloomVectors.java"], cwd=tmp_path, check=True, capture_output=True)
    out = subprocess.run(["java", "-cp", f"{cp}{os.pathsep}.", "BloomVectors"], cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    for (f, n), (k, m) in JAVA_SHAPES.items():
        assert f"km {f} {n} -> {k} {m}" in out
    bf = BloomFilter(20, 32)
    for text, (h64, _positions) in JAVA_HASHES.items():
        assert f"h64 [{text}] {h64}" in out
        assert f"pos [{text}] [{', '.join(map(str, bf.calc_bit_positions(text)))}]" in out
    assert f"bitmap {JAVA_BITMAP_GT_AND_GROUPA.hex()}" in out
    assert f"extunit {JAVA_EXT_UNIT.hex()}" in out
