"""The issue's onboarding playbook, as written (plus ``create:``, so a new store is made only on purpose):
run, re-run (changed: 0), --check (changes nothing)."""

from __future__ import annotations

from pathlib import Path

from mqadmin.embedded import EmbeddedAdmin

from .conftest import EXAMPLES, Playbooks

ONBOARD = EXAMPLES / "onboard-team.yml"

ISSUE_TEXT = '''name: onboard the orders team
targets:
  local:
    store: "{{ store }}"
vars:
  team: orders
steps:
  - name: events topic, BatchCQ
    topic.ensure: {target: local, topic: "{{ team }}-events", read_queues: 4, write_queues: 4, queue_type: BatchCQ}
  - name: billing consumer group
    group.ensure: {target: local, group: "{{ team }}-billing"}
  - name: application user
    user.ensure: {target: local, username: "{{ team }}-app", password: "{{ password }}", user_type: Normal}
  - name: the app may publish and subscribe to its own resources
    acl.ensure: {target: local, subject: "User:{{ team }}-app", resources: ["Topic:{{ team }}-*", "Group:{{ team }}-*"], actions: [Pub, Sub], decision: Allow}
'''


CREATE_LINE = '    create: "{{ create | default(false) }}"  # -e create=true: store: is a new store, made on purpose\n'


def test_example_file_is_the_issue_text() -> None:
    """The issue's text and one line: ``create:`` (-e create=true) makes a new store on purpose; without
    it ``-e store=`` must name an existing one (a typo builds nothing, as mqadmin without --create)."""
    assert ONBOARD.read_text() == ISSUE_TEXT.replace('    store: "{{ store }}"\n',
                                                     '    store: "{{ store }}"\n' + CREATE_LINE)


def test_onboard_run_rerun_and_check(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=Orders-Secret-1", "-e", "create=true")
    assert first.code == 0, first.stderr
    doc = first.doc
    assert (doc["ok"], doc["changed"], doc["failed"]) == (0, 4, 0)
    assert [s["status"] for s in doc["steps"]] == ["changed"] * 4
    assert {s["target"] for s in doc["steps"]} == {"local"}
    assert doc["steps"][0]["changes"][0] == {"what": "topic orders-events", "field": "exists", "old": False,
                                             "new": True}
    assert "Orders-Secret-1" not in first.stdout

    with EmbeddedAdmin(store) as admin:
        topic = admin.topic_info("orders-events")
        assert (topic.read_queue_nums, topic.write_queue_nums, topic.queue_type) == (4, 4, "BatchCQ")
        assert admin.get_sub_group("orders-billing") is not None
        user = admin.get_user("orders-app")
        assert user is not None and user.password == "Orders-Secret-1" and user.user_type.value == "Normal"
        acl = admin.get_acl("User:orders-app")
        keys = sorted(e.resource.key for p in acl.policies for e in p.entries)
        assert keys == ["Group:orders-*", "Topic:orders-*"]

    second = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=Orders-Secret-1")
    assert second.code == 0
    assert (second.doc["changed"], second.doc["ok"]) == (0, 4)

    before = {p.relative_to(store): p.read_bytes() for p in (store / "config").rglob("*") if p.is_file()}
    check = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=Rotated-2", "--check")
    assert check.code == 0
    assert check.doc["check"] is True and check.doc["changed"] == 1
    step = check.doc["steps"][2]
    assert step["status"] == "changed" and step["changes"] == [
        {"what": "user orders-app", "field": "password", "old": "********", "new": "********"}]
    assert "Rotated-2" not in check.stdout
    after = {p.relative_to(store): p.read_bytes() for p in (store / "config").rglob("*") if p.is_file()}
    assert after == before
    with EmbeddedAdmin(store) as admin:
        assert admin.get_user("orders-app").password == "Orders-Secret-1"


def test_check_on_a_new_store_creates_nothing(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "fresh"
    r = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=x-secret", "-e", "create=true", "--check")
    assert r.code == 0
    assert r.doc["changed"] == 4
    assert not store.exists()


def test_table_and_yaml_output(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "store"
    table = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=pw-123456", "-e", "create=true", output="table")
    assert table.code == 0
    assert "ok=0 changed=4 failed=0 skipped=0" in table.stdout
    assert "events topic, BatchCQ" in table.stdout
    yml = pb.run(ONBOARD, "-e", f"store={store}", "-e", "password=pw-123456", output="yaml")
    assert yml.code == 0 and "changed: 0" in yml.stdout


def test_run_log_has_one_line_per_step(pb: Playbooks, tmp_path: Path) -> None:
    import json

    pb.run(ONBOARD, "-e", f"store={tmp_path / 's'}", "-e", "password=Log-Secret-9", "-e", "create=true")
    lines = [json.loads(x) for x in pb.log.read_text().splitlines()]
    assert [x["event"] for x in lines] == ["run_start", "step", "step", "step", "step", "run_end"]
    step = lines[1]
    assert step["status"] == "changed" and step["changes"] and step["started"] <= step["ended"]
    assert "Log-Secret-9" not in pb.log.read_text()
