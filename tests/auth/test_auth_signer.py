"""Signature vectors for the remoting and gRPC protocols (spec D.1 and grpc-v2 2.1)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from rocketmq.v5.util.signature import Signature as OfficialPythonSigner

from broker_core.auth.signer import (
    format_date_time,
    grpc_authorization_header,
    grpc_signature,
    parse_grpc_authorization,
    remoting_content,
    remoting_signature,
    sign_grpc_metadata,
    sign_remoting,
    verify_grpc,
    verify_remoting,
)


def test_spec_vector_get_routeinfo_by_topic() -> None:
    fields = {"topic": "TopicTest"}
    signed = sign_remoting(fields, None, "rocketmq2", "12345678")
    assert remoting_content(signed) == b"rocketmq2TopicTest"
    assert signed["Signature"] == "GeeGoP9mRvDhoVp4PD5omX0prgE="
    assert signed["AccessKey"] == "rocketmq2"
    assert verify_remoting(signed, None, "12345678")
    assert not verify_remoting(signed, None, "12345679")


def test_values_sorted_by_key_in_java_order_then_body() -> None:
    fields = {"b": "2", "a": "1", "Z": "0", "AccessKey": "ak", "Signature": "ignored"}
    # Uppercase sorts before lowercase; Signature is never part of the content.
    assert remoting_content(fields, b"\x00body") == b"ak0" + b"12" + b"\x00body"
    expected = base64.b64encode(hmac.new(b"sk", b"ak012\x00body", hashlib.sha1).digest()).decode()
    assert remoting_signature("sk", remoting_content(fields, b"\x00body")) == expected


def test_body_and_security_token_are_signed() -> None:
    signed = sign_remoting({"topic": "T"}, b"payload", "ak", "sk", security_token="tok")
    assert signed["SecurityToken"] == "tok"
    assert verify_remoting(signed, b"payload", "sk")
    assert not verify_remoting(signed, b"payload!", "sk")
    tampered = dict(signed, topic="T2")
    assert not verify_remoting(tampered, b"payload", "sk")
    assert not verify_remoting({k: v for k, v in signed.items() if k != "Signature"}, b"payload", "sk")


def test_unique_key_query_is_unsigned_for_old_clients_only() -> None:
    fields = sign_remoting({"topic": "T", "_UNIQUE_KEY_QUERY": "true"}, None, "ak", "sk")
    assert verify_remoting(fields, None, "sk", version=479)
    # A V4_9_3-or-older client signed without it; the server must leave it out too.
    old = sign_remoting({"topic": "T"}, None, "ak", "sk")
    old_received = dict(old, _UNIQUE_KEY_QUERY="true")
    assert verify_remoting(old_received, None, "sk", version=399)  # V4_9_3
    assert not verify_remoting(old_received, None, "sk", version=400)  # V4_9_4_SNAPSHOT signs it


def test_grpc_signature_is_lowercase_hex_hmac_of_date_time() -> None:
    date_time = "20261122T033042Z"
    expected = hmac.new(b"12345678", date_time.encode(), hashlib.sha1).hexdigest()
    assert grpc_signature("12345678", date_time) == expected
    header = grpc_authorization_header("rocketmq", "12345678", date_time)
    assert header == f"MQv2-HMAC-SHA1 Credential=rocketmq, SignedHeaders=x-mq-date-time, Signature={expected}"


def test_grpc_matches_the_official_python_client() -> None:
    date_time = "20250101T080000Z"
    assert grpc_signature("sk-123", date_time) == OfficialPythonSigner.sign("sk-123", date_time)

    class Creds:
        ak, sk = "ak-1", "sk-123"

    class Config:
        credentials, namespace = Creds(), ""

    metadata = dict(OfficialPythonSigner.metadata(Config(), "host@1@0@x"))
    assert verify_grpc(metadata["authorization"], metadata["x-mq-date-time"], "sk-123")
    assert not verify_grpc(metadata["authorization"], metadata["x-mq-date-time"], "sk-124")
    ours = sign_grpc_metadata("ak-1", "sk-123", metadata["x-mq-date-time"])
    assert ours["authorization"] == metadata["authorization"]


def test_grpc_header_parsing() -> None:
    cred = parse_grpc_authorization("MQv2-HMAC-SHA1 Credential=ak/2025/region, SignedHeaders=x-mq-date-time, Signature=ABCDEF")
    assert cred.access_key == "ak"
    assert cred.signature_bytes() == bytes.fromhex("abcdef")  # either case accepted
    assert not verify_grpc("MQv2-HMAC-SHA1 Credential=ak, Signature", "20250101T000000Z", "sk")
    assert not verify_grpc("garbage", "20250101T000000Z", "sk")
    assert not verify_grpc("MQv2-HMAC-SHA1 Credential=ak, Signature=zz", "20250101T000000Z", "sk")
    empty = grpc_authorization_header("", "", "20250101T000000Z")  # the client always sends one
    assert parse_grpc_authorization(empty).access_key == ""


def test_date_time_format() -> None:
    text = format_date_time(0)
    assert len(text) == 16 and text[8] == "T" and text.endswith("Z")
