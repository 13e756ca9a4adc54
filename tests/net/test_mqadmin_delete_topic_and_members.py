"""mqadmin over real brokers: deleteTopic that fails at a name server says the brokers already deleted
the topic, and clusterList lists every registered broker of a group (slaves too, one row per #BID)."""

from __future__ import annotations

from pathlib import Path

from net_util import free_port
from net_util import run_mqadmin as mqadmin

from tests.remoting_broker import running_broker
from tests.waiting import wait_for


def test_delete_topic_failing_at_a_name_server_names_the_brokers_it_was_deleted_on(tmp_path: Path) -> None:
    dead_namesrv = f"127.0.0.1:{free_port()}"  # nothing listens there
    with running_broker(tmp_path / "a") as a:
        made = mqadmin("updateTopic", "-n", a.namesrv_addr, "-c", "DefaultCluster", "-t", "Tdel")
        assert made.returncode == 0, made.stdout + made.stderr
        both = f"{a.namesrv_addr};{dead_namesrv}"
        deleted = mqadmin("deleteTopic", "-n", both, "-c", "DefaultCluster", "-t", "Tdel")
        on_broker = mqadmin("topicStatus", "-n", a.namesrv_addr, "-t", "Tdel")
    assert deleted.returncode == 1, deleted.stdout + deleted.stderr
    line = deleted.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert dead_namesrv in line, line
    assert f"topic Tdel already deleted on broker {a.broker_addr}" in line, line
    assert on_broker.returncode == 3, on_broker.stdout + on_broker.stderr  # it was: the note tells the truth


def test_cluster_list_shows_a_slave_registered_beside_its_master(tmp_path: Path) -> None:
    with running_broker(tmp_path / "m") as m, \
            running_broker(tmp_path / "s", {"brokerId": "1", "brokerRole": "SLAVE"}, namesrv=m.namesrv_addr) as s:
        n = m.namesrv_addr
        wait_for(lambda: s.broker_addr in mqadmin("clusterList", "-n", n).stdout, "the slave in clusterList", 20)
        listed = mqadmin("clusterList", "-n", n)
        made = mqadmin("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "OnMaster")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert [(r[1], r[2], r[3]) for r in rows] == [("broker-a", "0", m.broker_addr), ("broker-a", "1", s.broker_addr)]
    # commands that change a broker group still go to its master only
    assert made.returncode == 0, made.stdout + made.stderr
    assert s.broker_addr not in made.stdout and m.broker_addr in made.stdout, made.stdout
