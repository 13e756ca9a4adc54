"""ACL 2.0 fixes of mqadmin over -n, against real mqbrokers with ACL on.

Why these tests: a change command must succeed on the change's own answer (Apache sends nothing
more), not fail on a read-back its account may not make; message queries and checkMsgSendRT must
need only what Apache's consumer/producer need (the route, not GET_TOPIC_CONFIG); a cluster-wide
change that fails must name the broker that refused; explainAcl must not print a Python None.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.admin import change_each
from mqadmin.errors import AdminError
from tests.remoting_broker import REPO, BrokerProcess, running_broker
from tests.waiting import wait_remote_dispatched

SUPER = ("rocketmq", "12345678")


def acl_conf(secret: str = SUPER[1]) -> dict[str, str]:
    """A broker with authentication and authorization on, its super user's secret ``secret``."""
    return {"authenticationEnabled": "true", "authorizationEnabled": "true",
            "initAuthenticationUser": json.dumps({"username": SUPER[0], "password": secret}),
            "innerClientAuthenticationCredentials": json.dumps({"accessKey": SUPER[0], "secretKey": secret})}


def mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for k in ("NAMESRV_ADDR", "ROCKETMQ_ACCESS_KEY", "ROCKETMQ_SECRET_KEY", "ROCKETMQ_HOME"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "mqadmin.app", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(REPO))


def as_super(b: BrokerProcess, *args: str) -> str:
    """A command the super user must be able to run: its stdout."""
    r = mqadmin(*args, "-n", b.namesrv_addr, "--ak", SUPER[0], "--sk", SUPER[1])
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("acl-admin-fixes")), acl_conf()) as b:
        yield b


def test_delegated_admin_changes_users_and_acls_without_a_read_back(secured: BrokerProcess) -> None:
    """An account with Cluster Update but no Get: each change succeeds (exit 0, Apache's line) and is made."""
    b, c = secured, ("-c", "DefaultCluster")
    as_super(b, "createUser", *c, "-u", "ops", "-p", "opspw")
    as_super(b, "createAcl", *c, "-s", "User:ops", "-r", "Cluster:DefaultCluster", "-a", "Update", "-d", "Allow")
    ops = ("-n", b.namesrv_addr, "--ak", "ops", "--sk", "opspw", *c)
    steps = [("createUser", "-u", "carol", "-p", "c"), ("updateUser", "-u", "carol", "-s", "disable"),
             ("createAcl", "-s", "User:carol", "-r", "Topic:T1", "-a", "Pub", "-d", "Allow"),
             ("updateAcl", "-s", "User:carol", "-r", "Topic:T1", "-a", "Sub", "-d", "Allow")]
    for name, *args in steps:
        r = mqadmin(name, *ops, *args)
        verb = "create" if name.startswith("create") else "update"
        what = "user" if name.endswith("User") else "acl"
        assert (r.returncode, r.stdout) == (0, f"{verb} {what} to {b.broker_addr} success.\n"), (name, r.stderr)
    user = as_super(b, "getUser", *c, "-u", "carol").splitlines()[1].split()
    assert user == ["carol", "c", "Normal", "disable"]
    acl = json.loads(as_super(b, "getAcl", *c, "-s", "User:carol", "--output", "json"))
    assert [e["actions"] for e in acl["policies"][0]["entries"]] == [["Sub"]]
    # --json still shows the stored user to whoever may read it, and null to whoever may not
    mine = json.loads(as_super(b, "updateUser", *c, "-u", "carol", "-s", "enable", "--output", "json"))
    assert mine["user"]["userStatus"] == "enable"
    theirs = mqadmin("updateUser", *ops, "-u", "carol", "-s", "disable", "--output", "json")
    assert theirs.returncode == 0 and json.loads(theirs.stdout)["user"] is None, theirs.stderr


