"""``explainAcl`` answers per broker: each broker keeps its own users and ACLs and its own
authorizationEnabled, so the first broker's answer is not the cluster's. It asked the first broker
only (broker-a, ACL off, where ops does not exist): "Deny, user ops does not exist" for a user broker-b
allows, naming no broker, and the same Deny for a broker that serves everyone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mqadmin.acl_cluster import SUPER, AclCluster, mqadmin

CREDS = ("--ak", SUPER[0], "--sk", SUPER[1])
OPS_SUB = ("explainAcl", "-s", "User:ops", "-r", "Topic:T2", "-a", "Sub")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(Path(tmp_path_factory.mktemp("explain-acl")))
    try:
        yield c
    finally:
        c.close()


def test_broker_addr_asks_that_broker(cluster: AclCluster) -> None:
    r = mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-b", cluster.addr_b, *CREDS)
    assert r.exit_code == 0, r.stderr
    assert "broker-b" in r.stdout and "Decision:            Allow" in r.stdout, r.stdout
    assert "Topic:* [Sub,Get,List]" in r.stdout, r.stdout
    assert "does not exist" not in r.stdout


def test_a_broker_with_authorization_off_says_so(cluster: AclCluster) -> None:
    r = mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-b", cluster.addr_a, *CREDS)
    assert r.exit_code == 0, r.stderr
    assert "authorization is off on broker-a: allowed" in r.stdout, r.stdout
    data = json.loads(mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-b", cluster.addr_a, *CREDS,
                              "--output", "json").stdout)
    assert (data["broker"], data["authorizationEnabled"], data["brokerDecision"]) == ("broker-a", False, "Allow")


def test_cluster_explains_on_every_broker_each_named(cluster: AclCluster) -> None:
    for target in (("-c", "DefaultCluster"), ()):  # no target: every broker, not the first one only
        r = mqadmin(*OPS_SUB, "-n", cluster.namesrv, *target, *CREDS, "--output", "json")
        assert r.exit_code == 0, r.stderr
        answers = {a["broker"]: a for a in json.loads(r.stdout)}
        assert set(answers) == {"broker-a", "broker-b"}, r.stdout
        assert answers["broker-a"]["brokerDecision"] == "Allow"
        assert answers["broker-a"]["brokerReason"] == "authorization is off on broker-a: allowed"
        assert (answers["broker-b"]["decision"], answers["broker-b"]["brokerDecision"]) == ("Allow", "Allow")
        assert answers["broker-b"]["brokerAddr"] == cluster.addr_b
    text = mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-c", "DefaultCluster", *CREDS).stdout
    assert f"broker-a ({cluster.addr_a})" in text and f"broker-b ({cluster.addr_b})" in text, text


def test_a_broker_that_refuses_is_named_and_the_others_still_answer(cluster: AclCluster) -> None:
    r = mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-c", "DefaultCluster")  # no credentials: broker-b refuses
    assert r.exit_code == 1
    assert "authorization is off on broker-a: allowed" in r.stdout, r.stdout
    assert f"broker-b ({cluster.addr_b})" in r.stderr and "username cannot be null" in r.stderr, r.stderr


def test_target_options_are_checked(cluster: AclCluster) -> None:
    r = mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-c", "DefaultCluster", "-b", cluster.addr_a)
    assert r.exit_code == 2 and "mutually exclusive" in r.stderr
    r = mqadmin(*OPS_SUB, "-n", cluster.namesrv, "-c", "NoSuchCluster")
    assert r.exit_code != 0 and "NoSuchCluster" in r.stderr


def test_a_store_directory_with_acl_off_says_so(tmp_path: Path) -> None:
    from broker_core.broker.broker import Broker
    from broker_core.broker.broker_config import BrokerConfig

    Broker(tmp_path / "store", BrokerConfig(), audit_log_path=None).shutdown()
    r = mqadmin(*OPS_SUB, "--store", str(tmp_path / "store"))
    assert r.exit_code == 0, r.stderr
    assert "authorization is off on broker-a: allowed" in r.stdout, r.stdout
    # the policies' own verdict is still shown, for the day authorization is turned on
    assert "Decision:            Deny" in r.stdout and "User:ops not found." in r.stdout
