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


def test_delete_topic_rerun_cleans_a_route_the_brokers_no_longer_have(tmp_path: Path) -> None:
    """A run that deleted the topic on the brokers but not in the name server (it was down) is re-run:
    as Apache's, the re-run deletes the route instead of stopping at "not found" on the brokers."""
    from mqadmin.transport.remoting import RemotingBrokerClient

    with running_broker(tmp_path / "a") as a:
        n = a.namesrv_addr
        made = mqadmin("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "Thalf")
        assert made.returncode == 0, made.stdout + made.stderr
        client = RemotingBrokerClient(n)
        try:  # the first run's broker half, without the name server half
            client.delete_topic_in_broker(a.broker_addr, "Thalf")
        finally:
            client.close()
        assert mqadmin("topicRoute", "-n", n, "-t", "Thalf").returncode == 0  # still routed
        dry = mqadmin("deleteTopic", "-n", n, "-c", "DefaultCluster", "-t", "Thalf", "--dry-run")
        rerun = mqadmin("deleteTopic", "-n", n, "-c", "DefaultCluster", "-t", "Thalf")
        route = mqadmin("topicRoute", "-n", n, "-t", "Thalf")
        again = mqadmin("deleteTopic", "-n", n, "-c", "DefaultCluster", "-t", "Thalf")
    assert dry.returncode == 0 and "NameServer only" in dry.stdout, dry.stdout + dry.stderr
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert rerun.stdout.endswith("delete topic [Thalf] from NameServer success.\n"), rerun.stdout
    assert "no broker of cluster [DefaultCluster] has topic [Thalf]" in rerun.stdout, rerun.stdout
    assert route.returncode == 3 and "not found" in route.stderr, route.stdout + route.stderr
    # known nowhere: still "not found"
    assert again.returncode == 3 and "not found" in again.stderr, again.stdout + again.stderr
