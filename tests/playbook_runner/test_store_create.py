"""A store target names an existing store unless it asks for a new one (``create: true``), as mqadmin
refuses a write on a path that is not a store unless ``--create`` is given: a typo in ``-e store=``
must fail before any step, in ``run``, ``run --check`` and ``check``, and leave nothing on disk."""

from __future__ import annotations

from pathlib import Path

from mqadmin.embedded import EmbeddedAdmin

from .conftest import EXAMPLES, Playbooks, seed_store

ONBOARD = EXAMPLES / "onboard-team.yml"


def _refused(typo: Path, hint: str = "give -e create=true") -> str:
    return f"target local: {typo} is not a store directory (it does not exist) ({hint} to make a new store there)"


def test_a_typo_in_store_creates_nothing_in_run_check_and_plan(pb: Playbooks, tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    for args in ((), ("--check",)):
        r = pb.run(ONBOARD, "-e", f"store={typo}", "-e", "password=secret123", *args)
        assert r.code == 2, r.stdout
        assert r.stdout == ""  # refused before any step: no report, nothing ran
        assert r.stderr.strip() == f"mqadmin playbook: {ONBOARD}:4: {_refused(typo)}"
        assert not typo.exists()
    r = pb.check(ONBOARD, "-e", f"store={typo}", "-e", "password=secret123")
    assert r.code == 2 and r.stderr.strip() == f"mqadmin playbook: {ONBOARD}:4: {_refused(typo)}"
    assert not typo.exists()


def test_create_true_makes_the_new_store_and_check_plans_against_an_empty_one(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "new" / "store"
    plan = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=secret123", "-e", "create=true", "--check")
    assert plan.code == 0, plan.stderr
    assert (plan.doc["changed"], plan.doc["failed"]) == (4, 0) and not (tmp_path / "new").exists()
    r = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=secret123", "-e", "create=true")
    assert r.code == 0, r.stderr
    assert (r.doc["changed"], r.doc["failed"]) == (4, 0)
    with EmbeddedAdmin(store) as admin:
        assert admin.topic_info("orders-events").queue_type == "BatchCQ"
    again = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=secret123")  # an existing store needs no create
    assert again.code == 0 and again.doc["changed"] == 0


def test_a_literal_create_key_and_its_schema(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "s"
    book = "name: t\ntargets:\n  local:\n    store: {store}\n{create}steps:\n  - group.ensure: {{group: g1}}\n"
    refused = pb.write("no.yml", book.format(store=store, create=""))
    r = pb.run(refused)
    assert r.code == 2 and r.stderr.strip().endswith(_refused(store, "give the target create: true"))
    assert not store.exists()
    made = pb.write("yes.yml", book.format(store=store, create="    create: true\n"))
    r = pb.run(made)
    assert r.code == 0 and r.doc["changed"] == 1, r.stderr
    bad = pb.write("bad.yml", book.format(store=store, create="    create: maybe\n"))
    r = pb.check(bad)
    assert r.code == 2 and r.stderr.strip() == (f"mqadmin playbook: {bad}:5: target 'local': create: must be "
                                                "true, false or a template, got 'maybe'")
    cluster = pb.write("cluster.yml", "name: t\ntargets:\n  c:\n    namesrv: 127.0.0.1:9876\n    create: true\n"
                                      "steps:\n  - group.ensure: {group: g1}\n")
    r = pb.check(cluster)
    assert r.code == 2 and "target 'c': create: is for a store: target" in r.stderr


def test_an_existing_directory_that_is_not_a_store_stays_refused(pb: Playbooks, tmp_path: Path) -> None:
    other = tmp_path / "docs"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    book = pb.write("b.yml", f"name: t\ntargets:\n  local:\n    store: {other}\n    create: true\n"
                             "steps:\n  - group.ensure: {group: g1}\n")
    r = pb.run(book)
    assert r.code == 1 and "is not a store directory (no commitlog" in r.doc["steps"][0]["message"]
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_broker_steps_before_the_first_admin_step_are_not_refused(pb: Playbooks, tmp_path: Path) -> None:
    """broker.stop on a store that is not there yet says "no broker holds" (a broker makes its own store)."""
    store = tmp_path / "later"
    book = pb.write("b.yml", f"name: t\ntargets:\n  local:\n    store: {store}\n"
                             "steps:\n  - broker.stop: {timeout: 5}\n")
    r = pb.run(book)
    assert r.code == 0 and r.doc["steps"][0]["message"] == f"no broker holds {store}"
    assert not store.exists()


def test_a_seeded_store_needs_no_create(pb: Playbooks, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "store", topic="billing-events", group="billing-app")
    r = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=secret123")
    assert r.code == 0 and r.doc["changed"] == 4, r.stderr
