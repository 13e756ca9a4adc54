"""A template error of any Python type fails its step, not the run; vars: resolve in any order; a number
from vars: names a thing as the same number from -e does; a full disk over SSH is named as one.

Why: each was a run that crashed with a traceback, or failed half done, after check had called the
playbook valid (and a full remote disk read "size mismatch in put")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from small_fs import mount_small_fs

from mqadmin.embedded import EmbeddedAdmin

from .conftest import Playbooks
from .sshd import Sshd
from .test_ssh import host_book


def _head(store: Path, variables: str = "  team: orders\n") -> str:
    return f"name: p\ntargets:\n  l: {{store: {store}, create: true}}\nvars:\n{variables}steps:\n"


# -- 1: any exception out of a template fails its step, with the report and the log complete ------------

@pytest.mark.parametrize("expr, says", [
    ("team | dictsort", "object has no attribute 'items'"),
    ("'a' | truncate(-5)", "AssertionError: expected length >= 3, got -5"),
    ("'a' | urlize(rel=1)", "AttributeError"),
    ("('x' * 10**13) | length", "not allowed in a playbook: str repeated to 10000000000000 items"),
    ("([1] * 10**9) | length", "not allowed in a playbook: list repeated to 1000000000 items"),
    ("10 ** 100000", "10 ** 100000 is too large"),
])
@pytest.mark.parametrize("where", ["arg", "when", "until", "assert"])
def test_a_template_raising_any_error_fails_its_step_not_the_run(pb: Playbooks, tmp_path: Path, expr: str,
                                                                  says: str, where: str) -> None:
    """Before: AttributeError, AssertionError or MemoryError out of a filter ended the run with a
    traceback after step 1 had created its topic: no report, no failed step and no run_end in the log."""
    second = {"arg": f'  - shell: {{cmd: "echo {{{{ {expr} }}}}"}}\n',
              "when": f'  - shell: {{cmd: "echo hi"}}\n    when: "{expr}"\n',
              "until": f'  - shell: {{cmd: "echo hi"}}\n    until: "{expr}"\n    retries: 0\n',
              "assert": f'  - shell: {{cmd: "echo hi"}}\n    assert: "{expr}"\n'}[where]
    play = pb.write("p.yml", _head(tmp_path / "s") + '  - topic.ensure: {topic: "{{ team }}-events"}\n' + second)
    assert pb.check(play).code == 0
    r = pb.run(play)
    assert r.code == 1, r.stdout + r.stderr
    assert [s["status"] for s in r.doc["steps"]] == ["changed", "failed"]
    message = r.doc["steps"][1]["message"]
    assert f"in '{expr}'" in message or f'in "{expr}"' in message or f"{{{{ {expr} }}}}" in message, message
    assert says in message and "\n" not in message
    events = [json.loads(line) for line in pb.log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["run_start", "step", "step", "run_end"]
    assert events[2]["status"] == "failed" and events[3]["failed"] == 1


def test_a_var_whose_template_raises_is_refused_before_any_step(pb: Playbooks, tmp_path: Path) -> None:
    play = pb.write("p.yml", _head(tmp_path / "s", "  team: orders\n  sorted: \"{{ team | dictsort }}\"\n")
                    + '  - topic.ensure: {topic: "{{ team }}-events"}\n')
    r = pb.run(play)
    assert r.code == 2
    assert r.stderr.strip() == (f"mqadmin playbook: {play}:6: vars.sorted: in '{{{{ team | dictsort }}}}': "
                                "AttributeError: 'str' object has no attribute 'items'")
    assert not (tmp_path / "s").exists()


# -- 3: vars resolve whatever their order; cycles are refused with their line ---------------------------

def test_vars_may_read_vars_defined_below_them(pb: Playbooks, tmp_path: Path) -> None:
    """Before: rendered in file order, group: stored an Undefined (step 2 failed "group must be string,
    got _PlaybookUndefined") and topic: failed the run "'team' is undefined" with no line."""
    store = tmp_path / "s"
    play = pb.write("p.yml", _head(store, '  group: "{{ team }}"\n  topic: "{{ team }}-events"\n  team: orders\n'
                                          "  myself: \"{{ myself | default('x') }}\"\n")
                    + '  - topic.ensure: {topic: "{{ topic }}"}\n  - group.ensure: {group: "{{ group }}"}\n'
                    + '  - topic.ensure: {topic: "{{ topic }}-{{ myself }}"}\n')
    assert pb.check(play).code == 0
    r = pb.run(play)
    assert r.code == 0, r.stdout + r.stderr
    assert [s["message"] for s in r.doc["steps"]] == ["changed: topic orders-events", "changed: group orders",
                                                      "changed: topic orders-events-x"]
    r = pb.run(play, "-e", "team=billing")
    assert [s["message"] for s in r.doc["steps"]] == ["changed: topic billing-events", "changed: group billing",
                                                      "changed: topic billing-events-x"]


def test_vars_reading_each_other_in_a_cycle_are_refused_with_the_line(pb: Playbooks, tmp_path: Path) -> None:
    play = pb.write("p.yml", _head(tmp_path / "s", '  a: "{{ b }}-x"\n  b: "{{ [c] }}"\n  c: "{{ a }}"\n')
                    + '  - topic.ensure: {topic: "{{ a }}"}\n')
    for r in (pb.check(play), pb.run(play)):
        assert r.code == 2
        assert r.stderr.strip().endswith(f"{play}:5: vars: a -> b -> c -> a read each other in a cycle")
    assert not (tmp_path / "s").exists()


def test_a_bare_undefined_attribute_is_an_error_never_an_undefined_value(pb: Playbooks, tmp_path: Path) -> None:
    """``{{ x.nope }}`` alone used to yield Jinja's Undefined object, stored or passed to the action."""
    play = pb.write("p.yml", _head(tmp_path / "s", "  team: {name: orders}\n  group: \"{{ team.nope }}\"\n")
                    + '  - group.ensure: {group: "{{ group }}"}\n')
    r = pb.run(play)
    assert r.code == 2
    assert r.stderr.strip() == f"mqadmin playbook: {play}:6: vars.group: in '{{{{ team.nope }}}}': 'dict object' " \
                               "has no attribute 'nope'"


# -- 4: a number from vars: works for a string option as it does from -e --------------------------------

def test_a_number_from_vars_is_a_name_as_the_same_number_from_minus_e(pb: Playbooks, tmp_path: Path) -> None:
    """Before: "topic.ensure: topic must be string, got int 42" (from vars:), while -e team=42 worked."""
    store = tmp_path / "s"
    play = pb.write("p.yml", _head(store, "  team: 42\n") + '  - group.ensure: {group: "g{{ team }}"}\n'
                    + '  - topic.ensure: {topic: "{{ team }}"}\n  - group.ensure: {group: "{{ team }}"}\n')
    r = pb.run(play)
    assert r.code == 0, r.stdout
    assert [s["message"] for s in r.doc["steps"]] == ["changed: group g42", "changed: topic 42", "changed: group 42"]
    assert pb.run(play, "-e", "team=42").doc["changed"] == 0
    with EmbeddedAdmin(store) as admin:
        assert admin.topic_info("42").topic_name == "42"


# -- 5: file.copy to a full disk over SSH says so, as on the local target --------------------------------

def test_file_copy_to_a_full_disk_over_ssh_says_the_disk_is_full(pb: Playbooks, sshd: Sshd, tmp_path: Path) -> None:
    """Before: "cannot write X: size mismatch in put!  2097152 != 3000000" (paramiko's words)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mount_small_fs("tmpfs", mnt, 2)
    try:
        src = tmp_path / "big.bin"
        src.write_bytes(b"x" * 3_000_000)
        dest = mnt / "big.bin"
        play = pb.write("c.yml", host_book(sshd, tmp_path / "store", f'  - file.copy: {{target: host, src: "{src}", '
                                                                      f'dest: "{dest}"}}\n'))
        r = pb.run(play)
        assert r.code == 1, r.stdout
        message = r.doc["steps"][0]["message"]
        assert message == (f"ssh {sshd.user}@127.0.0.1:{sshd.port}: cannot write {dest}: No space left on device "
                       "on the host (it took 2097152 of 3000000 bytes)"), \
            message
        assert os.listdir(mnt) == []  # the temporary file is gone
    finally:
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True)
