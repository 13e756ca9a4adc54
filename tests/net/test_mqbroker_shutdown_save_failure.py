"""A shutdown that cannot save a config file (a full disk) says so, exits 1 and keeps ``abort``.

Why: consumer offsets committed while the disk was full live in memory until the shutdown writes
consumerOffset.json; when that write failed, the broker logged it, then mqbroker printed "The broker
shut down cleanly.", exited 0 and the store removed its ``abort`` file, so neither the operator, nor
a supervisor, nor the next start knew the offsets were lost. Now the file is named in one line, the
exit status is 1 and ``abort`` stays: the next start recovers as after a crash, which re-checks the
commitlog and loses nothing (shown here: every message is still read after it).

Runs on a small tmpfs and on a loop-mounted ext4 image (``small_fs``: root needed, else skipped).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from small_fs import fill

from broker_core.broker.broker import Broker
from broker_core.client.instance import MQClientInstance
from broker_core.client.pull_consumer import PullConsumer
from tests.broker.conftest import small_config
from tests.waiting import wait_all_dispatched

REPO = Path(__file__).resolve().parents[2]
SMALL = {"mappedFileSizeCommitLog": str(1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 1000),
         "mapperFileSizeBatchConsumeQueue": str(46 * 1000), "maxHashSlotNum": "64", "maxIndexNum": "400",
         "diskSpaceWarningLevelRatio": "100"}


def _seed(root: Path) -> None:
    """Topic T (1 queue) with 20 messages, group G's offset 10 saved."""
    b = Broker(root, small_config(**SMALL))
    try:
        b.create_or_update_topic("T", 1, 1)
        for i in range(20):
            b.send_message("T", b"m%d" % i, queue_id=0)
        wait_all_dispatched(b)
        assert len(b.pull_message("G", "T", 0, 0, 10).messages) == 10  # G consumes (its pull creates G)
        b.commit_offset("G", "T", 0, 10)
    finally:
        b.shutdown()
    assert b.unsaved_at_shutdown == () and not (root / "abort").exists()


def _check_after_unclean_shutdown(root: Path) -> None:
    """The next start recovers as after a crash; every message is there, the saved offset is."""
    b = Broker(root, small_config(**SMALL))
    try:
        assert b.store.recovery_report.abnormal
        assert [bytes(m.body) for m in b.pull_message("G2", "T", 0, 0, 32).messages] == [b"m%d" % i for i in range(20)]
        assert b.query_offset("G", "T", 0) == 10  # what reached the file; 15 was lost, as reported
    finally:
        b.shutdown()
    assert b.unsaved_at_shutdown == () and not (root / "abort").exists()  # a clean one removes it again


def test_broker_shutdown_names_the_file_it_could_not_save_and_keeps_abort(small_fs: Path) -> None:
    root = small_fs / "store"
    _seed(root)
    b = Broker(root, small_config(**SMALL))
    try:
        fill(small_fs / "filler")
        b.commit_offset("G", "T", 0, 15)
    finally:
        b.shutdown()
    assert len(b.unsaved_at_shutdown) == 1, b.unsaved_at_shutdown
    assert f"cannot write {root}/config/consumerOffset.json" in b.unsaved_at_shutdown[0]
    assert (root / "abort").exists()
    (small_fs / "filler").unlink()
    _check_after_unclean_shutdown(root)


def _commit_over_the_wire(namesrv: str, offset: int) -> None:
    async def run() -> None:
        inst = MQClientInstance(namesrv)
        consumer = PullConsumer("G", inst)
        await consumer.start()
        try:
            (mq,) = await consumer.fetch_subscribe_queues("T")
            await consumer.update_consume_offset(mq, offset)
            assert await consumer.fetch_consume_offset(mq) == offset
        finally:
            await consumer.shutdown()
            await inst.shutdown()

    asyncio.run(run())


def test_mqbroker_sigterm_on_a_full_disk_exits_1_naming_the_file(small_fs: Path, tmp_path: Path) -> None:
    root = small_fs / "store"
    _seed(root)
    conf = tmp_path / "broker.conf"  # off the small disk, as mqbroker's output is
    conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL.items()))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "broker_core.mqbroker", "--store", str(root), "-c", str(conf),
                             "--host", "127.0.0.1", "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        namesrv = None
        for line in proc.stdout:
            if "The Name Server boot success" in line:
                namesrv = line.split("address ")[1].split()[0]
            if "The broker[" in line and "boot success" in line:
                break
        assert namesrv, proc.stderr.read() if proc.poll() is not None and proc.stderr else "no name server"
        fill(small_fs / "filler")
        _commit_over_the_wire(namesrv, 15)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err[-2000:])
    assert "shut down cleanly" not in out.replace("did NOT shut down cleanly", ""), out
    said = [ln for ln in err.splitlines() if ln.startswith("mqbroker: ")]
    assert said == [f"mqbroker: not saved at shutdown: disk full: cannot write {root}/config/consumerOffset.json: "
                    "No space left on device"], err[-2000:]
    assert "Traceback" not in err
    assert (root / "abort").exists()
    (small_fs / "filler").unlink()
    _check_after_unclean_shutdown(root)
