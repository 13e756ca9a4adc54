"""updateBrokerConfig over the name server writes the broker's config file (brokerConfigPath), and
the playbook's --check promises only what the broker takes.

Why: ``mqbroker -c broker.conf`` applied ``updateBrokerConfig -n`` (and a playbook's ``broker.config``
on a ``namesrv:`` target) in the running process only; after a restart maxMessageSize and
flushDiskType were back and ``--check`` reported the change again. Apache's BrokerStartup records the
-c path (BrokerPathConfigHelper) and its Configuration persists every update there. A broker started
without -c has no file: it refuses the ACL keys and a new identity or port, and --check said
"changed" for them anyway.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.net.net_util import run_mqadmin as mqadmin

from .conftest import Playbooks
from .test_cluster import Cluster

CONF = """# the orders broker: keep these comments
brokerClusterName=OrdersCluster
brokerName=broker-p
maxMessageSize = 4194304
# flushing
flushDiskType=ASYNC_FLUSH
"""

CFG = """name: cfg
targets:
  c: {namesrv: "{{ namesrv }}"}
steps:
  - name: cfg
    broker.config: {target: c, config: {maxMessageSize: "{{ size }}", flushDiskType: SYNC_FLUSH}}
"""

ONE_KEY = """name: one key
targets:
  c: {namesrv: "{{ namesrv }}"}
steps:
  - name: set it
    broker.config: {target: c, config: {%s}}
"""


class Mqbroker(Cluster):
    """The examples' mqbroker (test_cluster.Cluster) with its broker config read and updated over -n."""

    @property
    def addr(self) -> str:
        return self.broker_addr

    def config(self) -> dict[str, str]:
        r = mqadmin("getBrokerConfig", "-n", self.namesrv, "-b", self.addr)
        assert r.returncode == 0, r.stderr
        return {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)\s+=\s+(.*)$", r.stdout, re.M)}

    def update(self, key: str, value: str) -> subprocess.CompletedProcess[str]:
        return mqadmin("updateBrokerConfig", "-n", self.namesrv, "-b", self.addr, "-k", key, "-v", value)


