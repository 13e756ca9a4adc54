"""Network settings of one mqbroker process, from the broker config file (RocketMQ key names where
RocketMQ has one) and overridable on the command line.

Why a dataclass of its own: the Broker knows nothing about sockets; these keys only matter to the
name server, the remoting server and the registration loop.

Why lower bounds Java's beans do not have: each of these values was taken as given and broke the
process while it still said "boot success" — frameMaxLength=0 refused every frame, a 0 ms scan or
expiry interval spun or dropped every broker at once, a negative idle timeout closed every connection.
A value outside its range is refused in one line naming the key (and the file) or the flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from broker_core.broker.broker_config import check_port
from broker_core.common.java_numbers import JAVA_INT_MAX
from broker_core.config_loader import (
    ConfigError,
    JavaLong,
    apply_properties,
    camel_to_snake,
    check_java_range,
    java_integer_fields,
)
from broker_core.remoting import DEFAULT_FRAME_MAX_LENGTH

from .remoting_server import ServerConfig

FRAME_MAX_LENGTH_MIN = 64 * 1024
"""The smallest frameMaxLength accepted. Why 64 KiB: a SEND_MESSAGE header alone may carry up to 32767
bytes of message properties (the store's Short.MAX_VALUE limit) besides its other fields, and a
broker's first REGISTER_BROKER (its system topics) takes a few KiB; below this ordinary requests fail."""

MINIMUM = {
    "frame_max_length": FRAME_MAX_LENGTH_MIN,
    "scan_not_active_broker_interval": 1,  # ms; 0 re-scanned in a busy loop
    "broker_channel_expired_time": 1,  # ms; 0 or less expired every broker at the next scan
    "max_connections": 1,
}
"""Each key's lowest accepted value (field name -> minimum); the top of each range is its Java type's."""

IDLE_KEY = "serverChannelMaxIdleTimeSeconds"


@dataclass
class NetConfig:
    namesrv_port: int = 9876
    register_name_server_period: int = 30_000  # ms between REGISTER_BROKER (RocketMQ broker key; clamped, see broker_server)
    scan_not_active_broker_interval: JavaLong = 5_000  # ms between name-server expiry scans (NamesrvConfig key)
    broker_channel_expired_time: JavaLong = 120_000  # ms without registration before the name server drops a broker
    server_channel_max_idle_time_seconds: float = 120.0  # NettyServerConfig key; 0 = never close idle connections
    frame_max_length: int = DEFAULT_FRAME_MAX_LENGTH  # com.rocketmq.remoting.frameMaxLength
    max_connections: int = 10_000

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> NetConfig:
        # the Java type's range first (a value past it is named with the type's bounds, as for every
        # other key), then the key's own minimum
        net = apply_properties(cls, props)
        fields = java_integer_fields(NetConfig)
        for key in props:
            field = camel_to_snake(key)
            if field in MINIMUM:
                check_java_range(key, getattr(net, field), fields[field], lo=MINIMUM[field])
        if IDLE_KEY in props:
            check_idle_seconds(IDLE_KEY, net.server_channel_max_idle_time_seconds)
        if "namesrvPort" in props:
            check_port("namesrvPort", net.namesrv_port)
        return net

    def override(self, flag: str, field: str, value: int) -> None:
        """Set ``field`` from the command-line ``flag``, held to the range the config key has."""
        java = java_integer_fields(NetConfig)[field]
        check_java_range(flag, value, java, lo=MINIMUM.get(field))
        setattr(self, field, value)

    def server_config(self) -> ServerConfig:
        return ServerConfig(frame_max_length=self.frame_max_length, idle_timeout=self.server_channel_max_idle_time_seconds,
                            max_connections=self.max_connections)


def check_idle_seconds(key: str, seconds: float) -> None:
    """The idle timeout in [0, Integer.MAX_VALUE] seconds, as NettyServerConfig's int (0: idle connections
    are never closed, as Netty's IdleStateHandler with 0); else ConfigError naming ``key``."""
    if not (math.isfinite(seconds) and 0 <= seconds <= JAVA_INT_MAX):
        raise ConfigError(f"{key}={seconds:g}: must be a number of seconds in [0, {JAVA_INT_MAX}] "
                          "(0: idle connections are never closed)")
