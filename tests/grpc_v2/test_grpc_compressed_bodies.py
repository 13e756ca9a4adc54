"""Compressed message bodies (ZLIB, LZ4, ZSTD) handed to users, against a real mqbroker.

A Java 5.x producer compresses bodies over 4 KiB with ``rocketmq.message.compressType`` (ZLIB by
default, LZ4 or ZSTD on request) and marks the record's SYSFLAG: COMPRESSED_FLAG (0x1) and the type in
bits 8-10 (0x100 LZ4, 0x200 ZSTD, 0x300 ZLIB; 0 is what older clients wrote for ZLIB). The records are
sent here over remoting with exactly those flags and Apache's formats (a zlib stream, an LZ4 frame, a
zstd frame), then read back:

- over gRPC, the official Python client gets every body as sent, IDENTITY-encoded (upstream's default
  proxy pops through MessageDecoder with decompressBody on). Labelling LZ4 bytes GZIP made the client's
  gunzip fail the whole receive on every redelivery, so one such message blocked the group;
- a body that does not decompress is not delivered (upstream's decoder returns no message for it) and
  the broker logs its topic and offset, while the valid messages around it are delivered;
- mqadmin's queryMsgById / queryMsgByUniqueKey print the body decompressed and SYSFLAG without
  COMPRESSED_FLAG, as Apache's tools (deCompressBody clears it).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import lz4.frame
import pytest
import zstandard
from google.protobuf.duration_pb2 import Duration
from typer.testing import CliRunner

from broker_core.net.grpc_v2.stubs import pb, service_pb2_grpc
from broker_core.remoting import RequestCode, ResponseCode
from broker_core.remoting.headers import SendMessageRequestHeaderV2
from broker_core.store.codec.properties import encode_properties
from mqadmin.app import app
from tests.net.net_util import RawClient
from tests.remoting_broker import BrokerProcess, running_broker
from tests.waiting import wait_for

from .conftest import run_scenario

ORIGINAL = b"a body a Java producer compresses, over 4 KiB " * 120  # 5640 bytes
ZLIB_LEGACY, LZ4, ZSTD, ZLIB = 0x1, 0x101, 0x201, 0x301
COMPRESSED = {ZLIB_LEGACY: zlib.compress(ORIGINAL), LZ4: lz4.frame.compress(ORIGINAL),
              ZSTD: zstandard.ZstdCompressor().compress(ORIGINAL), ZLIB: zlib.compress(ORIGINAL)}
MD = (("x-mq-client-id", "compressed@1@0@abc"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("grpc-compressed"))) as b:
        yield b


@pytest.fixture(scope="module")
def remoting(process: BrokerProcess) -> Iterator[RawClient]:
    client = RawClient(process.broker_addr)
    yield client
    client.sock.close()


def _topic(bc: RawClient, topic: str) -> None:
    r = bc.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1",
                                                      "writeQueueNums": "1", "perm": "6",
                                                      "topicFilterType": "SINGLE_TAG"})
    assert r.code == ResponseCode.SUCCESS, r.remark


def _send(bc: RawClient, topic: str, body: bytes, sys_flag: int, key: str) -> dict[str, str]:
    """A record as a Java producer sends it (its SYSFLAG as given); the answer's ext fields (msgId)."""
    props = {"KEYS": key, "UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"}
    h = SendMessageRequestHeaderV2(a="PG_compressed", b=topic, c="TBW102", d=4, e=0, f=sys_flag,
                                   g=int(time.time() * 1000), h=0, i=encode_properties(props))
    r = bc.call(RequestCode.SEND_MESSAGE_V2, h.to_ext_fields(), body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return {**r.ext_fields, "UNIQ_KEY": props["UNIQ_KEY"]}


def _dispatched(bc: RawClient, topic: str, count: int) -> None:
    wait_for(lambda: int(bc.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})
                         .ext_fields["offset"]) >= count, f"{topic} reaching {count} messages")


def _official(process: BrokerProcess, tmp_path: Path, topic: str, expect: int, **args: object) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    assert process.grpc_addr is not None
    return run_scenario(process.grpc_addr, home, "simple_consume", topic=topic, group=topic + "_G",
                        expect=expect, **args)