def test_an_update_over_namesrv_is_written_to_the_config_file_and_kept_after_a_restart(
        pb: Playbooks, tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    store = tmp_path / "store"
    cfg = pb.write("cfg.yml", CFG)
    b = Mqbroker(store, conf)
    try:
        assert "config " + str(conf.resolve()) in "\n".join(b.lines)  # the boot line names it
        assert b.config()["brokerConfigPath"] == str(conf.resolve())
        refused = b.update("brokerConfigPath", str(tmp_path / "other.conf"))
        assert refused.returncode == 1 and "black list" in refused.stderr, refused.stderr
        first = pb.run(cfg, "-e", f"namesrv={b.namesrv}", "-e", "size=1048576")
        assert first.code == 0 and first.doc["changed"] == 1, first.stdout
        # a new brokerName is for the next start: written to the file, the broker keeps its name
        renamed = b.update("brokerName", "broker-q")
        assert renamed.returncode == 0, renamed.stderr
        live = b.config()
        assert (live["maxMessageSize"], live["flushDiskType"], live["brokerName"]) == (
            "1048576", "SYNC_FLUSH", "broker-p")
        assert conf.read_text() == ("# the orders broker: keep these comments\nbrokerClusterName=OrdersCluster\n"
                                    "brokerName=broker-q\nmaxMessageSize=1048576\n# flushing\n"
                                    "flushDiskType=SYNC_FLUSH\n")
    finally:
        b.stop()
    b = Mqbroker(store, conf)
    try:
        again = b.config()
        assert (again["maxMessageSize"], again["flushDiskType"], again["brokerName"]) == (
            "1048576", "SYNC_FLUSH", "broker-q")
        check = pb.run(cfg, "-e", f"namesrv={b.namesrv}", "-e", "size=1048576", "--check")
        assert check.code == 0 and check.doc["changed"] == 0, check.stdout
        # an ACL key goes to the file for the next start (as mqadmin --store --config does), not live
        acl = pb.write("acl.yml", ONE_KEY % "authenticationEnabled: true")
        assert pb.run(acl, "-e", f"namesrv={b.namesrv}", "--check").doc["changed"] == 1
        assert pb.run(acl, "-e", f"namesrv={b.namesrv}").code == 0
        assert b.config()["authenticationEnabled"] == "false"
        assert conf.read_text().endswith("flushDiskType=SYNC_FLUSH\nauthenticationEnabled=true\n")
    finally:
        b.stop()


def test_a_broker_without_config_file_refuses_start_only_and_acl_keys_and_check_says_so(
        pb: Playbooks, tmp_path: Path) -> None:
    b = Mqbroker(tmp_path / "store")
    try:
        assert "config none" in "\n".join(b.lines)
        assert "brokerConfigPath" not in b.config()
        for key, value in (("listenPort", "35270"), ("authenticationEnabled", "true")):
            book = pb.write(f"{key}.yml", ONE_KEY % f"{key}: {value}")
            for mode in (("--check",), ()):
                r = pb.run(book, "-e", f"namesrv={b.namesrv}", *mode)
                assert r.code == 1, (mode, r.stdout)
                message = r.doc["steps"][0]["message"]
                assert f"{key} cannot be changed on a running broker" in message, (mode, message)
                assert "set it in the broker's config file and restart the broker" in message
        assert b.config()["authenticationEnabled"] == "false"
        # the value it has is no change, in --check and run alike
        same = pb.write("same.yml", ONE_KEY % f"listenPort: {b.addr.rsplit(':', 1)[1]}")
        assert pb.run(same, "-e", f"namesrv={b.namesrv}", "--check").code == 0
        # other keys still change live
        assert b.update("maxMessageSize", "1048576").returncode == 0
        assert b.config()["maxMessageSize"] == "1048576"
    finally:
        b.stop()


START = """name: start
targets:
  b: {store: "{{ store }}", config: "{{ config | default('') }}", create: true}
steps:
  - name: start the broker
    broker.start: {target: b, timeout: 60}
"""

STOP = """name: stop
targets:
  b: {store: "{{ store }}"}
steps:
  - name: stop the broker
    broker.stop: {target: b, timeout: 60}
"""


def test_broker_start_says_its_config_and_refuses_to_drop_the_one_it_last_started_with(
        pb: Playbooks, tmp_path: Path) -> None:
    """A cluster broker restarted by broker.start without its config came back as DefaultCluster/broker-a
    with an embedded name server on 9876: out of its cluster, and the step said only "started"."""
    from playbooks.actions.broker_process import lock_owner

    store, conf = tmp_path / "store", tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=OrdersCluster\nbrokerName=broker-r\nlistenPort=0\nnamesrvPort=0\n")
    start, stop = pb.write("start.yml", START), pb.write("stop.yml", STOP)
    try:
        r = pb.run(start, "-e", f"store={store}", "-e", f"config={conf}")
        assert r.code == 0, r.stdout
        assert r.doc["steps"][0]["message"].endswith(f"on {store} with config {conf}"), r.stdout
        assert pb.run(stop, "-e", f"store={store}").code == 0
        for mode in (("--check",), ()):
            r = pb.run(start, "-e", f"store={store}", *mode)
            assert r.code == 1, (mode, r.stdout)
            message = r.doc["steps"][0]["message"]
            assert f"the broker on {store} last started with config {conf.resolve()}" in message, message
            assert f"give the target config: {conf.resolve()}" in message
            assert lock_owner(store) is None  # nothing started
    finally:
        pb.run(stop, "-e", f"store={store}")
    fresh = tmp_path / "fresh"
    r = pb.run(start, "-e", f"store={fresh}", "--check")
    assert r.code == 0 and r.doc["steps"][0]["message"] == (
        f"would start mqbroker on {fresh} with no config file (RocketMQ's defaults)"), r.stdout
