"""Range checks of producer and consumer settings, and the error a setting out of range raises.

Why here and at construction: a setting RocketMQ refuses (Java's checkConfig, ProduceAccumulator's
setters, the pull argument checks: MQClientException / IllegalArgumentException) was accepted before
and failed later, far from its cause: a push consumer whose pull loops died or warned every 3 s, a
producer whose every send failed with a misleading timeout, AutoBatch silently off. A setting out of
range now fails where it is given, in one line naming the Python parameter (and the Java setting it
stands for, which is what RocketMQ's documentation and error messages name).
"""

from __future__ import annotations

JAVA_INT_MAX = 2**31 - 1


class ClientConfigError(ValueError):
    """A producer or consumer setting (or call argument) outside what RocketMQ accepts."""


def check_int(name: str, value: object, low: int, high: int | None, java_name: str | None = None) -> None:
    """``value`` must be an int (not a bool) in [low, high] (no upper bound when ``high`` is None)."""
    java = f" (Java's {java_name})" if java_name else ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClientConfigError(f"{name} must be an integer{java}, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"[{low}, {high}]" if high is not None else f"[{low}, +inf)"
        raise ClientConfigError(f"{name} Out of range {bounds}{java}, got {value}")


def check_positive_seconds(name: str, value: object, java_name: str | None = None) -> None:
    """A duration in seconds: a number above 0 (a NaN is not)."""
    java = f" (Java's {java_name})" if java_name else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ClientConfigError(f"{name} must be a number of seconds above 0{java}, got {value!r}")
