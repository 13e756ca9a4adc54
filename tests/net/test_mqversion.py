"""mqadmin names a client's version as Apache's MQVersion.getVersionDesc does: the name of the
Version enum constant at that ordinal (3.x included: an npm ali-ons client sends 121 = V3_4_9),
HIGHER_VERSION from the last constant on, and an out-of-bounds error for a negative number."""

import pytest

from broker_core.remoting import codes
from broker_core.remoting.mqversion import V3_NAMES, version_desc, version_ordinal


@pytest.mark.parametrize(("ordinal", "name"), [
    (0, "V3_0_0_SNAPSHOT"),
    (1, "V3_0_0_ALPHA1"),
    (15, "V3_0_0_FINAL"),
    (16, "V3_0_1_SNAPSHOT"),
    (46, "V3_1_0_SNAPSHOT"),
    (86, "V3_3_1_SNAPSHOT"),
    (121, "V3_4_9"),  # every npm ali-ons client
    (211, "V3_9_9"),
    (212, "V4_0_0_SNAPSHOT"),
    (213, "V4_0_0"),
    (399, "V4_9_3"),
    (400, "V4_9_4_SNAPSHOT"),
    (479, "V5_3_3"),
    (611, "V5_9_9"),  # the last real version in the enum
    (612, "HIGHER_VERSION"),  # the enum's last constant
    (613, "HIGHER_VERSION"),  # past the end: Version.values()[length - 1]
    (10_000, "HIGHER_VERSION"),
])
def test_version_desc_names_the_enum_constant(ordinal: int, name: str) -> None:
    assert version_desc(ordinal) == name


def test_v3_table_is_the_whole_3x_enum() -> None:
    assert len(V3_NAMES) == 212 and len(set(V3_NAMES)) == 212
    assert all(n.startswith("V3_") for n in V3_NAMES)
    assert not any(version_desc(i).startswith("V3(") for i in range(700))


def test_negative_is_out_of_bounds_as_in_apache() -> None:
    # Java: Version.values()[-1] throws ArrayIndexOutOfBoundsException; never Python's wrap-around.
    with pytest.raises(IndexError, match="Index -1 out of bounds for length 613"):
        version_desc(-1)


def test_broker_version_constants_agree_with_the_names() -> None:
    for const in ("V3_0_7_SNAPSHOT", "V3_4_9", "V4_9_3", "V4_9_4", "V5_3_1", "V5_3_3"):
        assert version_desc(getattr(codes, const)) == const
    assert version_desc(codes.CURRENT_VERSION) == "V5_3_3"


def test_version_ordinal_is_value_of_and_refuses_what_java_refuses() -> None:
    """Version.valueOf(name).ordinal(): the inverse of version_desc, None where valueOf throws."""
    assert all(version_ordinal(version_desc(i)) == i for i in range(613))
    for name in ("5.1.2", "v5_0_0", "V5_10_0", "V6_0_0", "V3_0_0", "V4_0_0_SNAPSHOT ", ""):
        assert version_ordinal(name) is None, name
