"""``broker.start`` with the broker's config brings it back into its cluster; ``broker.config`` on a store
target without ``config:`` is refused by ``playbook check``.

Why: the config file of a cluster broker names its name servers (``namesrvAddr``), but ``mqbroker -c``
(what broker.start runs) started an embedded name server and registered there: the broker came back out of
its cluster, with a private name server, the very thing giving ``config:`` was meant to avoid. And
``playbook check`` called a playbook valid whose ``broker.config`` step on a ``{store: DIR}`` target
without ``config:`` every run refuses ("needs the broker's config file"); ``--check`` refused it as
"cannot be changed on a running broker" where no broker runs. The table said only
``running: False -> True``, not which config the broker started with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from playbooks.actions.broker_process import LOG_NAME, lock_owner
from tests.net.net_util import Mqbroker, run_mqadmin
from tests.waiting import wait_for

from .conftest import Playbooks
from .test_ssh import stop_broker_by_pid

pytestmark = pytest.mark.timeout(300)

START = """name: start
targets:
  b: {store: "%s", config: "%s", create: true}
steps:
  - name: start the broker
    broker.start: {target: b, timeout: 60}
"""


def _listed(namesrv: str) -> dict[str, str]:
    """brokerName -> cluster, as ``mqadmin clusterList -n`` shows them (empty before any registers)."""
    r = run_mqadmin("clusterList", "-n", namesrv)
    if "no broker is registered" in r.stderr:
        return {}
    assert r.returncode == 0, r.stdout + r.stderr
    return {f[1]: f[0] for line in r.stdout.splitlines()[1:] if len(f := line.split()) > 1}


def test_broker_start_with_config_registers_with_the_files_name_server(pb: Playbooks, tmp_path: Path) -> None:
    ns = Mqbroker(tmp_path / "ns", "--namesrv-only", expect_broker=False)
    try:
        assert ns.namesrv_addr, ns.output()
        store, conf = tmp_path / "store", tmp_path / "broker.conf"
        # namesrvPort=0: before the fix the broker's embedded name server took a free port, never 9876
        conf.write_text(f"brokerClusterName=PB\nbrokerName=broker-s\nlistenPort=0\n"
                        f"namesrvAddr={ns.namesrv_addr}\nnamesrvPort=0\n")
        try:
            r = pb.run(pb.write("start.yml", START % (store, conf)), output="table")
            assert r.code == 0, r.stdout + r.stderr
            # the table names the config the broker started with, as the json message does
            assert "".join(f"with config {conf}".split()) in "".join(r.stdout.split()), r.stdout
            wait_for(lambda: _listed(ns.namesrv_addr or "").get("broker-s") == "PB",
                     "broker-s registered in cluster PB at the config's name server", 30)
            log = (store / LOG_NAME).read_text()
            assert "The Name Server boot success" not in log, log
            assert f"No embedded name server: the broker registers with namesrvAddr in {conf}" in log, log
        finally:
            stop_broker_by_pid(store)
        assert lock_owner(store) is None
    finally:
        ns.stop()


CONFIG_ON_STORE = """name: cfg
targets:
  s: {store: "%s", create: true%s}
steps:
  - name: set
    broker.config: {target: s, config: {fileReservedTime: 5, brokerClusterName: C9}}
"""


@pytest.mark.parametrize("config", ["", ', config: ""'])
def test_check_refuses_broker_config_on_a_store_target_without_its_config_file(
        pb: Playbooks, tmp_path: Path, config: str) -> None:
    store = tmp_path / "store"
    path = pb.write("p.yml", CONFIG_ON_STORE % (store, config))
    message = ("broker.config on store target 's' needs config: on that target (the broker's config file, "
               "where the change is persisted); to change a running broker use a namesrv: target")
    r = pb.check(path)
    assert r.code == 2 and f"{path}:6: {message}" in r.stderr, (r.stdout, r.stderr)
    for mode in (("--check",), ()):
        r = pb.run(path, *mode)
        assert r.code == 2 and f"{path}:6: {message}" in r.stderr, (mode, r.stdout, r.stderr)
        assert not store.exists()


def test_a_config_that_renders_empty_is_refused_for_the_store_directory_not_a_running_broker(
        pb: Playbooks, tmp_path: Path) -> None:
    """The template may render a file (so check lets it through); rendered empty, --check and the run say
    what the store directory lacks, not that a running broker would refuse the cluster name."""
    store = tmp_path / "store"
    path = pb.write("p.yml", CONFIG_ON_STORE % (store, ", config: \"{{ cfg | default('') }}\""))
    assert pb.check(path).code == 0
    for mode in (("--check",), ()):
        r = pb.run(path, *mode)
        assert r.code == 1, (mode, r.stdout)
        msg = r.doc["steps"][0]["message"]
        assert msg.startswith("updating broker config on a store directory needs the broker's config file"), msg
        assert "running broker would" not in msg and "cannot be changed on a running broker" not in msg, msg
