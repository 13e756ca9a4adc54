"""mqbroker as a real process: it owns the store, mqadmin sees that, SIGTERM shuts it down cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from mqadmin.app import app

FREE_PORTS = ["--listenPort", "0", "--namesrvPort", "0"]  # never the fixed 9876/10911 in tests


def _start(store: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), *FREE_PORTS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    lines = [proc.stdout.readline() if proc.stdout else "" for _ in range(2)]  # name server, then broker
    assert "The broker[" in lines[1] and "boot success" in lines[1], \
        (lines, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    assert time.monotonic() < deadline
    return proc


def test_running_broker_holds_the_store_and_stops_cleanly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = _start(store)
    try:
        assert (store / "abort").exists()
        runner = CliRunner()
        changed = runner.invoke(app, ["updateTopic", "-c", "DefaultCluster", "-t", "T1", "--store", str(store)])
        assert changed.exit_code == 1
        assert "-n" in changed.output and "running broker" in changed.output
        # inspection still works beside it (read-only, no lock)
        listed = runner.invoke(app, ["topicList", "--store", str(store)])
        assert listed.exit_code == 0, listed.output
        second = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), *FREE_PORTS],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "locked" in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "shut down cleanly" in out
    assert not (store / "abort").exists()
    # the store is free again
    runner = CliRunner()
    result = runner.invoke(app, ["updateTopic", "-c", "DefaultCluster", "-t", "T1", "--store", str(store)])
    assert result.exit_code == 0, result.output


def test_bad_config_is_one_line_and_exit_1(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("flushIntervalCommitLog=soon\n")
    result = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "-c", str(conf), "--store",
                             str(tmp_path / "s"), *FREE_PORTS], capture_output=True, text=True, timeout=60,
                            env=os.environ)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"mqbroker: config file {conf}: flushIntervalCommitLog: expected an integer, "
                                     "got 'soon'")  # the file too: a key alone left the operator guessing which


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    """"Address already in use" alone did not say whether the name server's or the broker's port was taken."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        for flag, what in (("--namesrvPort", "the name server"), ("--listenPort", "the broker")):
            ports = {"--namesrvPort": "0", "--listenPort": "0", flag: str(port)}
            done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(tmp_path / "s"),
                                   "--grpc-port", "0", *[x for kv in ports.items() for x in kv]],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 1 and done.stderr.strip().splitlines() == [
                f"mqbroker: cannot listen for {what} on 127.0.0.1:{port}: Address already in use"], done.stderr


def test_an_apache_store_without_its_config_is_one_line(tmp_path: Path) -> None:
    """The usual first mistake with a copied Apache store: mqbroker without its -c. Its index files are of
    another geometry than the defaults; this was a raw traceback of IndexFileError."""
    from golden_helpers import copy_golden_store

    store = copy_golden_store("store-basic", tmp_path / "store")
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), *FREE_PORTS,
                           "--grpc-port", "0"], capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"mqbroker: cannot open store {store}: index file {store}/index/") and \
        lines[0].endswith("; give -c with the store's maxHashSlotNum/maxIndexNum"), lines


def _refused(tmp_path: Path, *args: str, conf: str | bytes | None = None) -> str:
    """mqbroker's one stderr line for a refused start (exit 1, no traceback)."""
    extra: list[str] = []
    if conf is not None:
        path = tmp_path / "broker.conf"
        path.write_bytes(conf if isinstance(conf, bytes) else conf.encode())
        extra = ["-c", str(path)]
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(tmp_path / "s"), *extra,
                           *args], capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_name_server_address_without_a_valid_port_is_one_line(tmp_path: Path) -> None:
    """-n 127.0.0.1 was a ValueError traceback ("invalid literal for int()") from the registration."""
    for addr in ("127.0.0.1", "127.0.0.1:abc", "127.0.0.1:9876;127.0.0.1:99999"):
        line = _refused(tmp_path, "--broker-only", "-n", addr, "--listenPort", "0", "--grpc-port", "0")
        assert line.startswith(f"mqbroker: The Name Server Address[{addr}] (-n) illegal: "), line
    line = _refused(tmp_path, "--broker-only", "--listenPort", "0", "--grpc-port", "0",
                    conf="namesrvAddr=localhost\n")
    assert line.startswith("mqbroker: The Name Server Address[localhost] (namesrvAddr in ") and \
        "broker.conf) illegal: 'localhost' is not host:port" in line, line


def test_ports_out_of_range_are_one_line_naming_the_key(tmp_path: Path) -> None:
    """listenPort=70000 was an OverflowError traceback; grpcServerPort=70000 served on 4464."""
    conf = tmp_path / "broker.conf"
    assert _refused(tmp_path, *FREE_PORTS, "--grpc-port", "0", conf="listenPort=70000\n") == \
        f"mqbroker: config file {conf}: listenPort=70000: must be a port number in [0, 65535]"
    assert _refused(tmp_path, *FREE_PORTS, conf="grpcServerPort=70000\n") == \
        f"mqbroker: config file {conf}: grpcServerPort=70000: must be a port number in [0, 65535]"
    assert _refused(tmp_path, "--listenPort", "0", "--namesrvPort", "99999") == \
        "mqbroker: --namesrvPort 99999: must be a port number in [0, 65535]"
    assert _refused(tmp_path, "--listenPort", "0", "--grpc-port", "0", conf="namesrvPort=-3\n") == \
        f"mqbroker: config file {conf}: namesrvPort=-3: must be a port number in [0, 65535]"
    assert _refused(tmp_path, "--listenPort", "-1", "--namesrvPort", "0") == \
        "mqbroker: --listenPort -1: must be a port number in [0, 65535]"
    assert _refused(tmp_path, "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", "70000") == \
        "mqbroker: --grpc-port 70000: must be a port number in [0, 65535]"


