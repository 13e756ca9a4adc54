"""Issue 16, bug 8: ``mqadmin help CMD``, case-insensitive command completion, no ``<bool>`` for flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from mqadmin.app import app

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str):
    return CliRunner().invoke(app, list(args), prog_name="mqadmin", env={"COLUMNS": "200", "NAMESRV_ADDR": ""})


def test_help_cmd_is_cmd_help():
    r = run("help", "topicStatus")
    assert r.exit_code == 0, r.stderr
    assert "Usage: mqadmin topicStatus" in r.stdout and "--topic" in r.stdout
    upper = run("help", "TOPICSTATUS")
    assert upper.exit_code == 0 and "--topic" in upper.stdout
    listing = run("help")
    assert listing.exit_code == 0 and "topicStatus" in listing.stdout


def test_flags_show_no_bool_placeholder():
    for argv in (("topicList", "--help"), ("deleteTopic", "--help"), ("--help",)):
        r = run(*argv)
        assert r.exit_code == 0
        assert "<bool>" not in r.stdout, r.stdout
    assert "<str>" in run("topicStatus", "--help").stdout  # options with a value keep their type


def _complete(words: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), _MQADMIN_COMPLETE="complete_bash", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - 1))
    out = subprocess.run([sys.executable, "-m", "mqadmin.app"], env=env, capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    return out.stdout.split()


def test_command_names_complete_case_insensitively():
    assert _complete("mqadmin topics") == ["topicStatus"]
    assert _complete("mqadmin TOPICR") == ["topicRoute"]
    assert set(_complete("mqadmin topic")) == {"topicList", "topicRoute", "topicStatus", "topicClusterList"}


def test_bare_mqadmin_lists_the_commands():
    r = run()
    assert r.exit_code == 2
    assert "Usage: mqadmin" in r.stderr and "topicStatus" in r.stderr
    assert len(r.stderr.splitlines()) > 20  # the list, one command a line, not one folded line


def test_store_help_names_the_config_files_store_path_between_the_environment_and_the_default():
    """The --store help said "$RMQ_STORE, else ./store" while the config file's storePathRootDir comes
    between the two (README, store_dir.resolve_store_root)."""
    r = run("verifyStore", "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.replace("│", " ").split())
    assert "$RMQ_STORE, else storePathRootDir of --config, else ./store" in text, text
