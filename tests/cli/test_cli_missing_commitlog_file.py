"""mqadmin on a store whose commitlog lost a file from the middle (deleted by hand).

Why: a read-only open computed the index of the file to recover from by arithmetic from the first
file, so a missing file shifted it past the list: every command on such a store ended in "unexpected
failure: list index out of range". Reading a record inside the gap said "unexpected failure" too,
though the damage is the store's state and its message names the queue and offset. Now the open
names the missing file once, the commands answer from what is there, a read into the gap is one
line naming it, and nothing is written.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from mqadmin.app import app

SMALL = {"mappedFileSizeCommitLog": "4096", "mappedFileSizeConsumeQueue": "320",
         "mapperFileSizeBatchConsumeQueue": "368", "maxHashSlotNum": "64", "maxIndexNum": "64"}


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_store_with_a_missing_commitlog_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL.items()))
    broker = Broker(tmp_path / "store", BrokerConfig.from_properties(SMALL), audit_log_path=None)
    broker.create_or_update_topic("T", 1, 1)
    for i in range(60):
        broker.send_message("T", b"body-%d-" % i * 20, {"KEYS": f"k{i}"}, queue_id=0)
    broker.shutdown()
    files = sorted((tmp_path / "store" / "commitlog").iterdir())
    assert len(files) >= 4
    files[2].unlink()
    before = _digest(tmp_path / "store")
    runner = CliRunner()

    def cli(*args: str):  # noqa: ANN202 - typer's Result
        return runner.invoke(app, [*args, "--store", str(tmp_path / "store"), "--config", str(conf)],
                             env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})

    status = cli("topicStatus", "-t", "T")
    assert status.exit_code == 0, status.output
    assert f"commitlog: file {files[2].name} is missing" in caplog.text
    assert "unexpected" not in status.output

    read = cli("consumeMessage", "-t", "T", "-b", "broker-a", "-i", "0", "-o", "0", "-c", "60")
    assert read.exit_code == 1
    [line] = [x for x in read.stderr.splitlines() if x.startswith("mqadmin consumeMessage:")]
    assert f"expected a record at commitlog offset {int(files[2].name)}" in line and "unexpected" not in line
    assert "Traceback" not in read.output

    assert _digest(tmp_path / "store") == before  # inspection wrote nothing
