"""BrokerConfig: the broker's settings with RocketMQ's key names and defaults (spec §12).

Why: one broker.conf (``key=value`` or YAML) configures everything — broker keys here, store keys in
``StoreConfig``, ACL keys in ``AuthConfig`` — exactly as an operator writes it for a Java broker.
Keys no dataclass knows are kept in ``properties`` so later features can read them without a new
loader: the pop keys (``PopConfig``: popCk*, reviveInterval, enableRetryTopicV2, ...) and the rest of
the transaction keys (``TransactionConfig``) are read from there by ``pop_config()`` and
``transaction_config()`` (only the one transaction key that is no Apache BrokerConfig key,
``transactionCheckMaxTimeInMs``), and checked when the file is loaded.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.auth.config import AuthConfig
from broker_core.broker.pop.pop_config import PopConfig
from broker_core.broker.transaction.transaction_config import TransactionConfig
from broker_core.config_loader import (
    ConfigError,
    JavaLong,
    apply_properties,
    camel_to_snake,
    read_properties_file,
    snake_to_camel,
    to_properties,
    values_of,
)
from broker_core.store.store_config import StoreConfig

MASTER_ID = 0
BROKER_CONFIG_PATH_KEY = "brokerConfigPath"
MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
SLAVE_ROLE = "SLAVE"
MAX_PORT = 65535

log = logging.getLogger("rmqops.broker.config")


@dataclass
class BrokerConfig:
    """BrokerConfig's keys: an ``int`` field is a Java ``int``, a ``JavaLong`` one a Java ``long`` (their
    ranges bound what a config file or updateBrokerConfig may set; see config_loader.java_integer)."""

    broker_name: str = "broker-a"
    broker_cluster_name: str = "DefaultCluster"
    broker_id: JavaLong = MASTER_ID
    broker_ip1: str = field(default="127.0.0.1", metadata={"key": "brokerIP1"})
    listen_port: int = 10911
    namesrv_addr: str = ""
    broker_permission: int = 6
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    auto_create_subscription_group: bool = True
    validate_system_topic_when_update_topic: bool = True
    enable_mixed_message_type: bool = False
    clear_retry_topic_when_delete_topic: bool = True
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    flush_consumer_offset_interval: int = 5000
    use_server_side_reset_offset: bool = True
    long_polling_enable: bool = True
    short_polling_time_mills: JavaLong = 1000
    # JVM system property rocketmq.broker.rebalance.lockMaxLiveTime upstream; a key here.
    rebalance_lock_max_live_time: JavaLong = 60_000
    reject_transaction_message: bool = False
    transaction_time_out: JavaLong = 6000
    transaction_check_max: int = 15
    transaction_check_interval: JavaLong = 30_000
    # The op ("done") markers of ended transactions are batched per half queue and written once this many
    # characters wait or this many ms have passed (Apache's TransactionalOpBatchService and
    # TransactionalMessageServiceImpl read both on every round: an update takes effect live).
    transaction_op_msg_max_size: int = 4096
    transaction_op_batch_interval: int = 3000
    # ms between saves of config/transactionMetrics (read at each round: live)
    transaction_metric_flush_interval: JavaLong = 10_000
    # the per-topic count of pending halves (config/transactionMetrics, the backlog's halfPending); read
    # once at start, as Apache's BrokerMetricsManager reads it: an update is for the next start
    enable_transaction_metrics: bool = True
    revive_queue_num: int = 8
    # SQL92 filter bitmap at dispatch (needs the store's enableConsumeQueueExt too): the bloom filter has
    # k = ceil(log_0.5(maxErrorRateOfBloomFilter/100)) hashes and m bits for expectConsumerNumUseFilter.
    enable_calc_filter_bit_map: bool = False
    expect_consumer_num_use_filter: int = 32
    max_error_rate_of_bloom_filter: int = 20
    filter_data_clean_time_span: JavaLong = 24 * 3600 * 1000
    # SQL92 subscriptions on PULL_MESSAGE and CHECK_CLIENT_CONFIG (refused when false, as in RocketMQ, whose
    # POP and gRPC paths never check it). RocketMQ's default is false; true here, so SQL92 works as documented.
    enable_property_filter: bool = True
    # Which expression filters a SQL92 pull of a %RETRY% topic in RocketMQ (the original topic's, registered
    # by heartbeat, instead of the pull's own). Its clients subscribe retry topics with TAG "*", so it has no
    # effect here; a typed key all the same, so getBrokerConfig lists it and a bad value is refused.
    filter_support_retry: bool = False
    max_reconsume_times: int = 16
    # The gRPC v2 endpoint (the proxy's grpcServerPort; 0 disables it) and its TLS key pair (PEM files).
    grpc_server_port: int = 8081
    grpc_tls_cert_path: str = ""
    grpc_tls_key_path: str = ""
    # The gRPC endpoint's time limits, the proxy's ProxyConfig keys and defaults: a ReceiveMessage long-polls
    # within [min, max] LongPollingTimeoutMillis (max is also what a consumer's Settings carry), and asks an
    # invisible duration within [minInvisibleTimeMillsForRecv, maxInvisibleTimeMills] (max <= 0: none, as
    # upstream). Read at each request: updateBrokerConfig changes them live.
    grpc_client_consumer_min_long_polling_timeout_millis: JavaLong = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: JavaLong = 20_000
    min_invisible_time_mills_for_recv: JavaLong = 10_000
    max_invisible_time_mills: JavaLong = 12 * 3_600_000
    # How far ahead a gRPC message's delivery time may be (ProxyConfig.maxDelayTimeMills, 1 day; 0 or less:
    # only the timer's own timerMaxDelaySec), refused as ILLEGAL_DELIVERY_TIME
    max_delay_time_mills: JavaLong = 24 * 3_600_000
    store: StoreConfig = field(default_factory=StoreConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.broker_ip1, self.listen_port)

    @property
    def broker_config_path(self) -> Path | None:
        """brokerConfigPath: the config file the broker was started with (``mqbroker -c``), where
        updateBrokerConfig persists what it changes so a restart keeps it (Apache's BrokerController
        builds its Configuration on it); None for a broker started without one. getBrokerConfig lists
        it only when there is one, and updateBrokerConfig never changes it (the black list)."""
        text = self.properties.get(BROKER_CONFIG_PATH_KEY, "").strip()
        return Path(text) if text else None

    def started_with(self, config_file: str | Path) -> None:
        """Note ``config_file`` as brokerConfigPath, resolved (a symlinked broker.conf is updated where
        it lives, not replaced by a plain file). It replaces a brokerConfigPath the file names: the
        changes must go where the next start reads them."""
        self.properties[BROKER_CONFIG_PATH_KEY] = str(Path(config_file).resolve())

    @classmethod
    def from_properties(cls, props: dict[str, str], store_root: str | Path | None = None) -> BrokerConfig:
        """Build broker, store and auth settings from one map of RocketMQ keys."""
        # The broker's own keys (the nested settings' fields are not keys: a key named like one is ignored).
        simple = {k: v for k, v in props.items() if camel_to_snake(k) not in _NESTED}
        store = StoreConfig.from_properties(props, store_root)
        try:
            auth = AuthConfig.from_properties(props)
        except ValueError as e:
            raise ConfigError(str(e)) from e
        cfg = dataclasses.replace(apply_properties(cls, simple), store=store, auth=auth, properties=dict(props))
        if cfg.default_topic_queue_nums <= 0:
            raise ConfigError(f"defaultTopicQueueNums must be positive, got {cfg.default_topic_queue_nums}")
        if cfg.flush_consumer_offset_interval <= 0:
            raise ConfigError(f"flushConsumerOffsetInterval must be positive, got {cfg.flush_consumer_offset_interval}")
        if not 1 <= cfg.max_error_rate_of_bloom_filter < 100:
            raise ConfigError(f"maxErrorRateOfBloomFilter must be in [1, 99], got {cfg.max_error_rate_of_bloom_filter}")
        if cfg.expect_consumer_num_use_filter < 1:
            raise ConfigError(f"expectConsumerNumUseFilter must be positive, got {cfg.expect_consumer_num_use_filter}")
        if cfg.transaction_time_out < 0:
            raise ConfigError(f"transactionTimeOut must not be negative, got {cfg.transaction_time_out}")
        if cfg.transaction_check_interval < 0:
            raise ConfigError(f"transactionCheckInterval must not be negative, got {cfg.transaction_check_interval}")
        if cfg.transaction_op_msg_max_size <= 0:  # no batch could ever be written whole
            raise ConfigError(f"transactionOpMsgMaxSize must be positive, got {cfg.transaction_op_msg_max_size}")
        if cfg.transaction_op_batch_interval < 0:
            raise ConfigError(f"transactionOpBatchInterval must not be negative, got {cfg.transaction_op_batch_interval}")
        _check_grpc_limits(cfg)
        # Both name a topic of their own (TopicConfigManager#init) and are how routes and mqadmin -b/-c
        # find the broker: a blank one made a broker nobody could address.
        if not cfg.broker_name.strip():
            raise ConfigError("brokerName must not be blank")
        if not cfg.broker_cluster_name.strip():
            raise ConfigError("brokerClusterName must not be blank")
        for key, port in (("listenPort", cfg.listen_port), ("grpcServerPort", cfg.grpc_server_port)):
            check_port(key, port)
        cfg.broker_ip1 = resolve_broker_ip(cfg.broker_ip1)
        _check_role(cfg)
        cfg.pop_config()
        cfg.transaction_config()
        return cfg

    def pop_config(self) -> PopConfig:
        """The pop service's settings: reviveQueueNum and the flush interval from here, the rest from the file."""
        base = PopConfig(revive_queue_num=self.revive_queue_num,
                         flush_consumer_offset_interval=self.flush_consumer_offset_interval)
        try:
            return PopConfig.from_properties(self.properties, base)
        except ValueError as e:
            raise ConfigError(str(e)) from e

    def transaction_config(self) -> TransactionConfig:
        """The transaction services' settings, from this config's fields; halves older than
        fileReservedTime are discarded, as RocketMQ (transactionCheckMaxTimeInMs in the file overrides)."""
        base = TransactionConfig(transaction_timeout=self.transaction_time_out,
                                 transaction_check_max=self.transaction_check_max,
                                 transaction_check_interval=self.transaction_check_interval,
                                 transaction_op_msg_max_size=self.transaction_op_msg_max_size,
                                 transaction_op_batch_interval=self.transaction_op_batch_interval,
                                 transaction_metric_flush_interval=self.transaction_metric_flush_interval,
                                 reject_transaction_message=self.reject_transaction_message,
                                 enable_transaction_metrics=self.enable_transaction_metrics,
                                 transaction_check_max_time_in_ms=self.store.file_reserved_time * 3_600_000)
        extra = {k: v for k, v in self.properties.items() if k == "transactionCheckMaxTimeInMs"}
        return apply_properties(TransactionConfig, extra, base)

    @classmethod
    def load(cls, config_file: str | Path | None = None, store_root: str | Path | None = None) -> BrokerConfig:
        """Read broker.conf (properties or YAML); ``store_root`` overrides storePathRootDir."""
        props = read_properties_file(config_file) if config_file else {}
        with values_of(config_file):
            return cls.from_properties(props, store_root)

    def to_properties(self) -> dict[str, str]:
        """Every setting as RocketMQ ``key -> value`` strings (what getBrokerConfig prints)."""
        # the file's keys, but another spelling of a typed key (checkCrcOnRecover, which getBrokerConfig
        # used to print, for checkCRCOnRecover): the typed key alone is listed, with the value in force
        typed = _typed_keys(self)
        out = {k: v for k, v in self.properties.items() if typed.get(camel_to_snake(k), k) == k}
        # the pop keys are BrokerConfig keys in RocketMQ: listed, so getBrokerConfig shows them and
        # updateBrokerConfig knows them (a key not listed is ignored by a live update)
        out.update(to_properties(self.pop_config()))
        out.update(to_properties(self.store))
        out.update(self.auth.to_properties())
        broker_part = to_properties(self)
        broker_part.pop("properties", None)
        out.update(broker_part)
        return dict(sorted(out.items()))