def test_lz4_zstd_and_zlib_bodies_reach_the_official_client_as_sent(process: BrokerProcess, remoting: RawClient,
                                                                    tmp_path: Path) -> None:
    topic = "CompressedAll"
    _topic(remoting, topic)
    for flag, body in COMPRESSED.items():
        _send(remoting, topic, body, flag, f"f{flag:x}")
    _send(remoting, topic, b"plain", 0, "plain")
    _dispatched(remoting, topic, 5)

    out = _official(process, tmp_path, topic, 5)
    assert out["errors"] == []
    bodies = {m["keys"][0]: m["body"] for m in out["received"]}
    assert bodies == {"f1": ORIGINAL.decode(), "f101": ORIGINAL.decode(), "f201": ORIGINAL.decode(),
                      "f301": ORIGINAL.decode(), "plain": "plain"}

    # on the wire: IDENTITY, the body as sent and its digest; never GZIP for what is not ZLIB
    assert process.grpc_addr is not None
    stub = service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel(process.grpc_addr))
    req = pb.ReceiveMessageRequest(group=pb.Resource(name=topic + "_Raw"),
                                   message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
                                   batch_size=8, invisible_duration=Duration(seconds=30),
                                   long_polling_timeout=Duration(seconds=5))
    wires = [i.message for i in stub.ReceiveMessage(req, metadata=MD, timeout=15) if i.HasField("message")]
    assert len(wires) == 5
    for w in wires[:4]:
        sp = w.system_properties
        assert (sp.body_encoding, w.body) == (pb.Encoding.IDENTITY, ORIGINAL), list(sp.keys)
        assert sp.body_digest.checksum == hashlib.md5(ORIGINAL).hexdigest().upper()


def test_a_body_that_does_not_decompress_does_not_block_the_group(process: BrokerProcess, remoting: RawClient,
                                                                  tmp_path: Path) -> None:
    topic = "CompressedBad"
    _topic(remoting, topic)
    _send(remoting, topic, COMPRESSED[LZ4], LZ4, "v1")
    _send(remoting, topic, b"not an lz4 frame at all", LZ4, "bad")  # offset 1
    _send(remoting, topic, COMPRESSED[ZSTD], ZSTD, "v2")
    _dispatched(remoting, topic, 3)

    out = _official(process, tmp_path, topic, 2, timeout=15)
    assert out["errors"] == []
    assert sorted(m["keys"][0] for m in out["received"]) == ["v1", "v2"]
    assert all(m["body"] == ORIGINAL.decode() for m in out["received"])
    wait_for(lambda: "CompressedBad queue 0 offset 1" in process.log_text(), "a log line naming the message")
    line = next(ln for ln in process.log_text().splitlines() if "CompressedBad queue 0 offset 1" in ln)
    assert "LZ4 body does not decompress" in line and "not delivered" in line


def _mqadmin(ns: str, *args: str) -> str:
    r = CliRunner().invoke(app, [*args, "-n", ns], env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})
    assert r.exit_code == 0, (r.exit_code, r.stdout, r.stderr)
    return r.stdout


@pytest.mark.parametrize(("flag", "shown_flag"), [(ZLIB_LEGACY, 0), (ZLIB, 0x300), (LZ4, 0x100), (ZSTD, 0x200)])
def test_mqadmin_queries_print_the_body_and_sysflag_decompressed(process: BrokerProcess, remoting: RawClient,
                                                                 flag: int, shown_flag: int) -> None:
    """Apache's MessageDecoder clears COMPRESSED_FLAG once it inflated the body (the type bits stay)."""
    topic = f"CompressedQuery{flag:x}"
    _topic(remoting, topic)
    sent = _send(remoting, topic, COMPRESSED[flag], flag, "q")
    _dispatched(remoting, topic, 1)
    ns = process.namesrv_addr

    by_id = _mqadmin(ns, "queryMsgById", "-t", topic, "-i", sent["msgId"], "-f", "UTF-8")
    assert f"System Flag:         {shown_flag}\n" in by_id
    assert f"Message Body:        {ORIGINAL.decode()}" in by_id
    record = json.loads(_mqadmin(ns, "queryMsgByUniqueKey", "-t", topic, "-i", sent["UNIQ_KEY"],
                                 "--output", "json"))
    assert (record["sysFlag"], record["body"]) == (shown_flag, ORIGINAL.decode())
    by_key = _mqadmin(ns, "queryMsgByUniqueKey", "-t", topic, "-i", sent["UNIQ_KEY"])
    assert f"System Flag:         {shown_flag}\n" in by_key
