"""Regression tests for a second probe's report on `mqadmin playbook`: --check, validation at check
time, bad YAML and numbers, SSH errors. Each failed before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Playbooks
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
    assert pb.check(path, "-e", "n=4", "-e", f"store={tmp_path / 's'}").code == 0
    r = pb.run(path, "-e", f"store={tmp_path / 's'}", "-e", "n=5000")
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