_NESTED = frozenset({"store", "auth", "properties"})
"""BrokerConfig's fields that hold other settings, not values of a key."""


def _typed_keys(cfg: BrokerConfig) -> dict[str, str]:
    """The key getBrokerConfig lists for each field name of the broker's and the store's settings."""
    out: dict[str, str] = {}
    for obj in (cfg.store, cfg):
        for f in dataclasses.fields(obj):
            if f.name not in _NESTED:
                out[f.name] = f.metadata.get("key") or snake_to_camel(f.name)
    return out


def check_port(key: str, port: int) -> None:
    """A port setting in [0, 65535] (0: a free port, or off, where the key allows it), else ConfigError
    naming ``key``: the socket layer raised OverflowError for 70000, and grpc wrapped it to 4464."""
    if not 0 <= port <= MAX_PORT:
        given = f"{key} {port}" if key.startswith("-") else f"{key}={port}"  # a command-line flag or a key
        raise ConfigError(f"{given}: must be a port number in [0, {MAX_PORT}]")


def resolve_broker_ip(host: str, key: str = "brokerIP1") -> str:
    """``host`` as the IP address the store stamps into every record (and routes advertise): an IP
    literal as written, a host name resolved once (its IPv4 address first, as Java's InetSocketAddress
    mostly yields), else ConfigError naming ``key``."""
    text = host.strip()
    given = f"{key} {text}" if key.startswith("-") else f"{key}={text}"  # a command-line flag or a key
    if not text:
        raise ConfigError(f"{key} must not be blank")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError(f"{given}: cannot resolve the host name ({reason})") from None
    addrs = [str(info[4][0]) for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]
    v4 = [a for a in addrs if ":" not in a]
    if not addrs:
        raise ConfigError(f"{given}: the host name has no IP address")
    return (v4 or addrs)[0]


