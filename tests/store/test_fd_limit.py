"""No file-descriptor exhaustion (issue 11 item 10).

Why: each mapped file held two descriptors (the open fd and mmap's duplicate), so a store with
~10,000 small files failed to open with a raw EMFILE. The fd is closed once mapped; a limit that is
still hit gives a clear error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from store_util import FakeClock, make_msg, small_config, small_config_file

from broker_core.store.message_store import MessageStore

FILES = 300
CHECK = """
import os, resource, sys
sys.path.insert(0, {tests!r})
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
from store_util import small_config, make_msg
from broker_core.store.message_store import MessageStore
for ro in (True, False):
    s = MessageStore({root!r}, small_config(), read_only=ro).open()
    n = len(os.listdir("/proc/self/fd"))
    if not ro:
        s.put_message(make_msg("Fd", 0, b"y" * 5000))  # a vectored write reopens one fd
        s.put_message(make_msg("Fd", 0, b"z" * 100))
    got = s.get_messages("Fd", 0, 0, 32)
    print(ro, n, len(s.commit_log.file_queue.files), got.status.value)
    s.shutdown()
"""


def test_store_with_many_files_opens_under_a_low_fd_limit(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    i = 0
    while len(store.commit_log.file_queue.files) < FILES:
        assert store.put_message(make_msg("Fd", i % 4, b"x" * 900, key=f"k{i}")).ok
        i += 1
    store.shutdown()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    code = CHECK.format(tests=str(Path(__file__).resolve().parent), limit=128, root=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-1500:]
    lines = [line.split() for line in res.stdout.splitlines()]
    assert [ln[0] for ln in lines] == ["True", "False"]
    for _ro, fds, files, status in lines:
        assert int(files) >= FILES and int(fds) < 64 and status == "FOUND"


def test_limit_hit_anyway_is_one_clear_error(tmp_path: Path) -> None:
    store = MessageStore(tmp_path, small_config(), clock=FakeClock(step=1)).open()
    for i in range(200):
        store.put_message(make_msg("Fd", 0, b"x" * 900, key=f"k{i}"))
    store.shutdown()
    conf = small_config_file(tmp_path.parent / "fd.conf")
    code = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_NOFILE, (9, 9))\n"
            "from typer.testing import CliRunner\nfrom mqadmin.app import app\n"
            f"r = CliRunner().invoke(app, ['topicList', '--store', {str(tmp_path)!r}, '--config', {str(conf)!r}])\n"
            "print(r.exit_code); print(r.stderr)")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    out = res.stdout.strip().splitlines()
    if out and out[0] == "0":
        return  # nothing needed more descriptors than that: fine as well
    assert out and out[0] == "1", res.stdout + res.stderr
    assert "Traceback" not in res.stdout and ("too many" in res.stdout.lower() or "ulimit" in res.stdout), res.stdout
