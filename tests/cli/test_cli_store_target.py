"""Issue 16, bugs 3-4: no store is ever created by accident, and a bad --store path is one plain line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mqadmin.app import app


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})


@pytest.mark.parametrize("argv", [
    ("updateTopic", "-c", "DefaultCluster", "-t", "T"),
    ("createUser", "-c", "DefaultCluster", "-u", "u", "-p", "p"),
    ("sendMessage", "-t", "T", "-p", "x"),
])
def test_a_mistyped_store_path_is_not_created_by_a_write(tmp_path, argv):
    typo = tmp_path / "stroe"
    r = run(*argv, "--store", str(typo))
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stderr.strip() == (f"mqadmin {argv[0]}: {typo} is not a store directory (it does not exist) "
                                "(give --create to make a new store there)")
    assert not typo.exists()


@pytest.mark.parametrize("argv", [("topicList",), ("topicStatus", "-t", "TBW102"), ("verifyStore",),
                                  ("listUser", "-c", "DefaultCluster"), ("clusterList",)])
def test_reads_on_an_empty_directory_say_it_is_not_a_store(tmp_path, argv):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(*argv, "--store", str(empty))
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert "is not a store directory" in r.stderr and "store OK" not in r.stdout
    assert list(empty.iterdir()) == []


def test_create_builds_a_store_on_purpose(tmp_path):
    new = tmp_path / "new"
    r = run("updateTopic", "-c", "DefaultCluster", "-t", "T", "--store", str(new), "--create")
    assert r.exit_code == 0, r.stderr
    assert (new / "config" / "topics.json").is_file()
    r = run("topicList", "--store", str(new))
    assert r.exit_code == 0 and "T" in r.stdout.split()


@pytest.mark.parametrize("argv", [("updateTopic", "-c", "DefaultCluster", "-t", "T"), ("topicList",),
                                  ("deleteTopic", "-c", "DefaultCluster", "-t", "T")])
def test_a_store_path_that_is_a_file_is_one_plain_line(tmp_path, argv):
    afile = tmp_path / "store.txt"
    afile.write_text("not a store")
    r = run(*argv, "--store", str(afile), "--create")
    assert r.exit_code == 3, (r.stdout, r.stderr)
    assert r.stderr.strip() == f"mqadmin {argv[0]}: {afile} is not a store directory (it is a file)"
    assert afile.read_text() == "not a store"


def test_an_empty_namesrv_address_is_a_usage_error_not_a_fall_back_to_the_store(tmp_path):
    """``-n "$UNSET_VAR"`` used to run the command on ./store."""
    r = run("topicList", "-n", "", "--store", str(tmp_path))
    assert r.exit_code == 2 and r.stderr.startswith("mqadmin topicList: -n/--namesrvAddr is empty"), r.stderr


def test_queue_numbers_both_zero_is_a_usage_error(tmp_path):
    r = run("updateTopic", "-c", "DefaultCluster", "-t", "T", "-r", "0", "-w", "0", "--store", str(tmp_path), "--create")
    assert r.exit_code == 2 and "cannot both be 0" in r.stderr, r.stderr
    assert not (tmp_path / "config").exists()


def test_an_access_key_without_its_secret_is_a_usage_error():
    r = run("listUser", "-n", "127.0.0.1:9", "-c", "DefaultCluster", "--ak", "rocketmq")
    assert r.exit_code == 2 and "--ak/--accessKey and --sk/--secretKey must be given together" in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [
    ("updateTopic", "-c", "DefaultCluster", "-t", "bad topic!"),
    ("updateTopic", "-c", "DefaultCluster", "-t", "T", "-o", "true"),
    ("updateSubGroup", "-c", "DefaultCluster", "-g", "bad!group"),
    ("deleteTopic", "-c", "DefaultCluster", "-t", "Nope"),
])
def test_a_failed_write_with_create_leaves_no_new_store_behind(tmp_path, argv):
    """A failed operation changes nothing: --create built a store (a 38 MB timer wheel among it) for a
    command that then failed, and left it there, parents and all."""
    new = tmp_path / "a" / "new"
    r = run(*argv, "--store", str(new), "--create")
    assert r.exit_code != 0, r.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_with_create_leaves_an_existing_store_in_place(tmp_path):
    store = tmp_path / "s"
    assert run("updateTopic", "-c", "DefaultCluster", "-t", "T", "--store", str(store), "--create").exit_code == 0
    r = run("updateTopic", "-c", "DefaultCluster", "-t", "bad topic!", "--store", str(store), "--create")
    assert r.exit_code != 0
    r = run("topicList", "--store", str(store))
    assert r.exit_code == 0 and "T" in r.stdout.split()


def test_a_bad_config_value_names_the_config_file(tmp_path) -> None:
    """A bad value in --config's file named only its key ("mappedFileSizeCommitLog: expected an integer")."""
    from typer.testing import CliRunner

    from mqadmin.app import app

    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=abc\n")
    r = CliRunner().invoke(app, ["topicList", "--store", str(tmp_path / "s"), "--config", str(conf)])
    assert r.exit_code == 1
    assert r.stderr.strip() == (f"mqadmin topicList: config file {conf}: mappedFileSizeCommitLog: expected an "
                                "integer, got 'abc'")
