"""Regression tests for a second probe's report on `mqadmin playbook`: --check, validation at check
time, bad YAML and numbers, SSH errors. Each failed before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Playbooks, seed_store
from .test_actions import book

pytestmark = pytest.mark.timeout(120)


def summary(r) -> list:  # noqa: ANN001 - a conftest Run
    return [(s["name"], s["status"], s["message"]) for s in r.doc["steps"]]


# -- --check plans what earlier steps of the run create ----------------------------------------------------

def test_check_passes_where_the_run_passes_after_earlier_steps_create(pb: Playbooks, tmp_path: Path) -> None:
    """Before: --check failed 'topic [ct] does not exist' (topic.perm, offset.reset) and 'not a store'
    (store.verify) though the real run, whose earlier steps create them, succeeds."""
    path = pb.write("p.yml", book(tmp_path / "s", '''  - topic.ensure: {topic: ct}
  - group.ensure: {group: cg}
  - topic.perm: {topic: ct, write: false}
  - offset.reset: {group: cg, topic: ct, timestamp: now}
  - store.verify: {}
'''))
    check = pb.run(path, "--check")
    assert check.code == 0, summary(check)
    assert [s["status"] for s in check.doc["steps"]] == ["changed", "changed", "changed", "changed", "ok"]
    assert not (tmp_path / "s").exists()
    real = pb.run(path)
    assert real.code == 0, summary(real)


# -- playbook check judges literal arguments the run would refuse -------------------------------------------

HEAD = '''name: t
targets:
  local:
    store: "{{ store }}"
steps:
  - name: earlier step that changes something
    topic.ensure: {topic: early}
'''

BAD_ARGS = [
    ("reset without timestamp or offset", "offset.reset: {group: g, topic: t}",
     "offset.reset needs exactly one of timestamp: or offset:"),
    ("reset to yesterday", "offset.reset: {group: g, topic: t, timestamp: yesterday}", "offset.reset: timestamp"),
    ("perm letter", "topic.ensure: {topic: t, perm: Q}", "topic.ensure: perm"),
    ("topic name", "topic.ensure: {topic: 'bad name!'}", "contains illegal characters"),
    ("too many queues", "topic.ensure: {topic: t, read_queues: 5000}", "topic.ensure: read_queues must be 0..1024"),
    ("negative queues", "topic.ensure: {topic: t, write_queues: -4}", "topic.ensure: write_queues must be 0..1024"),
    ("huge queues", "topic.ensure: {topic: t, read_queues: 99999999999999999999}", "read_queues must be 0..1024"),
    ("group name", "group.ensure: {group: 'bad group!'}", "group.ensure: group"),
    ("retry range", "group.ensure: {group: g, retry_max_times: -5}", "group.ensure: retry_max_times must be -1.."),
    ("rebuild part", "store.rebuild: {parts: [bogus]}", "store.rebuild: parts must be a list of cq, index, offsets"),
    ("acl resource", "acl.ensure: {subject: 'User:a', resources: [1], actions: [Pub]}", "acl.ensure: resources"),
    ("acl action", "acl.ensure: {subject: 'User:a', resources: ['Topic:t'], actions: [Fly]}", "acl.ensure: actions"),
    ("shell timeout", "shell: {cmd: 'true', timeout: -1}", "shell: timeout must be a finite number of seconds >= 0"),
    ("wait timeout nan", "wait.lag: {group: g, timeout: .nan}", "wait.lag: timeout must be a finite number"),
    ("wait interval 0", "wait.lag: {group: g, interval: 0}", "wait.lag: interval must be a finite number of seconds > 0"),
    ("stop timeout inf", "broker.stop: {timeout: .inf}", "broker.stop: timeout must be a finite number"),
]


@pytest.mark.parametrize(("title", "step", "message"), BAD_ARGS, ids=[c[0] for c in BAD_ARGS])
def test_check_refuses_literal_arguments_the_run_would_refuse(pb: Playbooks, tmp_path: Path, title: str, step: str,
                                                               message: str) -> None:
    """Before: `playbook check` passed them and the run failed at that step, after the earlier step ran."""
    path = pb.write("p.yml", HEAD + f"  - name: bad\n    {step}\n")
    r = pb.check(path)
    assert r.code == 2, (r.stdout, r.stderr)
    assert f"{path}:9: " in r.stderr and message in r.stderr, r.stderr
    store = tmp_path / "store"
    r = pb.run(path, "-e", f"store={store}")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, (r.stdout, r.stderr)
    assert not store.exists()


def test_a_templated_argument_is_judged_when_it_renders(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", HEAD + '  - name: bad\n    topic.ensure: {topic: t, read_queues: "{{ n }}"}\n')
    store = seed_store(tmp_path / "s")  # store: must name a store (the target has no create: true)
    assert pb.check(path, "-e", "n=4", "-e", f"store={store}").code == 0
    r = pb.run(path, "-e", f"store={store}", "-e", "n=5000")
    assert r.code == 1
    assert r.doc["steps"][1]["message"] == "topic.ensure: read_queues must be 0..1024, got 5000"


# -- numbers: no .inf, .nan or negative durations -----------------------------------------------------------

@pytest.mark.parametrize("value", [".inf", ".nan", "-1"])
def test_delay_must_be_a_finite_number(pb: Playbooks, tmp_path: Path, value: str) -> None:
    """Before: `delay: .inf` passed and the retry raised OverflowError (a traceback, no run_end in the log)."""
    path = pb.write("p.yml", HEAD + f"  - name: s\n    shell: {{cmd: 'false'}}\n    retries: 1\n    delay: {value}\n")
    r = pb.check(path)
    assert r.code == 2 and f"{path}:11: delay: must be a finite number of seconds >= 0" in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["-1", ".nan", ".inf", "0"])
def test_ssh_timeout_must_be_a_positive_finite_number(pb: Playbooks, value: str) -> None:
    """Before: -1 and .nan failed at connect with a bare 'ValueError', .inf waited for ever."""
    text = f'''name: t
targets:
  h:
    store: /tmp/x
    ssh: {{host: 127.0.0.1, user: u, key_file: /k, timeout: {value}}}
steps:
  - shell: {{cmd: 'true'}}
'''
    r = pb.check(pb.write("p.yml", text))
    assert r.code == 2 and "target 'h': ssh.timeout must be a finite number of seconds > 0" in r.stderr, r.stderr


# -- bad YAML: one line naming the file (and line), exit 2 ---------------------------------------------------

def test_control_character_is_one_line_with_its_line(pb: Playbooks) -> None:
    """Before: yaml.reader.ReaderError traceback (the reader runs before the parser's try)."""
    path = pb.write("p.yml", 'name: t\ntargets: {l: {store: /tmp/x}}\nsteps:\n  - shell: {cmd: "a\x01b"}\n')
    r = pb.check(path)
    assert r.code == 2, r.stderr
    assert r.stderr.strip() == (f"mqadmin playbook: {path}:4: invalid YAML: unacceptable character #x0001 (control "
                                'characters are not allowed; in a double-quoted string write it as an escape, '
                                'e.g. "\\x01")')


@pytest.mark.parametrize("depth", [150, 300, 3000])
def test_deep_nesting_is_one_line(pb: Playbooks, depth: int) -> None:
    """Before: RecursionError traceback from ~250 levels."""
    path = pb.write("p.yml", 'name: t\ntargets: {l: {store: /tmp/x}}\nsteps:\n  - shell: {cmd: "true"}\n'
                             f"vars: {{k: {'[' * depth}{']' * depth}}}\n")
    r = pb.check(path)
    assert r.code == 2, r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"mqadmin playbook: {path}")
    assert err.endswith("the YAML is nested too deeply (more than 100 levels)"), err