def test_config_refusals_are_one_line(tmp_path: Path) -> None:
    assert _refused(tmp_path, *FREE_PORTS, conf="brokerRole=SLAVE\nbrokerId=0\n") == \
        f"mqbroker: config file {tmp_path / 'broker.conf'}: Slave's brokerId must be > 0 (brokerRole=SLAVE, brokerId=0)"
    assert _refused(tmp_path, *FREE_PORTS, conf="brokerIP1=no-such-host.invalid\n").startswith(
        f"mqbroker: config file {tmp_path / 'broker.conf'}: brokerIP1=no-such-host.invalid: cannot resolve the host name")
    assert _refused(tmp_path, *FREE_PORTS, "--host", "no-such-host.invalid").startswith(
        "mqbroker: --host no-such-host.invalid: cannot resolve the host name")
    assert _refused(tmp_path, *FREE_PORTS, conf=b"regionId=\\u12\n").endswith(
        "broker.conf:1: malformed \\uxxxx escape: \\u12")


def test_grpc_time_limits_out_of_range_are_one_line_naming_the_key(tmp_path: Path) -> None:
    """The gRPC endpoint's long polling and invisible time limits (ProxyConfig's keys) are read from the
    file: a minimum above its maximum, or a negative minimum, is refused at start rather than making
    every receive wait the maximum or refusing every invisible duration."""
    conf = tmp_path / "broker.conf"
    assert _refused(tmp_path, *FREE_PORTS, conf="grpcClientConsumerMinLongPollingTimeoutMillis=-1\n") == (
        f"mqbroker: config file {conf}: grpcClientConsumerMinLongPollingTimeoutMillis must not be negative, got -1")
    assert _refused(tmp_path, *FREE_PORTS, conf="grpcClientConsumerMaxLongPollingTimeoutMillis=4000\n") == (
        f"mqbroker: config file {conf}: grpcClientConsumerMaxLongPollingTimeoutMillis must be at least "
        "grpcClientConsumerMinLongPollingTimeoutMillis (5000), got 4000")
    assert _refused(tmp_path, *FREE_PORTS, conf="minInvisibleTimeMillsForRecv=50000\nmaxInvisibleTimeMills=40000\n"
                    ) == (f"mqbroker: config file {conf}: maxInvisibleTimeMills must be at least "
                          "minInvisibleTimeMillsForRecv (50000) or 0 or less (no maximum), got 40000")
    assert _refused(tmp_path, *FREE_PORTS, conf="minInvisibleTimeMillsForRecv=soon\n") == (
        f"mqbroker: config file {conf}: minInvisibleTimeMillsForRecv: expected an integer, got 'soon'")


def test_latin1_config_and_host_name_start(tmp_path: Path) -> None:
    """A Latin-1 byte in a comment was a UnicodeDecodeError traceback; brokerIP1=localhost failed opening
    the store; a master's brokerId=1 registered it as a slave."""
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"# Configuraci\xf3n del broker\nbrokerName=b\xf31\nbrokerIP1=localhost\nbrokerId=1\n"
                     b"grpcServerPort=0\n")
    proc = subprocess.Popen([sys.executable, "-m", "broker_core.mqbroker", "-c", str(conf), "--store",
                             str(tmp_path / "s"), *FREE_PORTS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        lines = [proc.stdout.readline() if proc.stdout else "" for _ in range(2)]
        assert "The broker[b\u00f31, 127.0.0.1:" in lines[1] and "boot success" in lines[1], \
            (lines, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "brokerId=1 with brokerRole=ASYNC_MASTER" in err


def test_a_timer_wheel_of_the_wrong_length_is_one_line(tmp_path: Path) -> None:
    """A damaged (or truncated) timerwheel file was a raw TimerWheelError traceback out of mqbroker."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "timerwheel").write_bytes(bytes(1000))
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), *FREE_PORTS,
                           "--grpc-port", "0"], capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"mqbroker: cannot open store {store}: timer wheel {store}/timerwheel length 1000 "
                               "!= expected "), lines
    assert (store / "timerwheel").stat().st_size == 1000  # refused, not resized over


def test_a_timer_log_file_of_another_length_is_one_line(tmp_path: Path) -> None:
    """A timer log file of another length than the log's first was a raw TimerLogError traceback."""
    from golden_helpers import copy_golden_store, write_broker_conf

    store = copy_golden_store("store-timer", tmp_path / "store")
    (store / "timerlog" / f"{16384:020d}").write_bytes(bytes(100))
    conf = write_broker_conf("store-timer", tmp_path / "broker.conf")
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "-c", str(conf),
                           *FREE_PORTS, "--grpc-port", "0"], capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0] == (f"mqbroker: cannot open store {store}: {store}/timerlog/{16384:020d}: length 100 differs "
                        "from the 16384 bytes of 00000000000000000000, the first file of the timer log (its files "
                        "are all one size): one of them was truncated or extended")


def test_a_store_path_that_is_a_file_is_one_line_saying_so(tmp_path: Path) -> None:
    """--store naming a file (a typo'd path, a tarball) was refused with a message about
    config/deletedTopics.json "Not a directory", which sent the operator looking at config files."""
    afile = tmp_path / "store.tar"
    afile.write_bytes(b"not a store")
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "--store", str(afile), *FREE_PORTS,
                           "--grpc-port", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"mqbroker: cannot open store {afile}: it is a file, not a store directory"], done.stderr
    assert afile.read_bytes() == b"not a store"
