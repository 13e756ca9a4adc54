"""ACL 2.0 commands on a store directory, including seed 004's examples written with --store."""

from __future__ import annotations

import json


def test_seed_examples_work_with_store(cli):
    r = cli("createUser", "-c", "DefaultCluster", "-u", "rocketmq", "-p", "rocketmq", "-t", "Super")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "create user to 127.0.0.1:10911 success.\n"
    r = cli("createAcl", "-c", "DefaultCluster", "-s", "User:rocketmq", "-r", "Topic:*,Group:*", "-a", "Pub,Sub",
            "-i", "192.168.1.0/24", "-d", "Allow")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "create acl to 127.0.0.1:10911 success.\n"
    r = cli("updateAcl", "-c", "DefaultCluster", "-s", "User:rocketmq", "-r", "Topic:*,Group:*", "-a", "Pub,Sub",
            "-i", "192.168.1.0/24", "-d", "Deny")
    assert r.exit_code == 0
    acl = cli.json("getAcl", "-c", "DefaultCluster", "-s", "User:rocketmq")
    entries = acl["policies"][0]["entries"]
    assert [(e["resource"], e["actions"], e["sourceIps"], e["decision"]) for e in entries] == [
        ("Topic:*", ["Pub", "Sub"], ["192.168.1.0/24"], "Deny"), ("Group:*", ["Pub", "Sub"], ["192.168.1.0/24"], "Deny")]
    table = cli("listAcl", "-c", "DefaultCluster", "-s", "User:rocketmq", "-r", "Topic:*")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"]
    assert lines[1].split() == ["User:rocketmq", "Custom", "Topic:*", "[Pub,", "Sub]", "[192.168.1.0/24]", "Deny"]
    assert len(lines) == 2
    assert cli("deleteAcl", "-c", "DefaultCluster", "-s", "User:rocketmq", "-r", "Topic:*").exit_code == 0
    assert [e["resource"] for e in cli.json("getAcl", "-c", "DefaultCluster", "-s", "User:rocketmq")
            ["policies"][0]["entries"]] == ["Group:*"]
    assert cli("deleteAcl", "-c", "DefaultCluster", "-s", "User:rocketmq").exit_code == 0
    assert cli("getAcl", "-c", "DefaultCluster", "-s", "User:rocketmq").exit_code == 3
    users = cli.json("listUser", "-c", "DefaultCluster", "-f", "mq")
    assert users == [{"username": "rocketmq", "password": "rocketmq", "userType": "Super", "userStatus": "enable"}]


def test_user_lifecycle_and_errors(cli):
    assert cli("createUser", "-b", "127.0.0.1:10911", "-u", "alice", "-p", "secret").exit_code == 0
    again = cli("createUser", "-b", "127.0.0.1:10911", "-u", "alice", "-p", "secret")
    assert again.exit_code == 1 and "The user is existed" in again.stderr
    assert cli("updateUser", "-c", "DefaultCluster", "-u", "alice", "-s", "disable").exit_code == 0
    got = cli("getUser", "-c", "DefaultCluster", "-u", "alice")
    assert got.stdout.splitlines()[1].split() == ["alice", "secret", "Normal", "disable"]
    both = cli("updateUser", "-c", "DefaultCluster", "-u", "alice", "-p", "x", "-s", "enable")
    assert both.exit_code == 2
    assert cli("deleteUser", "-c", "DefaultCluster", "-u", "alice").exit_code == 0
    assert cli("getUser", "-c", "DefaultCluster", "-u", "alice").exit_code == 3
    bad_type = cli("createUser", "-c", "DefaultCluster", "-u", "bob", "-p", "pw", "-t", "Admin")
    assert bad_type.exit_code == 1 and "UserType" in bad_type.stderr
    no_target = cli("createUser", "-u", "bob", "-p", "pw")
    assert no_target.exit_code == 2 and "-c/--clusterName" in no_target.stderr
    wrong_cluster = cli("createUser", "-c", "OtherCluster", "-u", "bob", "-p", "pw")
    assert wrong_cluster.exit_code == 3 and "OtherCluster" in wrong_cluster.stderr  # not found: exit 3
    wrong_broker = cli("createUser", "-b", "10.1.1.1:10911", "-u", "bob", "-p", "pw")
    assert wrong_broker.exit_code == 3 and "-n" in wrong_broker.stderr
    unknown_subject = cli("createAcl", "-c", "DefaultCluster", "-s", "User:ghost", "-r", "Topic:T", "-a", "Pub",
                          "-d", "Allow")
    assert unknown_subject.exit_code == 3 and "User:ghost" in unknown_subject.stderr
    bad_ip = cli("createUser", "-c", "DefaultCluster", "-u", "carol", "-p", "pw")
    assert bad_ip.exit_code == 0
    r = cli("createAcl", "-c", "DefaultCluster", "-s", "User:carol", "-r", "Topic:T", "-a", "Pub", "-d", "Allow",
            "-i", "300.1.1.1")
    assert r.exit_code == 1 and "source ip is invalid" in r.stderr