def test_many_steps_are_refused_with_what_was_counted(pb: Playbooks) -> None:
    """Before: a 20,000-step playbook without a single alias was refused 'through nested aliases'."""
    steps = "".join(f"  - shell: {{cmd: 'echo {i}'}}\n" for i in range(20_000))
    path = pb.write("p.yml", "name: t\ntargets: {l: {store: /tmp/x}}\nsteps:\n" + steps)
    r = pb.check(path)
    assert r.code == 2
    assert "has more than 100,000 nodes (mappings, lists, keys and values" in r.stderr, r.stderr
    assert "nested aliases" not in r.stderr


def test_one_long_string_behind_many_aliases_is_refused_quickly(pb: Playbooks) -> None:
    """Before: 1 MB referenced by 50,000 aliases kept `check` busy for minutes (each copy scanned)."""
    import time

    aliases = ", ".join(["*big"] * 50_000)
    path = pb.write("p.yml", "name: t\ntargets: {l: {store: /tmp/x}}\nsteps:\n  - shell: {cmd: 'true'}\n"
                             f"vars:\n  big: &big {'x' * 1_000_000}\n  many: [{aliases}]\n")
    started = time.monotonic()
    r = pb.check(path)
    assert r.code == 2 and "strings add up to more than 10,000,000 bytes" in r.stderr, r.stderr
    assert time.monotonic() - started < 20


def test_recursive_macro_fails_the_step_in_one_line(pb: Playbooks, tmp_path: Path) -> None:
    """Before: an uncaught RecursionError (traceback, no run_end in the run log)."""
    path = pb.write("p.yml", HEAD + '''  - name: recurse
    shell: {cmd: "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"}
''')
    r = pb.run(path, "-e", f"store={seed_store(tmp_path / 's')}")
    assert r.code == 1
    assert r.doc["steps"][1]["message"].endswith("recursion too deep (a macro that calls itself?)")
    assert '"event": "run_end"' in pb.log.read_text()
