"""printMsg -b/-e: the queue header names the searched range, as Apache's PrintMessageSubCommand replaces
minOffset/maxOffset with searchOffset's answers before printing them; it named the queue's own offsets,
so the header disagreed with the messages printed under it."""

from __future__ import annotations

import os

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig

T0 = 1_700_000_000_000
MQ = "MessageQueue [topic=P, brokerName=broker-a, queueId=0]"


def _store_four_seconds_apart(cli) -> None:
    """Offsets 0..3 of P queue 0 stored at T0, T0+1 s, T0+2 s, T0+3 s."""
    now = [T0]
    b = Broker(cli.store, BrokerConfig(), clock=lambda: now[0], audit_log_path=None)
    try:
        b.create_or_update_topic("P", 1, 1)
        for i in range(4):
            now[0] = T0 + i * 1000
            b.send_message("P", f"m{i}".encode(), queue_id=0)
    finally:
        b.shutdown()


def test_print_msg_header_is_the_searched_range(cli):
    _store_four_seconds_apart(cli)
    r = cli("printMsg", "-t", "P", "-d", "false", "-b", str(T0 + 1000), "-e", str(T0 + 3000))
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == f"minOffset=1, maxOffset=3, {MQ}"
    assert [line.split("queueOffset=")[1].split(",")[0] for line in lines if "queueOffset=" in line] == ["1", "2"]
    only_begin = cli("printMsg", "-t", "P", "-d", "false", "-b", str(T0 + 2000)).stdout.splitlines()
    assert only_begin[0] == f"minOffset=2, maxOffset=4, {MQ}"
    # without -b/-e the range is the whole queue, as before
    assert cli("printMsg", "-t", "P", "-d", "false").stdout.splitlines()[0] == f"minOffset=0, maxOffset=4, {MQ}"


def test_consume_message_offset_combines_with_the_begin_time(cli):
    """consumeMessage -o replaced -s: ``-o 0 -s T0+2s`` printed m0 and m1, stored before the begin time. Apache's
    executeByCondition starts at max(searchOffset(begin), offset), so -o only moves the start further on."""
    _store_four_seconds_apart(cli)
    argv = ("consumeMessage", "-t", "P", "-b", "broker-a", "-i", "0")
    assert [r["body"] for r in cli.json(*argv, "-o", "0", "-s", str(T0 + 2000), "-e", str(T0 + 3000))] == ["m2"]
    assert [r["body"] for r in cli.json(*argv, "-o", "3", "-s", str(T0 + 1000))] == ["m3"]  # the later start
    assert [r["body"] for r in cli.json(*argv, "-o", "1")] == ["m1", "m2", "m3"]


def test_consume_message_offset_below_the_queue_min_starts_at_the_min(tmp_path):
    """After retention (queue min > 0) ``-o 0`` printed "status=OFFSET_ILLEGAL" and no message; Apache's
    executeByCondition starts at max(minOffset(mq), offset), so it prints the oldest messages still kept."""
    from tests.cli.conftest import Cli, write_conf

    props = {"mappedFileSizeCommitLog": "4096", "fileReservedTime": "1"}
    conf = write_conf(tmp_path / "broker.conf", props)
    now = [T0]
    b = Broker(tmp_path / "store", BrokerConfig.from_properties(props), clock=lambda: now[0], audit_log_path=None)
    try:
        b.create_or_update_topic("R", 1, 1)
        for i in range(60):
            b.send_message("R", f"r{i}".encode(), queue_id=0)
        for f in (tmp_path / "store" / "commitlog").iterdir():  # written more than fileReservedTime ago
            os.utime(f, (T0 / 1000, T0 / 1000))
        now[0] = T0 + 3 * 3_600_000
        b.delete_expired_commit_log()
    finally:
        b.shutdown()
    cli = Cli(tmp_path / "store", conf)
    r = cli("consumeMessage", "-t", "R", "-b", "broker-a", "-i", "0", "-o", "0", "-c", "3")
    assert r.exit_code == 0, r.output
    assert "OFFSET_ILLEGAL" not in r.stdout, r.stdout
    bodies = [line.split("BODY: ")[1] for line in r.stdout.splitlines() if "BODY: " in line]
    assert len(bodies) == 3 and bodies[0] != "r0", r.stdout
    first = int(bodies[0][1:])
    assert bodies == [f"r{first}", f"r{first + 1}", f"r{first + 2}"]
