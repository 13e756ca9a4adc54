"""printMsg -b/-e: the queue header names the searched range, as Apache's PrintMessageSubCommand replaces
minOffset/maxOffset with searchOffset's answers before printing them; it named the queue's own offsets,
so the header disagreed with the messages printed under it."""

from __future__ import annotations

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