def _check_grpc_limits(cfg: BrokerConfig) -> None:
    """The gRPC time limits, each against its partner: a minimum above its maximum made every receive
    long-poll for the maximum (clamped twice) or refused every invisible duration; a negative polling
    time is no wait at all. Apache checks none of them; ConfigError names the key."""
    low, high = (cfg.grpc_client_consumer_min_long_polling_timeout_millis,
                 cfg.grpc_client_consumer_max_long_polling_timeout_millis)
    if low < 0:
        raise ConfigError(f"grpcClientConsumerMinLongPollingTimeoutMillis must not be negative, got {low}")
    if high < low:
        raise ConfigError(f"grpcClientConsumerMaxLongPollingTimeoutMillis must be at least "
                          f"grpcClientConsumerMinLongPollingTimeoutMillis ({low}), got {high}")
    low, high = cfg.min_invisible_time_mills_for_recv, cfg.max_invisible_time_mills
    if low < 0:
        raise ConfigError(f"minInvisibleTimeMillsForRecv must not be negative, got {low}")
    if 0 < high < low:
        raise ConfigError(f"maxInvisibleTimeMills must be at least minInvisibleTimeMillsForRecv ({low}) "
                          f"or 0 or less (no maximum), got {high}")


def _check_role(cfg: BrokerConfig) -> None:
    """brokerRole against brokerId, as Apache's BrokerStartup: a master is always brokerId 0 (a master
    with another id registered as a slave: no writable route, sends failed), a slave needs an id > 0."""
    role = cfg.store.broker_role
    if role in MASTER_ROLES:
        if cfg.broker_id != MASTER_ID:
            log.warning("brokerId=%d with brokerRole=%s: a master's brokerId is %d, using %d", cfg.broker_id,
                        role, MASTER_ID, MASTER_ID)
            cfg.broker_id = MASTER_ID
    elif role == SLAVE_ROLE:
        if cfg.broker_id <= MASTER_ID:
            raise ConfigError(f"Slave's brokerId must be > 0 (brokerRole=SLAVE, brokerId={cfg.broker_id})")
    else:
        raise ConfigError(f"brokerRole={role!r}: expected ASYNC_MASTER, SYNC_MASTER or SLAVE")
