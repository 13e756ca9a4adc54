"""Broker auth settings under RocketMQ's property names (spec D.5).

Why this module exists: auth keys live in the broker's properties file next to everything else; this
dataclass gives them RocketMQ's names and defaults, validates them once at load time, and parses the
two JSON-valued keys without ever echoing their secrets in an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum

from broker_core.auth.errors import AuthConfigError


class Strategy(Enum):
    STATELESS = "stateless"
    STATEFUL = "stateful"


def parse_strategy(key: str, value: str) -> Strategy:
    """Accept ``stateless``/``stateful`` or RocketMQ's strategy class names."""
    text = value.strip()
    simple = text.rsplit(".", 1)[-1].lower()
    for suffix in ("authenticationstrategy", "authorizationstrategy"):
        if simple.endswith(suffix):
            simple = simple[: -len(suffix)]
    for strategy in Strategy:
        if simple == strategy.value:
            return strategy
    raise AuthConfigError(f"{key} must be stateless or stateful (or a RocketMQ strategy class name), got {value!r}")


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    def __repr__(self) -> str:  # never show the secret
        return f"Credentials(username={self.username!r}, password='***')"


# dataclass field -> RocketMQ property key
_KEYS: dict[str, str] = {
    "authentication_enabled": "authenticationEnabled",
    "authentication_provider": "authenticationProvider",
    "authentication_metadata_provider": "authenticationMetadataProvider",
    "authentication_strategy": "authenticationStrategy",
    "authentication_whitelist": "authenticationWhitelist",
    "init_authentication_user": "initAuthenticationUser",
    "inner_client_authentication_credentials": "innerClientAuthenticationCredentials",
    "authorization_enabled": "authorizationEnabled",
    "authorization_provider": "authorizationProvider",
    "authorization_metadata_provider": "authorizationMetadataProvider",
    "authorization_strategy": "authorizationStrategy",
    "authorization_whitelist": "authorizationWhitelist",
    "migrate_auth_from_v1_enabled": "migrateAuthFromV1Enabled",
    "user_cache_max_num": "userCacheMaxNum",
    "user_cache_expired_second": "userCacheExpiredSecond",
    "user_cache_refresh_second": "userCacheRefreshSecond",
    "acl_cache_max_num": "aclCacheMaxNum",
    "acl_cache_expired_second": "aclCacheExpiredSecond",
    "acl_cache_refresh_second": "aclCacheRefreshSecond",
    "stateful_authentication_cache_max_num": "statefulAuthenticationCacheMaxNum",
    "stateful_authentication_cache_expired_second": "statefulAuthenticationCacheExpiredSecond",
    "stateful_authorization_cache_max_num": "statefulAuthorizationCacheMaxNum",
    "stateful_authorization_cache_expired_second": "statefulAuthorizationCacheExpiredSecond",
    "cluster_name": "brokerClusterName",
}

AUTH_CONFIG_KEYS = frozenset(_KEYS.values())
SECRET_KEYS = frozenset({"initAuthenticationUser", "innerClientAuthenticationCredentials"})
"""Keys whose values hold a password or secret key: GET_BROKER_CONFIG needs authentication only, so any
user could otherwise read the initial admin's password there."""


