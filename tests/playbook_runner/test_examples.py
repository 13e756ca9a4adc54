"""Every playbook in playbooks/examples/ runs here: on a store directory, and (drain, recover) on an
SSH host — this machine through a real OpenSSH server. Cluster targets wait for remote mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqadmin.embedded import EmbeddedAdmin
from playbooks.actions.broker_process import lock_owner

from .conftest import EXAMPLES, REPO, Playbooks, seed_store, ssh_vars
from .sshd import Sshd
from .test_actions import _corrupt_first_cq_unit
from .test_ssh import stop_broker_by_pid

pytestmark = pytest.mark.timeout(600)


def test_every_example_is_valid(pb: Playbooks) -> None:
    files = sorted(EXAMPLES.glob("*.yml"))
    assert [f.name for f in files] == ["drain-broker.yml", "onboard-team.yml", "recover-after-crash.yml",
                                       "reset-group-to-time.yml", "rotate-user.yml"]
    for f in files:
        r = pb.check(f)
        assert r.code == 0, (f, r.stderr)


def test_rotate_user(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert pb.run(EXAMPLES / "onboard-team.yml", "-e", f"store={store}", "-e", "password=Old-Password-1",
                  "-e", "create=true").code == 0
    env = {"ORDERS_APP_PASSWORD": "New-Password-2"}
    first = pb.run(EXAMPLES / "rotate-user.yml", "-e", f"store={store}", env=env)
    assert first.code == 0, first.stdout
    assert [s["status"] for s in first.doc["steps"]] == ["changed", "changed", "changed", "changed", "ok", "ok"]
    assert "New-Password-2" not in first.stdout and "New-Password-2" not in pb.log.read_text()
    with EmbeddedAdmin(store) as admin:
        assert admin.get_user("orders-app").password == "New-Password-2"
        entries = {e.resource.key: sorted(a.value for a in e.actions)
                   for p in admin.get_acl("User:orders-app").policies for e in p.entries}
        assert entries == {"Group:orders-*": ["Sub"], "Topic:orders-events": ["Pub"]}
    second = pb.run(EXAMPLES / "rotate-user.yml", "-e", f"store={store}", env=env)
    assert second.code == 0 and second.doc["changed"] == 0
    missing = pb.run(EXAMPLES / "rotate-user.yml", "-e", f"store={store}", env={"ORDERS_APP_PASSWORD": ""})
    assert missing.code == 0  # set but empty is a value (user.ensure leaves the password alone when blank)


def test_rotate_user_without_the_secret_is_invalid(pb: Playbooks, tmp_path: Path) -> None:
    env_without = {k: v for k, v in os.environ.items() if k != "ORDERS_APP_PASSWORD"}
    from typer.testing import CliRunner

    from mqadmin.app import app

    r = CliRunner().invoke(app, ["playbook", "run", str(EXAMPLES / "rotate-user.yml"), "-e", f"store={tmp_path}/s",
                                 "--log", str(tmp_path / "l.jsonl")], env={**env_without, "ORDERS_APP_PASSWORD": None})
    assert r.exit_code == 2
    assert "environment variable ORDERS_APP_PASSWORD is not set" in r.stderr


def test_reset_group_to_time_plans_first(pb: Playbooks, tmp_path: Path) -> None:
    before = int(time.time() * 1000) - 1000
    store = seed_store(tmp_path / "store", consumed=10)
    args = ["-e", f"store={store}", "-e", "group=orders-billing", "-e", "topic=orders-events",
            "-e", f"timestamp={before}"]
    refused = pb.run(EXAMPLES / "reset-group-to-time.yml", *args, "-e", "max_reconsume=5")
    assert refused.code == 1
    assert refused.doc["steps"][1]["message"] == "assertion failed: plan.reconsume <= max_reconsume | int"
    plan = refused.doc["steps"][0]
    assert plan["status"] == "changed" and [(c["old"], c["new"]) for c in plan["changes"]] == [(10, 0), (10, 0)]
    with EmbeddedAdmin(store) as admin:
        assert [r.consumer_offset for r in admin.consumer_progress("orders-billing").rows] == [10, 10]

    applied = pb.run(EXAMPLES / "reset-group-to-time.yml", *args)
    assert applied.code == 0, applied.stdout
    assert [s["status"] for s in applied.doc["steps"]] == ["changed", "ok", "changed"]
    with EmbeddedAdmin(store) as admin:
        assert [r.consumer_offset for r in admin.consumer_progress("orders-billing").rows] == [0, 0]
    again = pb.run(EXAMPLES / "reset-group-to-time.yml", *args)
    assert again.code == 0
    assert [s["status"] for s in again.doc["steps"]] == ["ok", "ok", "skipped"] and again.doc["changed"] == 0


def test_drain_broker(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "store", consumed=10)
    args = ["-e", f"store={store}", "-e", "groups=orders-billing", "-e", "lag_timeout=5", *ssh_vars(sshd)]
    r = pb.run(EXAMPLES / "drain-broker.yml", *args)
    assert r.code == 0, r.stdout
    assert [(s["target"], s["status"]) for s in r.doc["steps"]] == [("admin", "skipped"), ("admin", "changed"),
                                                                    ("admin", "ok"), ("host", "ok")]
    assert r.doc["steps"][3]["message"] == f"no broker holds {store}"
    with EmbeddedAdmin(store) as admin:
        assert admin.topic_info("orders-events").perm == 4
    assert pb.run(EXAMPLES / "drain-broker.yml", *args).doc["changed"] == 0


def test_drain_stops_when_consumers_lag(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "store", consumed=7)
    r = pb.run(EXAMPLES / "drain-broker.yml", "-e", f"store={store}", "-e", "groups=orders-billing",
               "-e", "lag_timeout=1", *ssh_vars(sshd))
    assert r.code == 1
    assert [s["status"] for s in r.doc["steps"]] == ["skipped", "changed", "failed"]
    assert r.doc["steps"][2]["message"] == "timed out after 1s: lag of orders-billing is 6 (want <= 0)"


def test_recover_after_crash(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "store", consumed=10)
    # a cluster broker: restarted without its config it came back as DefaultCluster/broker-a
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=OrdersCluster\nbrokerName=broker-r\nlistenPort=0\nnamesrvPort=0\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    broker = subprocess.Popen([sys.executable, "-m", "broker_core.mqbroker", "--store", str(store), "-c", str(conf)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        # started = holds the lock AND has opened the store (abort is written after recovery, which
        # follows taking the lock): killing in between would crash a broker that never ran
        while not (lock_owner(store) == broker.pid and (store / "abort").exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lock_owner(store) == broker.pid, "mqbroker did not start"
        os.kill(broker.pid, signal.SIGKILL)  # the crash
        broker.wait(timeout=30)
        assert (store / "abort").exists()
        _corrupt_first_cq_unit(store, "orders-events")

        r = pb.run(EXAMPLES / "recover-after-crash.yml", "-e", f"store={store}", "-e", f"config={conf}",
                   "-e", "groups=orders-billing", "-e", "lag_timeout=30", *ssh_vars(sshd))
        assert r.code == 0, r.stdout
        steps = r.doc["steps"]
        assert [(s["status"], s.get("ignored", False)) for s in steps] == [
            ("ok", False), ("failed", True), ("changed", False), ("ok", False), ("changed", False), ("ok", False)]
        assert "verifyStore found 1 mismatch(es)" in steps[1]["message"]
        assert steps[2]["message"] == "rebuilt cq,index,offsets with Spark (1 mismatch(es))"
        assert steps[4]["message"].endswith(f"on {store} with config {conf}"), steps[4]["message"]
        pid = lock_owner(store)
        assert pid is not None and "mqbroker" in Path(f"/proc/{pid}/cmdline").read_text()
        boot = [line for line in (store / "mqbroker.log").read_text().splitlines() if "The broker[" in line]
        assert "The broker[broker-r, " in boot[-1] and "(cluster OrdersCluster, " in boot[-1], boot  # in its cluster
        with EmbeddedAdmin(store) as admin:
            assert admin.verify_store().ok
            assert sum(q.max_offset for q in admin.topic_status("orders-events")) == 20
    finally:
        if broker.poll() is None:
            broker.kill()
        stop_broker_by_pid(store)


