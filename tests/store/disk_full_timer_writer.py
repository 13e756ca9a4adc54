"""Writer for the timer's disk-full test (``python disk_full_timer_writer.py ROOT``).

Opens a Broker (with its timer wheel, 38 MB sparse by default, and timer log) on a small filesystem,
then sends delayed and plain messages and runs the timer until the store has refused 20 puts, the
disk being full to its last block (diskSpaceWarningLevelRatio 100). Prints ``delayed <n>``,
``refused <n>``, ``timer-full <n>`` (ticks the timer refused for want of space), then sends one more
delayed message due in two days on a disk filled to its last block, whose wheel slot lies on a page nothing has touched yet, and prints
``far-delayed refused <why>`` (or ``far-delayed stored``), and ``closed`` after a clean shutdown. A SIGBUS (a write into, or on tmpfs even a read of, a hole of a mapped
file with no block behind it) ends it with a signal instead.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: small_fs

from small_fs import fill  # noqa: E402

from broker_core.broker.broker import Broker  # noqa: E402
from broker_core.broker.broker_config import BrokerConfig  # noqa: E402
from broker_core.broker.errors import BrokerError  # noqa: E402
from broker_core.store.codec.properties import PROPERTY_TIMER_DELIVER_MS  # noqa: E402
from broker_core.store.mapped_file import DiskFullError  # noqa: E402


def main(root: str) -> None:
    config = BrokerConfig.from_properties({
        "mappedFileSizeCommitLog": str(256 * 1024), "diskSpaceWarningLevelRatio": "100",
        "diskMaxUsedSpaceRatio": "75", "cleanResourceInterval": str(10**9), "maxHashSlotNum": "64",
        "maxIndexNum": "64", "mappedFileSizeConsumeQueue": "320"}, root)
    broker = Broker(root, config, audit_log_path=None)
    broker.create_or_update_topic("Later", 1, 1)
    delayed = refused = timer_full = 0
    i = 0
    while refused < 20 and i < 100_000:
        i += 1
        try:
            broker.send_message("Later", b"d" * 200, {PROPERTY_TIMER_DELIVER_MS: str(int(time.time() * 1000) + 600_000
                                                                                    + i * 1000)})
            delayed += 1
            broker.send_message("Later", b"f" * 3000)
        except BrokerError:
            refused += 1
        try:
            broker.tick()  # the timer takes the delayed messages into its log and wheel
        except DiskFullError:
            timer_full += 1
    print(f"delayed {delayed}")
    print(f"refused {refused}")
    print(f"timer-full {timer_full}")
    fill(Path(root).parent / "filler")  # not one block left, not even for a small message
    try:  # the send's congestion check reads that slot before the full disk refuses the put
        broker.send_message("Later", b"far", {PROPERTY_TIMER_DELIVER_MS: str(int(time.time() * 1000)
                                                                             + 2 * 86_400_000)})
        print("far-delayed stored")
    except BrokerError as refused_far:
        print(f"far-delayed refused {refused_far}")
    broker.shutdown()
    print("closed")


if __name__ == "__main__":
    main(sys.argv[1])
