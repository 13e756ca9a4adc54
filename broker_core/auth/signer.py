"""Request signatures for both protocols: signing (our clients) and verifying (our broker).

Why signer and verifier share one module: the bytes that get signed must be built by one function,
or the two sides drift apart. Remoting (spec D.1): HMAC-SHA1 keyed with the secret key over the
extFields *values* sorted by key (Java String order) followed by the raw body, Base64 encoded, in
extField ``Signature`` next to ``AccessKey``. gRPC (spec grpc-v2 2.1): HMAC-SHA1 over the exact
``x-mq-date-time`` header value, lower-case hex, in the ``authorization`` header. Comparisons are
constant-time.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping
from dataclasses import dataclass

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
# MQVersion.Version.V4_9_3.ordinal(): up to this client version the server leaves _UNIQUE_KEY_QUERY
# unsigned (400 is V4_9_4_SNAPSHOT, which signs it; remoting/codes.V4_9_3 holds the same ordinal).
V4_9_3_VERSION = 399

GRPC_AUTHORIZATION = "authorization"
GRPC_DATE_TIME = "x-mq-date-time"
GRPC_ALGORITHM = "MQv2-HMAC-SHA1"


def _java_string_order(key: str) -> bytes:
    # Java compares UTF-16 code units; big-endian UTF-16 bytes sort the same way.
    return key.encode("utf-16-be")


def remoting_content(
    ext_fields: Mapping[str, str | None],
    body: bytes | None = None,
    *,
    version: int | None = None,
) -> bytes:
    """The signed bytes: every extField except Signature, values only, sorted by key, then the body.

    ``version`` is the request's ``version`` header; pass it on the server side so requests from
    clients at or below V4_9_3 get ``_UNIQUE_KEY_QUERY`` left out as RocketMQ does.
    """
    parts: list[bytes] = []
    for key in sorted(ext_fields, key=_java_string_order):
        if key == SIGNATURE:
            continue
        if key == UNIQUE_KEY_QUERY and version is not None and version <= V4_9_3_VERSION:
            continue
        value = ext_fields[key]
        if value is None:
            continue
        parts.append(str(value).encode("utf-8"))
    if body:
        parts.append(bytes(body))
    return b"".join(parts)


def hmac_sha1(secret_key: str, content: bytes) -> bytes:
    import hashlib  # loaded on the first signature: OpenSSL's start-up is wasted on unsigned, local commands
    import hmac

    return hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()


def remoting_signature(secret_key: str, content: bytes) -> str:
    """Base64 (standard alphabet, padded) HMAC-SHA1, as AclSigner computes it."""
    return base64.b64encode(hmac_sha1(secret_key, content)).decode("ascii")


def sign_remoting(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """extFields with AccessKey (+ SecurityToken) and Signature added; call after all other fields are set."""
    fields = {k: v for k, v in ext_fields.items() if k != SIGNATURE}
    fields[ACCESS_KEY] = access_key
    if security_token:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = remoting_signature(secret_key, remoting_content(fields, body))
    return fields


def signatures_equal(expected: str, received: str | None) -> bool:
    """Constant-time comparison of two Base64 signatures."""
    if received is None:
        return False
    import hmac  # see hmac_sha1

    return hmac.compare_digest(expected.encode("utf-8"), received.encode("utf-8"))


def verify_remoting(
    ext_fields: Mapping[str, str | None],
    body: bytes | None,
    secret_key: str,
    *,
    version: int | None = None,
) -> bool:
    """Recompute over what was received and compare with the Signature extField."""
    received = ext_fields.get(SIGNATURE)
    expected = remoting_signature(secret_key, remoting_content(ext_fields, body, version=version))
    return signatures_equal(expected, received)


def grpc_signature(secret_key: str, date_time: str) -> str:
    """Lower-case hex HMAC-SHA1 of the ``x-mq-date-time`` value."""
    return hmac_sha1(secret_key, date_time.encode("utf-8")).hex()


def grpc_authorization_header(access_key: str, secret_key: str, date_time: str) -> str:
    return (
        f"{GRPC_ALGORITHM} Credential={access_key}, SignedHeaders={GRPC_DATE_TIME}, "
        f"Signature={grpc_signature(secret_key, date_time)}"
    )


def format_date_time(epoch_ms: int | None = None) -> str:
    """``x-mq-date-time`` as the official clients send it: local wall-clock time with a literal Z."""
    seconds = (time.time() if epoch_ms is None else epoch_ms / 1000.0)
    return time.strftime("%Y%m%dT%H%M%SZ", time.localtime(seconds))


def sign_grpc_metadata(access_key: str, secret_key: str, date_time: str) -> dict[str, str]:
    """The two headers a signed gRPC call carries."""
    return {
        GRPC_DATE_TIME: date_time,
        GRPC_AUTHORIZATION: grpc_authorization_header(access_key, secret_key, date_time),
    }


class GrpcAuthorizationFormatError(ValueError):
    """The authorization header is not ``<scheme> k=v, k=v, ...``."""


@dataclass(frozen=True)
class GrpcCredential:
    access_key: str
    signature_hex: str | None

    def signature_bytes(self) -> bytes | None:
        if self.signature_hex is None:
            return None
        try:
            return binascii.unhexlify(self.signature_hex)
        except (binascii.Error, ValueError):
            return None

    def signature_base64(self) -> str | None:
        """RocketMQ turns the hex signature into Base64 before comparing (and logging) it."""
        raw = self.signature_bytes()
        return None if raw is None else base64.b64encode(raw).decode("ascii")


def parse_grpc_authorization(header: str) -> GrpcCredential:
    """Split at the first space, then on commas; the username is Credential's text before ``/``."""
    scheme, sep, rest = header.partition(" ")
    if not sep:
        raise GrpcAuthorizationFormatError("authentication header is incorrect")
    access_key = ""
    signature: str | None = None
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise GrpcAuthorizationFormatError(f"authentication header item {key!r} has no '='")
        if key == "Credential":
            access_key = value.split("/", 1)[0]
        elif key == "Signature":
            signature = value
    return GrpcCredential(access_key, signature)


def verify_grpc(header: str, date_time: str, secret_key: str) -> bool:
    """Constant-time check of a gRPC authorization header against the user's secret key."""
    try:
        received = parse_grpc_authorization(header).signature_bytes()
    except GrpcAuthorizationFormatError:
        return False
    if received is None:
        return False
    import hmac  # see hmac_sha1

    return hmac.compare_digest(hmac_sha1(secret_key, date_time.encode("utf-8")), received)
