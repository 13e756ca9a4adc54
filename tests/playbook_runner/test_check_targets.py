"""``playbook check`` finds a target whose store: and namesrv: both render empty, which ``run``
refuses at its first step (``store: "{{ store | default('') }}"`` hides the variable from the
undefined-variable check)."""

from __future__ import annotations

from pathlib import Path

from .conftest import EXAMPLES, Playbooks, seed_store

RESET = EXAMPLES / "reset-group-to-time.yml"
REST = ("-e", "group=G", "-e", "topic=T", "-e", "timestamp=2026-11-28#00:00:00:000")


def test_check_refuses_a_target_that_renders_empty_as_run_does(pb: Playbooks, tmp_path: Path) -> None:
    r = pb.check(RESET, *REST)
    assert r.code == 2, (r.stdout, r.stderr)
    message = ("target broker: store: and namesrv: both render empty; give -e store=DIR or "
               "-e namesrv=HOST:PORT")
    assert f"{RESET}:7: {message}" in r.stderr, r.stderr
    run = pb.run(RESET, *REST)
    assert run.code == 1 and message in run.stdout, (run.stdout, run.stderr)


def test_check_with_store_or_namesrv_is_valid(pb: Playbooks, tmp_path: Path) -> None:
    for extra in (f"store={seed_store(tmp_path / 'store')}", "namesrv=127.0.0.1:9876"):
        r = pb.check(RESET, *REST, "-e", extra)
        assert r.code == 0 and "valid playbook" in r.stdout, (extra, r.stderr)


def test_check_without_e_lists_store_and_namesrv_as_needed(pb: Playbooks) -> None:
    r = pb.check(RESET)
    assert r.code == 0, r.stderr
    assert "needs -e for: group, namesrv, store, timestamp, topic" in r.stdout


def test_a_store_target_given_an_empty_store(pb: Playbooks) -> None:
    path = pb.write("p.yml", 'name: p\ntargets:\n  local:\n    store: "{{ store }}"\nsteps:\n'
                             '  - name: g\n    group.ensure: {group: g}\n')
    r = pb.check(path, "-e", "store=")
    assert r.code == 2 and f"{path}:3: target local: store: renders to an empty path; give -e store=DIR" \
        in r.stderr, r.stderr
    r = pb.check(path)  # no -e: listed as needed, as before
    assert r.code == 0 and "needs -e for: store" in r.stdout, r.stderr


def test_an_unused_target_is_not_checked(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", 'name: p\ntargets:\n  a:\n    store: "{{ store }}"\n'
                             '  spare:\n    store: "{{ other | default(\'\') }}"\n    namesrv: "{{ ns | default(\'\') }}"\n'
                             'steps:\n  - name: g\n    group.ensure: {target: a, group: g}\n')
    r = pb.check(path, "-e", f"store={seed_store(tmp_path / 's')}")
    assert r.code == 0, r.stderr
