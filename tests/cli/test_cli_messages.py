"""Issue 16, bugs 4-5: no Python internals in messages; not found is exit 3 everywhere; usage is one line."""

from __future__ import annotations

import pytest


@pytest.fixture
def acl_cli(cli):
    assert cli("createUser", "-c", "DefaultCluster", "-u", "alice", "-p", "pw").exit_code == 0
    return cli


def _one_clean_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    for leak in ("None", "Error:", "Errno", "Traceback", "Exception"):
        assert leak not in lines[0], text
    return lines[0]


def test_explain_acl_without_source_ip_has_no_python_none(acl_cli):
    r = acl_cli("explainAcl", "-s", "User:alice", "-r", "Topic:T", "-a", "Pub")
    assert r.exit_code == 0, r.stderr
    assert "from None" not in r.stdout
    assert "User:alice has no permission to access Topic:T, no matched policies." in r.stdout


def test_an_unknown_action_is_the_parser_words_only(acl_cli):
    r = acl_cli("explainAcl", "-s", "User:alice", "-r", "Topic:T", "-a", "Fly")
    assert r.exit_code == 2  # a malformed action is a usage error
    assert _one_clean_line(r.stderr).startswith("mqadmin explainAcl: unknown Action 'Fly'")


@pytest.mark.parametrize("argv", [
    ("getAcl", "-c", "DefaultCluster", "-s", "User:ghost"),
    ("updateUser", "-c", "DefaultCluster", "-u", "ghost", "-p", "x"),
    ("deleteAcl", "-c", "DefaultCluster", "-s", "User:nobody"),
    ("getUser", "-c", "DefaultCluster", "-u", "ghost"),
    ("createAcl", "-c", "DefaultCluster", "-s", "User:ghost", "-r", "Topic:T", "-a", "Pub", "-d", "Allow"),
    ("listUser", "-c", "NoSuchCluster"),
    ("getUser", "-b", "10.9.9.9:10911", "-u", "alice"),
    ("topicStatus", "-t", "NoSuchTopic"),
    ("updateTopic", "-c", "NoSuchCluster", "-t", "T"),
    ("brokerStatus", "-b", "10.9.9.9:10911"),
])
def test_not_found_is_exit_3_everywhere(acl_cli, argv):
    r = acl_cli(*argv)
    assert r.exit_code == 3, (argv, r.stdout, r.stderr)
    _one_clean_line(r.stderr)


@pytest.mark.parametrize("argv", [("updateTopic", "-t", "T"), ("updateTopic", "-c", "C"), ("nosuchCommand",),
                                  ("topicList", "--bogus"), ("getUser", "-u", "alice")])
def test_usage_errors_are_one_line_with_a_help_hint(cli, argv):
    r = cli(*argv)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    line = _one_clean_line(r.stderr)
    assert line.startswith("mqadmin") and line.endswith("--help')")
    assert "╭" not in r.stderr and "Usage:" not in r.stderr
