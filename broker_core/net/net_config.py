"""Network settings of one mqbroker process, from the broker config file (RocketMQ key names where
RocketMQ has one) and overridable on the command line.

Why a dataclass of its own: the Broker knows nothing about sockets; these keys only matter to the
name server, the remoting server and the registration loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.config_loader import JavaLong, apply_properties
from broker_core.remoting import DEFAULT_FRAME_MAX_LENGTH

from .remoting_server import ServerConfig


@dataclass
class NetConfig:
    namesrv_port: int = 9876
    register_name_server_period: int = 30_000  # ms between REGISTER_BROKER (RocketMQ broker key)
    scan_not_active_broker_interval: JavaLong = 5_000  # ms between name-server expiry scans (NamesrvConfig key)
    broker_channel_expired_time: JavaLong = 120_000  # ms without registration before the name server drops a broker
    server_channel_max_idle_time_seconds: float = 120.0  # NettyServerConfig key
    frame_max_length: int = DEFAULT_FRAME_MAX_LENGTH  # com.rocketmq.remoting.frameMaxLength
    max_connections: int = 10_000

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> NetConfig:
        return apply_properties(cls, props)

    def server_config(self) -> ServerConfig:
        return ServerConfig(frame_max_length=self.frame_max_length, idle_timeout=self.server_channel_max_idle_time_seconds,
                            max_connections=self.max_connections)