def test_explain_acl(cli):
    cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw")
    cli("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:order*", "-a", "Pub", "-d", "Allow")
    cli("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:orderSecret", "-a", "Pub", "-d", "Deny")
    allow = cli.json("explainAcl", "-s", "User:alice", "-r", "Topic:orderEvents", "-a", "Pub", "-i", "10.0.0.1")
    assert allow["decision"] == "Allow" and allow["entry"].startswith("Topic:order*")
    deny = cli.json("explainAcl", "-s", "User:alice", "-r", "Topic:orderSecret", "-a", "Pub")
    assert deny["decision"] == "Deny" and "the decision is deny" in deny["failureMessage"]
    none = cli("explainAcl", "-s", "User:alice", "-r", "Topic:other", "-a", "Sub")
    assert none.exit_code == 0
    assert "Decision:            Deny" in none.stdout and "no matched policies" in none.stdout


def test_copy_user_and_acl_between_store_directories(cli, tmp_path):
    cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw")
    cli("createUser", "-c", "DefaultCluster", "-u", "bob", "-p", "pw2", "-t", "Super")
    cli("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:T", "-a", "Pub", "-d", "Allow")
    target = tmp_path / "other"
    r = cli("copyUser", "-f", str(cli.store), "-t", str(target))
    assert r.exit_code == 3 and "is not a store directory" in r.stderr and "--create" in r.stderr
    assert not target.exists()
    r = cli("copyUser", "-f", str(cli.store), "-t", str(target), "--create")
    assert r.exit_code == 0, r.stderr
    assert f"copy user of alice from {cli.store} to {target} success." in r.stdout
    r = cli("copyAcl", "-f", str(cli.store), "-t", str(target), "-s", "User:alice")
    assert r.exit_code == 0, r.stderr
    users = cli.json("listUser", "-c", "DefaultCluster", store=target)
    assert [(u["username"], u["userType"]) for u in users] == [("alice", "Normal"), ("bob", "Super")]
    acl = cli.json("getAcl", "-c", "DefaultCluster", "-s", "User:alice", store=target)
    assert acl["policies"][0]["entries"][0]["resource"] == "Topic:T"
    remote = cli("copyUser", "-f", str(cli.store), "-t", "192.168.0.2:10911")
    assert remote.exit_code == 2 and "needs -n <namesrv>" in remote.stderr


def test_copy_acl_to_a_store_missing_one_user_copies_nothing(cli, tmp_path):
    """copyAcl wrote User:a's ACL, then failed on User:b (no such user on the target) printing nothing
    of what it had copied; as copyUser, it checks everything first now."""
    cli("createUser", "-c", "DefaultCluster", "-u", "a", "-p", "apass")
    cli("createUser", "-c", "DefaultCluster", "-u", "b", "-p", "bpass")
    cli("createAcl", "-c", "DefaultCluster", "-s", "User:a", "-r", "Topic:T", "-a", "Pub", "-d", "Allow")
    cli("createAcl", "-c", "DefaultCluster", "-s", "User:b", "-r", "Topic:T", "-a", "Sub", "-d", "Allow")
    target = tmp_path / "other"
    assert cli("createUser", "-c", "DefaultCluster", "-u", "a", "-p", "other", "--create", store=target).exit_code == 0
    r = cli("copyAcl", "-f", str(cli.store), "-t", str(target))
    assert r.exit_code == 3 and r.stdout == ""
    assert "User:b is not exist on the target; nothing was copied" in r.stderr, r.stderr
    assert cli.json("listAcl", "-c", "DefaultCluster", store=target) == []
    r = cli("copyAcl", "-f", str(cli.store), "-t", str(target), "-s", "User:a")
    assert r.exit_code == 0 and f"copy acl of User:a from {cli.store} to {target} success." in r.stdout


def test_yaml_output(cli):
    cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw")
    r = cli("listUser", "-c", "DefaultCluster", "--output", "yaml")
    assert r.exit_code == 0
    assert r.stdout.startswith("- username: alice\n")
    assert json.loads(cli("listUser", "-c", "DefaultCluster", "--output", "json").stdout)[0]["username"] == "alice"


def test_a_damaged_users_file_is_the_commands_one_line_failure(cli):
    """The users file is read when an ACL command first needs it, outside the error handling of the
    store's calls: a damaged one came out as "unexpected failure: ... (run with --verbose ...)"."""
    assert cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "secret").exit_code == 0
    users = cli.store / "config" / "users.json"
    users.write_text("[1")
    for command in (("listUser", "-c", "DefaultCluster"), ("getUser", "-c", "DefaultCluster", "-u", "alice"),
                    ("createAcl", "-c", "DefaultCluster", "-s", "User:alice", "-r", "Topic:*", "-a", "Pub",
                     "-d", "Allow")):
        r = cli(*command)
        assert r.exit_code == 1, r.stdout
        assert r.stderr.startswith(f"mqadmin {command[0]}: cannot read users file ") and "unexpected" not in r.stderr
        assert str(users) in r.stderr and r.stderr.count("\n") == 1
    assert users.read_text() == "[1"
