"""mqadmin sendMessage refuses, on a store directory and over -n alike, what Java's client refuses or
what the broker would store as other properties: an empty body (exit 1, "the message body length is
zero") and 0x01/0x02 separators in the tag or keys. One line on stderr, nothing stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_cli_remote import mqadmin
from tests.remoting_broker import BrokerProcess, running_broker

EMPTY = "mqadmin sendMessage: the message body length is zero: -p/--body must not be empty"
SEPARATED = ("-c", "a\x02b\x01c", "-k", "k1\x02KEYS\x01evil")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("cli-send-checks"))) as b:
        yield b


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_send_message_refusals_on_a_store_directory(cli: Cli) -> None:
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "SendChk", "-r", "1", "-w", "1").exit_code == 0
    empty = cli("sendMessage", "-t", "SendChk", "-p", "")
    assert empty.exit_code == 1 and _one_line(empty.stderr) == EMPTY
    separated = cli("sendMessage", "-t", "SendChk", "-p", "x", *SEPARATED)
    assert separated.exit_code == 1 and "contains a property separator" in _one_line(separated.stderr)
    assert cli.json("consumeMessage", "-t", "SendChk") == []


def test_send_message_refusals_over_n(broker: BrokerProcess) -> None:
    n = broker.namesrv_addr
    r = mqadmin("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "SendChkN", "-r", "1", "-w", "1")
    assert r.returncode == 0, r.stderr
    empty = mqadmin("sendMessage", "-n", n, "-t", "SendChkN", "-p", "")
    assert empty.returncode == 1 and _one_line(empty.stderr) == EMPTY
    separated = mqadmin("sendMessage", "-n", n, "-t", "SendChkN", "-p", "x", *SEPARATED)
    assert separated.returncode == 1, separated.stdout
    line = _one_line(separated.stderr)
    # a refusal named as such, not an "unexpected failure"
    assert line.startswith("mqadmin sendMessage: illegal message for topic SendChkN: property "), line
    assert "property KEYS 'k1\\x02KEYS\\x01evil' contains a property separator" in line or \
        "property TAGS 'a\\x02b\\x01c' contains a property separator" in line, line
    consumed = mqadmin("consumeMessage", "-n", n, "-t", "SendChkN", "--output", "json")
    assert consumed.returncode == 0 and json.loads(consumed.stdout) == []
    ok = mqadmin("sendMessage", "-n", n, "-t", "SendChkN", "-p", "fine", "-c", "TagA", "-k", "k1 k2")
    assert ok.returncode == 0 and "SEND_OK" in ok.stdout


def test_send_message_without_a_queue_spreads_over_the_write_queues_on_a_store_directory(cli: Cli) -> None:
    """Each embedded sendMessage is a new broker: its round robin started at queue 0 every time, so every
    message an operator sent by hand landed in queue 0. A Java producer (and Apache's broker, for a
    request without a queue) starts at a random queue, so a run of sends spreads over the queues."""
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "SendSpread", "-r", "4", "-w", "4").exit_code == 0
    queues = {cli.json("sendMessage", "-t", "SendSpread", "-p", f"m{i}")["queueId"] for i in range(12)}
    assert len(queues) > 1 and queues <= {0, 1, 2, 3}, queues
