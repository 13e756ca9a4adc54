"""Regression tests for a probe's report on `mqadmin playbook` (bugs 1-7): each failed before its fix."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .conftest import Playbooks
from .test_actions import book

pytestmark = pytest.mark.timeout(120)


# -- 1: the table prints step names, commands and messages literally --------------------------------------

def test_1_table_prints_bracketed_text_literally(pb: Playbooks, tmp_path: Path) -> None:
    """Before: rich read `[/x]` as markup (MarkupError traceback after the step ran, exit 1) and
    swallowed `[red]...[/red]` in a step name."""
    out = tmp_path / "out"
    r = pb.run(pb.write("p.yml", book(tmp_path / "s", f'''  - name: "step [red]danger[/red]"
    shell: {{cmd: "echo [/x] > {out}"}}
''')), output="table")
    assert r.code == 0, r.stdout + r.stderr
    assert out.read_text() == "[/x]\n"
    assert "step [red]danger[/red]" in r.stdout
    assert f"echo [/x] > {out}" in r.stdout


# -- 2: -e values in conditions read as Ansible reads them -----------------------------------------------

def test_2_extra_var_false_is_false_in_when_until_and_assert(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", book(tmp_path / "s", '''  - name: bare
    shell: {cmd: "true"}
    when: really
  - name: negated
    shell: {cmd: "true"}
    when: not really
  - name: filter
    shell: {cmd: "true"}
    when: really | bool
'''))
    for value in ("false", "no", "0", "off", "False"):
        r = pb.run(path, "-e", f"really={value}")
        assert r.code == 0, r.stdout
        assert [s["status"] for s in r.doc["steps"]] == ["skipped", "changed", "skipped"], (value, r.doc)
    r = pb.run(path, "-e", "really=yes")
    assert [s["status"] for s in r.doc["steps"]] == ["changed", "skipped", "changed"]
    asserted = pb.write("a.yml", book(tmp_path / "s", '''  - assert: [really]
'''))
    r = pb.run(asserted, "-e", "really=false")
    assert r.code == 1 and r.doc["steps"][0]["message"] == "assertion failed: really"


# -- 3: an unknown filter or test is a playbook error, found before anything runs --------------------------

@pytest.mark.parametrize(("line", "at", "expected"), [
    ('  - shell: {cmd: "echo {{ \'x\' | nosuchfilter }}"}\n', 8, "template error: no filter named 'nosuchfilter'"),
    ('  - shell: {cmd: "true"}\n    when: "\'a\' is nosuchtest"\n', 9, "template error: no test named 'nosuchtest'"),
    ('  - shell: {cmd: "echo {% if 1 %}{{ 1 | nosuchfilter }}{% endif %}"}\n', 8,
     "template error: no filter named 'nosuchfilter'"),
])
def test_3_unknown_filter_or_test(pb: Playbooks, tmp_path: Path, line: str, at: int, expected: str) -> None:
    marker = tmp_path / "ran"
    path = pb.write("f.yml", book(tmp_path / "s", f'  - shell: {{cmd: "touch {marker}"}}\n' + line))
    checked = pb.check(path)
    assert checked.code == 2 and checked.stderr.strip() == f"mqadmin playbook: {path}:{at}: {expected}", checked
    r = pb.run(path)
    assert r.code == 2 and r.stderr.strip() == f"mqadmin playbook: {path}:{at}: {expected}", r
    assert not marker.exists()


# -- 4: a failed step leaves no store it created -----------------------------------------------------------

def test_4_failed_step_removes_only_the_store_it_created(pb: Playbooks, tmp_path: Path) -> None:
    """Before: the store (commitlog, a 38 MB timer wheel...) stayed behind a failed step: the writable
    Admin makes the store before the step plans and applies."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\n")
    step = "  - broker.config: {config: {flushIntervalCommitLog: abc}}\n"
    fresh = tmp_path / "new" / "a" / "store"
    r = pb.run(pb.write("p.yml", book(fresh, step, conf)))
    assert r.code == 1 and "flushIntervalCommitLog" in r.doc["steps"][0]["message"], r.doc
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.conf", "p.yml", "run.jsonl"]
    existing = tmp_path / "empty"  # a directory that was there before the step is never removed
    existing.mkdir()
    (existing / "keep").write_text("user data")
    r = pb.run(pb.write("q.yml", book(existing, step, conf)))
    assert r.code == 1
    assert (existing / "keep").read_text() == "user data"


# -- 5: --check refuses what the real run refuses ----------------------------------------------------------

