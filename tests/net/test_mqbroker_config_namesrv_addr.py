"""``mqbroker -c broker.conf`` with ``namesrvAddr`` in the file runs the broker alone, registered there.

Why: an Apache-style broker.conf names its cluster's name servers (``namesrvAddr=10.0.0.1:9876``), and
Apache's ``mqbroker -c`` registers with them; ours started its own embedded name server (on 9876, or the
file's namesrvPort) and registered there, out of its cluster, unless ``--broker-only`` was given. A
playbook's ``broker.start`` with ``config:`` runs exactly ``mqbroker --store S -c C``, so a recovered
broker came back with a private name server. ``-n`` on the command line still replaces the file's list.
"""

from __future__ import annotations

from pathlib import Path

from net_util import Mqbroker, run_mqadmin

from tests.waiting import wait_for


def _conf(path: Path, **props: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _cluster_list(namesrv: str) -> dict[str, str]:
    """brokerName -> cluster, as ``mqadmin clusterList -n`` shows them."""
    r = run_mqadmin("clusterList", "-n", namesrv)
    if "no broker is registered" in r.stderr:
        return {}
    assert r.returncode == 0, r.stdout + r.stderr
    return {f[1]: f[0] for line in r.stdout.splitlines()[1:] if len(f := line.split()) > 1}


def _name_server(tmp_path: Path, name: str, procs: list) -> str:
    ns = Mqbroker(tmp_path / name, "--namesrv-only", expect_broker=False)
    procs.append(ns)
    assert ns.namesrv_addr
    return ns.namesrv_addr


def test_the_config_files_namesrv_addr_is_where_the_broker_registers(tmp_path: Path, procs: list) -> None:
    ns = _name_server(tmp_path, "ns", procs)
    # namesrvPort=0: the code before the fix bound a free port for its embedded name server, never 9876
    conf = _conf(tmp_path / "broker.conf", brokerClusterName="FileCluster", brokerName="broker-f",
                 namesrvAddr=ns, namesrvPort="0")
    b = Mqbroker(tmp_path / "b", "--registerNameServerPeriod", "200", config=conf, expect_namesrv=False)
    procs.append(b)
    assert b.broker_addr, b.output()
    out = wait_for(lambda: "Ctrl-C" in b.output() and b.output(), "the boot lines")
    assert "The Name Server boot success" not in out, out
    assert f"boot success. serializeType=JSON and name server is {ns} (cluster FileCluster" in out, out
    assert f"No embedded name server: the broker registers with namesrvAddr in {conf}" in out, out
    assert f"mqadmin clusterList -n {ns}" in out, out
    wait_for(lambda: _cluster_list(ns).get("broker-f") == "FileCluster", "broker-f in the file's name server", 20)


def test_n_replaces_the_files_namesrv_addr(tmp_path: Path, procs: list) -> None:
    ns_file, ns_flag = _name_server(tmp_path, "ns1", procs), _name_server(tmp_path, "ns2", procs)
    conf = _conf(tmp_path / "broker.conf", brokerName="broker-n", namesrvAddr=ns_file, namesrvPort="0")
    b = Mqbroker(tmp_path / "b", "-n", ns_flag, "--registerNameServerPeriod", "200", config=conf,
                 expect_namesrv=False)
    procs.append(b)
    out = wait_for(lambda: "Ctrl-C" in b.output() and b.output(), "the boot lines")
    assert b.broker_addr and "The Name Server boot success" not in out, out
    assert "No embedded name server: the broker registers with the name servers -n names" in out, out
    wait_for(lambda: "broker-n" in _cluster_list(ns_flag), "broker-n in -n's name server", 20)
    assert "broker-n" not in _cluster_list(ns_file)


def test_without_namesrv_addr_the_embedded_name_server_still_runs(tmp_path: Path, procs: list) -> None:
    conf = _conf(tmp_path / "broker.conf", brokerName="broker-e", namesrvAddr="")
    b = Mqbroker(tmp_path / "b", config=conf)
    procs.append(b)
    assert b.namesrv_addr and b.broker_addr, b.output()
    assert "No embedded name server" not in wait_for(lambda: "Ctrl-C" in b.output() and b.output(), "boot lines")
    wait_for(lambda: "broker-e" in _cluster_list(b.namesrv_addr or ""), "broker-e in its own name server", 20)
