"""A playbook's ``broker.config`` of a key that takes effect at the broker's next start (its identity,
ports, the ACL keys) converges: the second run is ``ok``, and a restart runs with the file's values.

Why: updateBrokerConfig -n writes those keys only to the broker's ``-c`` file, and the running broker
keeps its own until a restart; the plan compared with the running values, so every run said
``changed broker broker-k config brokerClusterName: DefaultCluster -> C2`` although the file already
said C2, and a ``when: x.changed`` restart step fired on every run. Apache's getBrokerConfig reports
an updated key at once (Configuration.update sets every key on the config objects); ours keeps the
running values there (mqadmin -b, explainAcl, the dashboard and other brokers' gRPC routes read them)
and answers the file's next-start values to the plan (GET_BROKER_CONFIG with ``nextStart=true``).

Also: a YAML ``-c`` file keeps its comments and lines on an update (it was re-dumped, sorted, with
``listenPort: '0'`` quoted), and its values stay numbers and booleans.
"""

from __future__ import annotations

import re

import yaml

from tests.net.net_util import run_mqadmin as mqadmin

from .conftest import Playbooks
from .test_broker_config_file import ONE_KEY, Mqbroker

IDENT = ONE_KEY % "brokerClusterName: C2, authenticationWhitelist: 10.0.0.1"

def _config(b: Mqbroker) -> dict[str, str]:
    """getBrokerConfig -n -b as a mapping (an empty value is one too)."""
    r = mqadmin("getBrokerConfig", "-n", b.namesrv, "-b", b.addr)
    assert r.returncode == 0, r.stderr
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)[ \t]+=[ \t]*(.*)$", r.stdout, re.M)}


RESTART_WHEN_CHANGED = """name: set and restart when changed
targets:
  c: {namesrv: "{{ namesrv }}"}
  here: {store: "{{ here }}", create: true}
steps:
  - name: set ident
    broker.config: {target: c, config: {brokerClusterName: C2}}
    register: ident
  - name: restart
    shell: {target: here, cmd: "true"}
    when: ident.changed
"""


def test_a_start_only_or_acl_key_written_to_the_file_is_no_change_on_the_next_run(pb: Playbooks, tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# broker k\nbrokerClusterName=DefaultCluster\nbrokerName=broker-k\n")
    store = tmp_path / "store"
    book = pb.write("ident.yml", IDENT)
    b = Mqbroker(store, conf)
    try:
        first = pb.run(book, "-e", f"namesrv={b.namesrv}")
        assert first.code == 0 and first.doc["changed"] == 1, first.stdout
        changes = first.doc["steps"][0]["changes"]
        assert {(c["field"], c["old"], c["new"]) for c in changes} == {
            ("brokerClusterName", "DefaultCluster", "C2"), ("authenticationWhitelist", "", "10.0.0.1")}
        assert all("takes effect at its next start" in c["what"] for c in changes), changes
        assert conf.read_text() == ("# broker k\nbrokerClusterName=C2\nbrokerName=broker-k\n"
                                    "authenticationWhitelist=10.0.0.1\n")
        second = pb.run(book, "-e", f"namesrv={b.namesrv}")
        assert second.code == 0 and second.doc["changed"] == 0, second.stdout
        assert second.doc["steps"][0]["status"] == "ok"
        # the running broker keeps its identity until the restart: getBrokerConfig and its registration
        live = _config(b)
        assert (live["brokerClusterName"], live["authenticationWhitelist"]) == ("DefaultCluster", ""), live
        assert "DefaultCluster" in mqadmin("clusterList", "-n", b.namesrv).stdout
        # a restart step guarded by the change does not fire again
        guarded = pb.write("guarded.yml", RESTART_WHEN_CHANGED)
        again = pb.run(guarded, "-e", f"namesrv={b.namesrv}", "-e", f"here={tmp_path / 'here'}")
        assert again.code == 0 and again.doc["changed"] == 0, again.stdout
        assert [s["status"] for s in again.doc["steps"]] == ["ok", "skipped"], again.stdout
        # back to the running value: that is a change again (the file says C2), and then none
        back = pb.write("back.yml", ONE_KEY % "brokerClusterName: DefaultCluster")
        assert pb.run(back, "-e", f"namesrv={b.namesrv}").doc["changed"] == 1
        assert "brokerClusterName=DefaultCluster\n" in conf.read_text()
        assert pb.run(back, "-e", f"namesrv={b.namesrv}").doc["changed"] == 0
        assert pb.run(book, "-e", f"namesrv={b.namesrv}").doc["changed"] == 1
    finally:
        b.stop()
    b = Mqbroker(store, conf)
    try:
        live = _config(b)
        assert (live["brokerClusterName"], live["authenticationWhitelist"]) == ("C2", "10.0.0.1"), live
        assert "C2" in mqadmin("clusterList", "-n", b.namesrv).stdout
        after = pb.run(book, "-e", f"namesrv={b.namesrv}")
        assert after.code == 0 and after.doc["changed"] == 0, after.stdout
    finally:
        b.stop()


YAML_CONF = """# yaml broker config
brokerClusterName: DefaultCluster
brokerName: broker-y   # the yaml one
listenPort: 0
grpcServerPort: 0

fileReservedTime: 72
"""


def test_a_yaml_config_file_keeps_its_comments_and_typed_values_on_update(tmp_path) -> None:
    conf = tmp_path / "y.yaml"
    conf.write_text(YAML_CONF)
    store = tmp_path / "store"
    b = Mqbroker(store, conf)
    try:
        assert b.update("fileReservedTime", "30").returncode == 0
        r = mqadmin("updateNamesrvConfig", "-n", b.namesrv, "-k", "enableAllTopicList", "-v", "false")
        assert r.returncode == 0, r.stdout + r.stderr
        assert b.update("brokerClusterName", "yes").returncode == 0  # YAML 1.1 reads a plain yes as true
        assert conf.read_text() == ("# yaml broker config\nbrokerClusterName: 'yes'\n"
                                    "brokerName: broker-y   # the yaml one\nlistenPort: 0\ngrpcServerPort: 0\n\n"
                                    "fileReservedTime: 30\nenableAllTopicList: false\n")
        loaded = yaml.safe_load(conf.read_text())
        assert (loaded["fileReservedTime"], loaded["enableAllTopicList"], loaded["listenPort"]) == (30, False, 0)
    finally:
        b.stop()
    b = Mqbroker(store, conf)
    try:
        live = _config(b)
        assert (live["fileReservedTime"], live["brokerClusterName"]) == ("30", "yes"), live
    finally:
        b.stop()


STORE_IDENT = """name: store ident
targets:
  s: {store: "{{ store }}", config: "{{ config }}", create: true}
steps:
  - name: set ident
    broker.config: {target: s, config: {brokerClusterName: C2}}
"""


def test_the_same_on_a_store_target_with_its_config_file(pb: Playbooks, tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# s\nbrokerName=broker-s\n")
    book = pb.write("store.yml", STORE_IDENT)
    args = ("-e", f"store={tmp_path / 'store'}", "-e", f"config={conf}")
    first = pb.run(book, *args)
    assert first.code == 0 and first.doc["changed"] == 1, first.stdout
    assert "takes effect at its next start" in first.doc["steps"][0]["changes"][0]["what"]
    assert conf.read_text() == "# s\nbrokerName=broker-s\nbrokerClusterName=C2\n"
    second = pb.run(book, *args)
    assert second.code == 0 and second.doc["changed"] == 0, second.stdout