@pytest.mark.parametrize(("step", "expected"), [
    ("topic.ensure: {topic: t1, attributes: {bogus.attr: x}}", "unsupported key: bogus.attr"),
    ("topic.ensure: {topic: t1, attributes: {message.type: BOGUS}}", "value is not in set"),
    ("acl.ensure: {subject: 'User:nobody', resources: ['Topic:t1'], actions: [Pub]}", "user nobody does not exist"),
])
def test_5_check_fails_as_the_run_does(pb: Playbooks, tmp_path: Path, step: str, expected: str) -> None:
    store = tmp_path / "store"
    path = pb.write("p.yml", book(store, f"  - {step}\n"))
    for mode in (("--check",), ()):
        r = pb.run(path, *mode)
        assert r.code == 1, (mode, r.stdout)
        assert r.doc["steps"][0]["status"] == "failed" and expected in r.doc["steps"][0]["message"], r.doc
        assert not store.exists()


@pytest.mark.parametrize(("step", "expected"), [
    ("topic.ensure: {topic: 'bad topic!'}", "contains illegal characters"),
    ("topic.ensure: {topic: t1, read_queues: -1}", "read_queues must be 0..1024, got -1"),
    ("topic.ensure: {topic: t1, read_queues: 100000}", "read_queues must be 0..1024, got 100000"),
    ("group.ensure: {group: 'bad group!'}", "contains illegal characters"),
    ("group.ensure: {group: g1, retry_queue_nums: -1}", "retry_queue_nums must be 0..1024"),
])
def test_5_literal_arguments_the_run_refuses_are_an_invalid_playbook(pb: Playbooks, tmp_path: Path, step: str,
                                                                     expected: str) -> None:
    """Literal (non-template) values are judged when the playbook loads: exit 2, nothing runs."""
    store = tmp_path / "store"
    path = pb.write("p.yml", book(store, f"  - {step}\n"))
    for mode in (("--check",), ()):
        r = pb.run(path, *mode)
        assert r.code == 2 and expected in r.stderr and f"{path}:7: " in r.stderr, (mode, r.stderr)
        assert not store.exists()


@pytest.mark.parametrize(("config", "expected"), [
    ("{flushIntervalCommitLog: abc}", "flushIntervalCommitLog: expected an integer, got 'abc'"),
    ("{mappedFileSizeCommitLog: 1024}", "part of the store's on-disk layout"),
])
def test_5_check_broker_config_fails_as_the_run_does(pb: Playbooks, tmp_path: Path, config: str,
                                                    expected: str) -> None:
    """broker.config showed "changed" under --check for values the broker refuses when it applies them."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\n")
    store = tmp_path / "store"
    path = pb.write("p.yml", book(store, f"  - broker.config: {{config: {config}}}\n", conf))
    for mode in (("--check",), ()):
        r = pb.run(path, *mode)
        assert r.code == 1, (mode, r.stdout)
        assert r.doc["steps"][0]["status"] == "failed" and expected in r.doc["steps"][0]["message"], r.doc
        assert not store.exists()
    assert conf.read_text() == "listenPort=0\n"


def test_5_check_acl_for_a_user_an_earlier_step_creates(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = pb.write("p.yml", book(store, '''  - user.ensure: {username: app, password: pw-123456}
  - acl.ensure: {subject: "User:app", resources: ["Topic:t1"], actions: [Pub]}
'''))
    r = pb.run(path, "--check")
    assert r.code == 0 and [s["status"] for s in r.doc["steps"]] == ["changed", "changed"], r.doc
    assert not store.exists()


# -- 6: a timed-out local shell step stops, children too ---------------------------------------------------

def test_6_timed_out_shell_step_stops_its_children(pb: Playbooks, tmp_path: Path) -> None:
    late = tmp_path / "late"
    r = pb.run(pb.write("p.yml", book(tmp_path / "s", f"  - shell: {{cmd: '(sleep 2; touch {late})', timeout: 1}}\n")))
    assert r.code == 1 and "timed out after 1s" in r.doc["steps"][0]["message"], r.doc
    time.sleep(2.5)
    assert not late.exists()


# -- 7: a lookup error in a template fails the step, with one line ------------------------------------------

@pytest.mark.parametrize(("option", "expected"), [
    ('  - shell: {cmd: "echo {{ [].pop() }}"}\n', "in 'echo {{ [].pop() }}': IndexError: pop from empty list"),
    ('  - shell: {cmd: "true"}\n    when: "{}.pop(\'k\')"\n', "when: in \"{}.pop('k')\": KeyError: 'k'"),
])
def test_7_lookup_error_in_a_template(pb: Playbooks, tmp_path: Path, option: str, expected: str) -> None:
    r = pb.run(pb.write("p.yml", book(tmp_path / "s", option)))
    assert r.code == 1
    assert r.doc["steps"][0]["status"] == "failed" and r.doc["steps"][0]["message"] == expected
    table = pb.run(pb.write("p.yml", book(tmp_path / "s", option)), output="table")
    assert table.code == 1 and "Traceback" not in table.stdout + table.stderr and "failed=1" in table.stdout
