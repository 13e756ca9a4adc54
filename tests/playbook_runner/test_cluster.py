"""The examples against a running mqbroker (name server + broker on free ports), over the network.

They need remote mode (``mqadmin.transport.remoting`` and ``mqadmin.connect.open_remote_admin``);
without it every test here is skipped with that reason.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net.net_util import run_mqadmin

from .conftest import EXAMPLES, REPO, Playbooks, seed_store, ssh_vars
from .sshd import Sshd

REMOTE_MODE = all(importlib.util.find_spec(m) is not None for m in ("mqadmin.transport.remoting", "mqadmin.connect"))
pytestmark = pytest.mark.timeout(300)
needs_remote = pytest.mark.skipif(
    not REMOTE_MODE, reason="cluster targets need remote mode (mqadmin.transport.remoting, open_remote_admin), "
                            "which this build does not have yet")

_NAMESRV = re.compile(r"The Name Server boot success\. serializeType=JSON, address (\S+)")
_BROKER = re.compile(r"The broker\[(\S+), (\S+)\] boot success")


class Cluster:
    """``mqbroker --store`` with its name server, on free ports (``-c conf`` when given); stopped by PID."""

    def __init__(self, store: Path, conf: Path | None = None) -> None:
        cmd = [sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "--host", "127.0.0.1",
               "--listenPort", "0", "--namesrvPort", "0"] + (["-c", str(conf)] if conf else [])
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self.store = store
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self.namesrv = self.broker_addr = self.broker_name = ""
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                if m := _NAMESRV.search(line):
                    self.namesrv = m.group(1)
                if m := _BROKER.search(line):
                    self.broker_name, self.broker_addr = m.group(1), m.group(2)
                if self.namesrv and self.broker_addr:
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not ready.wait(60) or not (self.namesrv and self.broker_addr):
            self.stop()
            raise RuntimeError("mqbroker did not start:\n" + "\n".join(self.lines))
        deadline = time.monotonic() + 30  # registered with its name server right after it boots
        while self.broker_name not in run_mqadmin("clusterList", "-n", self.namesrv).stdout and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(seed_store(tmp_path / "store", consumed=10))
    try:
        yield c
    finally:
        c.stop()


def remote_admin(namesrv: str):  # noqa: ANN201 - an Admin (only importable with remote mode)
    from mqadmin.connect import open_remote_admin

    return open_remote_admin(namesrv)


@pytest.fixture
def empty_cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "empty-store")
    try:
        yield c
    finally:
        c.stop()


@needs_remote
def test_onboard_against_a_cluster(pb: Playbooks, empty_cluster: Cluster) -> None:
    cluster = empty_cluster
    text = (EXAMPLES / "onboard-team.yml").read_text().replace('store: "{{ store }}"', 'namesrv: "{{ namesrv }}"')
    text = "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("create:"))
    path = pb.write("onboard-cluster.yml", text)
    args = ["-e", f"namesrv={cluster.namesrv}", "-e", "password=Cluster-Pw-1"]
    check = pb.run(path, *args, "--check")
    assert check.code == 0, check.stdout
    assert check.doc["changed"] == 4, [(s["name"], s["status"], s["message"]) for s in check.doc["steps"]]
    with remote_admin(cluster.namesrv) as admin:
        assert "orders-app" not in [u.username for u in admin.list_users()]
    first = pb.run(path, *args)
    assert first.code == 0, first.stdout
    assert first.doc["changed"] == 4
    second = pb.run(path, *args)
    assert second.code == 0 and second.doc["changed"] == 0
    with remote_admin(cluster.namesrv) as admin:
        assert admin.topic_info("orders-events").queue_type == "BatchCQ"
        assert admin.get_sub_group("orders-billing") is not None
        assert admin.get_user("orders-app") is not None


@needs_remote
def test_rotate_and_reset_against_a_cluster(pb: Playbooks, cluster: Cluster) -> None:
    ns = ["-e", f"namesrv={cluster.namesrv}"]
    assert pb.run(EXAMPLES / "rotate-user.yml", *ns, env={"ORDERS_APP_PASSWORD": "Cluster-Pw-2"}).code == 0
    again = pb.run(EXAMPLES / "rotate-user.yml", *ns, env={"ORDERS_APP_PASSWORD": "Cluster-Pw-2"})
    assert again.code == 0 and again.doc["changed"] == 0
    args = [*ns, "-e", "group=orders-billing", "-e", "topic=orders-events", "-e", "timestamp=0"]
    applied = pb.run(EXAMPLES / "reset-group-to-time.yml", *args)
    assert applied.code == 0, applied.stdout
    assert [s["status"] for s in applied.doc["steps"]] == ["changed", "ok", "changed"]
    with remote_admin(cluster.namesrv) as admin:
        assert [r.consumer_offset for r in admin.consumer_progress("orders-billing").rows] == [0, 0]
    again = pb.run(EXAMPLES / "reset-group-to-time.yml", *args)
    assert again.doc["changed"] == 0


@needs_remote
def test_broker_config_against_a_cluster(pb: Playbooks, cluster: Cluster) -> None:
    text = f'''name: c
targets:
  c: {{namesrv: "{cluster.namesrv}"}}
steps:
  - broker.config: {{config: {{brokerPermission: 4}}}}
'''
    path = pb.write("c.yml", text)
    r = pb.run(path)
    assert r.code == 0, r.stdout
    assert [(c["field"], c["old"], c["new"]) for c in r.doc["steps"][0]["changes"]] == [("brokerPermission", "6", "4")]
    assert pb.run(path).doc["changed"] == 0


@needs_remote
def test_drain_a_running_broker(pb: Playbooks, cluster: Cluster, sshd: Sshd) -> None:
    """The real drain: write permission wiped over the network while the broker runs, lag checked,
    then the broker process stopped on its host over SSH."""
    args = ["-e", f"namesrv={cluster.namesrv}", "-e", f"broker={cluster.broker_name}",
            "-e", f"host_store={cluster.store}", "-e", "groups=orders-billing", "-e", "lag_timeout=10", *ssh_vars(sshd)]
    r = pb.run(EXAMPLES / "drain-broker.yml", *args)
    assert r.code == 0, r.stdout
    assert [(s["target"], s["status"]) for s in r.doc["steps"]] == [("admin", "changed"), ("admin", "skipped"),
                                                                    ("admin", "ok"), ("host", "changed")]
    assert {"what": f"topic orders-events route of broker {cluster.broker_name}", "field": "perm", "old": "RW-",
            "new": "R--"} in r.doc["steps"][0]["changes"]
    assert cluster.proc.wait(30) == 0  # stopped cleanly by the playbook


def test_unreachable_name_server_fails_the_step_with_one_clear_line(pb: Playbooks) -> None:
    text = "name: c\ntargets:\n  c: {namesrv: '127.0.0.1:1'}\nsteps:\n  - group.ensure: {group: g}\n"
    r = pb.run(pb.write("c.yml", text))
    assert r.code == 1
    message = r.doc["steps"][0]["message"]
    assert message.startswith("cannot connect to name server 127.0.0.1:1: connection refused") and "\n" not in message
