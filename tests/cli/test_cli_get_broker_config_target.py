"""getBrokerConfig needs -b or -c: without either it printed nothing and exited 0, so a forgotten
option looked like a broker with no configuration."""

from __future__ import annotations


def test_get_broker_config_without_a_target_is_a_usage_error(cli) -> None:
    r = cli("getBrokerConfig")
    assert (r.exit_code, r.stdout) == (2, ""), (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "mqadmin getBrokerConfig: one of -b/--brokerAddr or -c/--clusterName is required "
        "(see 'mqadmin getBrokerConfig --help')"]


def test_get_broker_config_of_the_cluster_still_prints_it(cli) -> None:
    r = cli("getBrokerConfig", "-c", "DefaultCluster")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("============Master: ") and "brokerName" in r.stdout
