"""Validation first: every kind of bad playbook is one line with file:line, exit 2, and nothing runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import Playbooks, seed_store

TESTS = Path(__file__).resolve().parents[1]

GOOD_HEAD = '''name: t
targets:
  local:
    store: "{{ store }}"
steps:
'''

CASES = [
    ("unknown action", GOOD_HEAD + "  - name: a\n    topic.ensur: {topic: x}\n", 7,
     "unknown action or option 'topic.ensur' (did you mean 'topic.ensure'?)"),
    ("unknown option", GOOD_HEAD + "  - name: a\n    topic.ensure: {topic: x, read_queue: 4}\n", 7,
     "topic.ensure: unknown option 'read_queue' (did you mean 'read_queues'?)"),
    ("bad type", GOOD_HEAD + "  - name: a\n    topic.ensure:\n      topic: x\n      read_queues: four\n", 9,
     "topic.ensure: read_queues must be integer, got 'four'"),
    ("list for an integer", GOOD_HEAD + "  - name: a\n    topic.ensure:\n      topic: x\n      write_queues: [1, 2]\n", 9,
     "topic.ensure: write_queues must be integer, got list [1, 2]"),
    ("mapping for an integer", GOOD_HEAD + "  - name: a\n    topic.ensure:\n      topic: x\n      write_queues: {a: 1}\n", 9,
     "topic.ensure: write_queues must be integer, got mapping {'a': 1}"),
    ("bad choice", GOOD_HEAD + "  - name: a\n    topic.ensure: {topic: x, queue_type: Fancy}\n", 7,
     "queue_type must be one of SimpleCQ, BatchCQ"),
    ("missing required", GOOD_HEAD + "  - name: a\n    group.ensure: {retry_max_times: 3}\n", 7,
     "group.ensure: missing required option 'group'"),
    ("unknown target", GOOD_HEAD + "  - name: a\n    group.ensure: {target: locl, group: g}\n", 7,
     "unknown target 'locl' (did you mean 'local'?)"),
    ("missing target", "name: t\ntargets:\n  a: {store: /x}\n  b: {store: /y}\nsteps:\n"
     "  - name: s\n    group.ensure: {group: g}\n", 6, "group.ensure: missing target (one of: a, b)"),
    ("template syntax", GOOD_HEAD + "  - name: a\n    group.ensure: {group: \"{{ team -}\"}\n", 7,
     "template syntax error"),
    ("bad when", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g}\n    when: \"x ==\"\n", 8,
     "template syntax error"),
    ("duplicate key", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g}\n    name: b\n", 8,
     "duplicate key 'name' (first on line 6)"),
    ("step option type", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g}\n    retries: many\n", 8,
     "retries: must be a whole number"),
    ("unknown top key", GOOD_HEAD.replace("steps:", "stepz: []\nsteps:") + "  - group.ensure: {group: g}\n", 5,
     "unknown top-level key 'stepz'"),
    ("yaml syntax", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g\n", 8, "invalid YAML"),
    ("target without kind", "name: t\ntargets:\n  a: {config: /x}\nsteps:\n  - group.ensure: {group: g}\n", 3,
     "target 'a' needs store: (a directory), namesrv: (host:port) or ssh:"),
    ("host action on cluster", "name: t\ntargets:\n  c: {namesrv: '127.0.0.1:1'}\nsteps:\n"
     "  - shell: {cmd: 'true'}\n", 5, "shell cannot run on cluster target 'c'"),
    ("ssh without key", "name: t\ntargets:\n  h:\n    ssh: {host: h, user: u}\n    store: /s\nsteps:\n"
     "  - store.verify: {}\n", 4, "ssh needs key_file:"),
    ("register used before it exists", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g}\n"
     "    when: later.changed\n  - name: b\n    group.ensure: {group: h}\n    register: later\n", 8,
     "variable 'later' is not defined (registered by step 2, which runs later)"),
    ("undefined variable", GOOD_HEAD + "  - name: a\n    group.ensure: {group: \"{{ teem }}-x\"}\n", 7,
     "variable 'teem' is not defined; give -e teem=VALUE"),
    ("unset env", GOOD_HEAD + "  - name: a\n    user.ensure: {username: u, password: \"{{ env.RMQOPS_TEST_UNSET }}\"}\n",
     7, "environment variable RMQOPS_TEST_UNSET is not set"),
]


@pytest.mark.parametrize(("title", "text", "line", "message"), CASES, ids=[c[0] for c in CASES])
def test_invalid_playbook(pb: Playbooks, tmp_path: Path, title: str, text: str, line: int, message: str) -> None:
    path = pb.write("bad.yml", text)
    store = tmp_path / "store"
    r = pb.run(path, "-e", f"store={store}")
    assert r.code == 2, (r.stdout, r.stderr)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"mqadmin playbook: {path}:{line}: "), err
    assert message in err, err
    assert not store.exists(), "nothing may run when the playbook is invalid"
    assert r.stdout == ""


def test_check_command(pb: Playbooks) -> None:
    good = pb.write("good.yml", GOOD_HEAD + "  - name: a\n    group.ensure: {group: \"{{ team }}\"}\n")
    r = pb.check(good)
    assert r.code == 0 and "valid playbook" in r.stdout and "needs -e for: store, team" in r.stdout
    bad = pb.write("bad.yml", GOOD_HEAD + "  - name: a\n    group.ensure: {grop: x}\n")
    r = pb.check(bad)
    assert r.code == 2 and f"{bad}:7: group.ensure: unknown option 'grop'" in r.stderr


def test_bad_extra_var_and_limit(pb: Playbooks, tmp_path: Path) -> None:
    good = pb.write("good.yml", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g}\n")
    r = pb.run(good, "-e", "store")
    assert r.code == 2 and "-e 'store': expected KEY=VALUE" in r.stderr
    r = pb.run(good, "-e", f"store={tmp_path}/s", "--limit", "nosuch")
    assert r.code == 2 and "--limit 'nosuch' matches no target" in r.stderr


def test_missing_file(pb: Playbooks, tmp_path: Path) -> None:
    r = pb.run(tmp_path / "nope.yml")
    assert r.code == 2 and "cannot read playbook" in r.stderr


def test_unwritable_run_log(pb: Playbooks, tmp_path: Path) -> None:
    good = pb.write("good.yml", GOOD_HEAD + "  - name: a\n    group.ensure: {group: g}\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    from typer.testing import CliRunner

    from mqadmin.app import app

    r = CliRunner().invoke(app, ["playbook", "run", str(good), "-e", f"store={seed_store(tmp_path / 's')}",
                                 "--log", str(blocker / "run.jsonl")])
    assert r.exit_code == 2
    assert r.stderr.startswith("mqadmin playbook: cannot write the run log ") and len(r.stderr.splitlines()) == 1


def test_run_log_that_fills_the_disk_mid_run_stops_but_the_run_and_its_report_go_on(
        pb: Playbooks, tmp_path: Path, small_fs: Path) -> None:
    """A run log on a disk something else fills while the play runs (here a shell step). Before, the
    failed log line aborted the run half done with exit 2, "invalid playbook (nothing ran)", and no
    report of the group it had already made. Now the play goes on, the report says everything it
    did, and the exit code and one line on stderr say where the log stops. (The command is padded: the
    log line of its step, which holds it, needs blocks the full disk no longer has.)"""
    log = small_fs / "run.jsonl"
    filler = small_fs / "filler"
    play = pb.write("fill.yml", GOOD_HEAD + f"""  - name: billing group
    group.ensure: {{group: billing}}
  - name: something fills the disk
    shell: {{cmd: "PYTHONPATH={TESTS} {sys.executable} -c 'import small_fs; small_fs.fill(\\"{filler}\\")' # {'padding' * 2000}"}}
  - name: audit group
    group.ensure: {{group: audit}}
""")
    from typer.testing import CliRunner

    from mqadmin.app import app

    try:
        r = CliRunner().invoke(app, ["playbook", "run", str(play), "-e", f"store={seed_store(tmp_path / 's')}", "--log", str(log),
                                     "--output", "json"])
    finally:
        filler.unlink(missing_ok=True)
    assert r.exit_code == 1, r.output
    report = json.loads(r.stdout)
    assert [(s["name"], s["status"]) for s in report["steps"]] == [
        ("billing group", "changed"), ("something fills the disk", "changed"), ("audit group", "changed")]
    assert r.stderr == (f"mqadmin playbook: cannot write the run log {log}: No space left on device (its last "
                        "line is step 1 'billing group' on local)\n")
    assert [json.loads(line)["event"] for line in log.read_text().splitlines()] == ["run_start", "step"]