def test_consumer_and_producer_accounts_query_and_check_send_rt(secured: BrokerProcess) -> None:
    """Sub on the topic is enough for queryMsgByKey/queryMsgByUniqueKey, Pub for checkMsgSendRT."""
    b, c = secured, ("-c", "DefaultCluster")
    as_super(b, "updateTopic", *c, "-t", "T1", "-r", "2", "-w", "2")
    as_super(b, "sendMessage", "-t", "T1", "-p", "hello", "-k", "k1")
    wait_remote_dispatched(b.namesrv_addr, access_key=SUPER[0], secret_key=SUPER[1])
    for user, action in (("sub1", "Sub"), ("pub1", "Pub")):
        as_super(b, "createUser", *c, "-u", user, "-p", f"{user}-pw")
        as_super(b, "createAcl", *c, "-s", f"User:{user}", "-r", "Topic:T1", "-a", action, "-d", "Allow")
    sub = ("-n", b.namesrv_addr, "--ak", "sub1", "--sk", "sub1-pw")
    by_key = mqadmin("queryMsgByKey", *sub, "-t", "T1", "-k", "k1")
    assert by_key.returncode == 0, by_key.stdout + by_key.stderr
    rows = by_key.stdout.splitlines()[1:]
    assert len(rows) == 1, by_key.stdout
    msg_id = rows[0].split()[0]
    by_uniq = mqadmin("queryMsgByUniqueKey", *sub, "-t", "T1", "-i", msg_id)
    assert by_uniq.returncode == 0 and msg_id in by_uniq.stdout, by_uniq.stdout + by_uniq.stderr
    rt = mqadmin("checkMsgSendRT", "-n", b.namesrv_addr, "--ak", "pub1", "--sk", "pub1-pw", "-t", "T1", "-a", "2")
    assert rt.returncode == 0 and "Avg RT" in rt.stdout, rt.stdout + rt.stderr
    assert rt.stdout.split().count("true") == 2, rt.stdout  # both sends went through
    # a topic the name server does not route is still "not found", exit 3
    missing = mqadmin("queryMsgByKey", *sub, "-t", "NoSuchTopic", "-k", "k1")
    assert missing.returncode == 3 and "NoSuchTopic" in missing.stderr, missing.stderr


def test_cluster_change_names_the_broker_that_refused(tmp_path: Path) -> None:
    """broker-b's super user has another secret: createUser -c is refused there, and the line says so."""
    with running_broker(tmp_path / "a", acl_conf()) as a, \
            running_broker(tmp_path / "b", acl_conf("bbbbbbbb"), broker_name="broker-b",
                           namesrv=a.namesrv_addr) as b:
        r = mqadmin("createUser", "-n", a.namesrv_addr, "-c", "DefaultCluster", "--ak", SUPER[0], "--sk", SUPER[1],
                    "-u", "u1", "-p", "p")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"refused by {b.broker_addr}: " in r.stderr, r.stderr
    assert f"already changed on {a.broker_addr}; not on the brokers after it" in r.stderr, r.stderr


def test_change_each_names_the_refusing_broker_only_among_several() -> None:
    """One broker: the command named it already; several: the failure names which one refused."""
    def refuse_b(addr: str) -> str:
        if addr == "B":
            raise AdminError("check signature failed.")
        return addr

    with pytest.raises(AdminError) as many:
        change_each(["A", "B", "C"], refuse_b, str)
    assert many.value.message == "refused by B: check signature failed. (already changed on A; not on the brokers after it)"
    with pytest.raises(AdminError) as one:
        change_each(["B"], refuse_b, str)
    assert one.value.message == "check signature failed."


def test_explain_acl_without_source_ip_says_none_was_given(cli) -> None:
    assert cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw").exit_code == 0
    assert cli("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:T", "-a", "Pub",
               "-i", "10.0.0.0/8", "-d", "Allow").exit_code == 0
    r = cli("explainAcl", "-s", "User:alice", "-r", "Topic:T", "-a", "Pub")
    assert r.exit_code == 0, r.stderr
    assert "None" not in r.stdout, r.stdout
    assert "no source IP given (-i)" in r.stdout and "10.0.0.0/8" in r.stdout, r.stdout


def test_get_acl_without_cluster_get_is_refused_alike_for_users_that_exist_and_users_that_do_not(
        secured: BrokerProcess) -> None:
    """The broker told a caller without Cluster [Get] whether a username exists ("The subject is not
    exist.", exit 3, against a permission refusal for a real user), before authorizing the request. As
    Apache's authorization pipeline runs before the handler, both are now the same refusal."""
    b, c = secured, ("-c", "DefaultCluster")
    as_super(b, "createUser", *c, "-u", "snoop", "-p", "snooppw")
    as_super(b, "createUser", *c, "-u", "victim", "-p", "victimpw")
    asks = [mqadmin("getAcl", "-n", b.namesrv_addr, *c, "--ak", "snoop", "--sk", "snooppw", "-s", f"User:{who}")
            for who in ("victim", "nosuchuser")]
    for r in asks:
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "User:snoop has no permission to access Cluster:DefaultCluster" in r.stderr, r.stderr
    missing = mqadmin("getAcl", "-n", b.namesrv_addr, *c, "--ak", SUPER[0], "--sk", SUPER[1], "-s", "User:nosuchuser")
    assert missing.returncode == 3 and "The subject is not exist." in missing.stderr, (missing.stdout, missing.stderr)