@dataclass(frozen=True)
class AuthConfig:
    authentication_enabled: bool = False
    authentication_provider: str = "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider"
    authentication_metadata_provider: str = ""
    authentication_strategy: Strategy = Strategy.STATELESS
    authentication_whitelist: str = ""
    # JSON {"username":..,"password":..}: created as a Super user at first start when absent.
    init_authentication_user: str = ""
    # JSON {"accessKey":..,"secretKey":..}: the broker's own identity, also a Super user.
    inner_client_authentication_credentials: str = ""
    authorization_enabled: bool = False
    authorization_provider: str = "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider"
    authorization_metadata_provider: str = ""
    authorization_strategy: Strategy = Strategy.STATELESS
    authorization_whitelist: str = ""
    migrate_auth_from_v1_enabled: bool = False
    user_cache_max_num: int = 1000
    user_cache_expired_second: int = 600
    user_cache_refresh_second: int = 60
    acl_cache_max_num: int = 1000
    acl_cache_expired_second: int = 600
    acl_cache_refresh_second: int = 60
    stateful_authentication_cache_max_num: int = 10000
    stateful_authentication_cache_expired_second: int = 60
    stateful_authorization_cache_max_num: int = 10000
    stateful_authorization_cache_expired_second: int = 60
    cluster_name: str = "DefaultCluster"

    def __post_init__(self) -> None:
        # Fail at startup, not at the first request.
        self.init_user()
        self.inner_client_user()

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuthConfig:
        """Build from broker properties (RocketMQ key names); unrelated keys are ignored."""
        values: dict[str, object] = {}
        for f in fields(cls):
            key = _KEYS[f.name]
            if key not in props:
                continue
            raw = str(props[key]).strip()
            default = f.default
            if isinstance(default, bool):
                values[f.name] = _parse_bool(key, str(props[key]))  # untrimmed: "true " is refused
            elif isinstance(default, int):
                values[f.name] = _parse_int(key, raw)
            elif isinstance(default, Strategy):
                values[f.name] = parse_strategy(key, raw)
            else:
                values[f.name] = raw
        return cls(**values)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, Strategy):
                text = value.value
            else:
                text = str(value)
            out[_KEYS[f.name]] = text
        return out

    def init_user(self) -> Credentials | None:
        return _parse_credentials("initAuthenticationUser", self.init_authentication_user, "username", "password")

    def inner_client_user(self) -> Credentials | None:
        return _parse_credentials(
            "innerClientAuthenticationCredentials", self.inner_client_authentication_credentials,
            "accessKey", "secretKey",
        )

    def authentication_whitelist_codes(self) -> frozenset[str]:
        return _split_codes(self.authentication_whitelist)

    def authorization_whitelist_codes(self) -> frozenset[str]:
        return _split_codes(self.authorization_whitelist)


#: the protobuf package of the gRPC v2 messages
GRPC_PACKAGE = "apache.rocketmq.v2."


def grpc_request_code(rpc: str) -> str:
    """A gRPC v2 call's request code as Apache's auth knows it: its request message's full protobuf name
    (Default{Authentication,Authorization}ContextBuilder: ``message.getDescriptorForType().getFullName()``),
    e.g. ``apache.rocketmq.v2.QueryRouteRequest``; Telemetry's message is a ``TelemetryCommand``.

    Why: the whitelists and the audit log's "for request = ..." name gRPC calls so; a whitelist copied
    from an Apache broker did nothing while we named calls by their bare RPC name."""
    return f"{GRPC_PACKAGE}{'TelemetryCommand' if rpc == 'Telemetry' else rpc + 'Request'}"


def _split_codes(text: str) -> frozenset[str]:
    """The whitelist's codes: remoting request codes (decimal), gRPC request names as Apache writes them,
    and bare RPC names (``QueryRoute``), which this broker took before and still takes."""
    codes = {c.strip() for c in text.split(",") if c.strip()}
    return frozenset(codes | {grpc_request_code(c) for c in codes if c.isidentifier()})


def _parse_bool(key: str, raw: str) -> bool:
    """true/false in any case, as Boolean.parseBoolean takes them; "true " (whitespace kept by
    Properties.load) is refused naming the whitespace, which Apache would read as false."""
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if raw != raw.strip() and raw.strip().lower() in ("true", "false"):
        raise AuthConfigError(f"{key} must be true or false: {raw!r} has whitespace around {raw.strip()!r}; "
                              f"remove it (Apache's broker would read it as false)")
    raise AuthConfigError(f"{key} must be true or false, got {raw!r}")


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise AuthConfigError(f"{key} must be an integer, got {raw!r}") from None


def _parse_credentials(key: str, raw: str, user_field: str, secret_field: str) -> Credentials | None:
    if not raw or not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        # Position only: the text itself holds a secret.
        raise AuthConfigError(f"{key} is not valid JSON (error at character {e.pos})") from None
    if not isinstance(data, dict):
        raise AuthConfigError(f'{key} must be a JSON object like {{"{user_field}":..,"{secret_field}":..}}')
    user = data.get(user_field)
    secret = data.get(secret_field)
    if not isinstance(user, str) or not user.strip():
        raise AuthConfigError(f"{key} has no {user_field}")
    if not isinstance(secret, str) or not secret.strip():
        raise AuthConfigError(f"{key} has no {secret_field} for {user_field} {user!r}")
    return Credentials(user.strip(), secret)
