"""Each action against a real store: plan, apply, idempotent re-run, and --check changing nothing."""

from __future__ import annotations

from pathlib import Path

from mqadmin.embedded import EmbeddedAdmin

from .conftest import Playbooks, seed_store


def book(store: Path, steps: str, config: Path | None = None) -> str:
    """A playbook on one store target; ``create: true``: the tests start from a store not made yet."""
    conf = f'    config: "{config}"\n' if config else ""
    return f'name: t\ntargets:\n  local:\n    store: "{store}"\n    create: true\n{conf}steps:\n{steps}'


def run_twice(pb: Playbooks, text: str) -> tuple[dict, dict]:
    path = pb.write("p.yml", text)
    first = pb.run(path)
    assert first.code == 0, first.stdout + first.stderr
    second = pb.run(path)
    assert second.code == 0, second.stdout
    assert second.doc["changed"] == 0, second.doc
    return first.doc, second.doc


def test_topic_perm_and_absent(pb: Playbooks, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "s")
    with EmbeddedAdmin(store, read_only=False) as admin:
        from mqadmin.admin import TopicInfo

        admin.update_topic(TopicInfo("other", 1, 1, 6))
        admin.update_topic(TopicInfo("gone", 1, 1, 6))
    first, _ = run_twice(pb, book(store, '''  - name: drain
    topic.perm: {topic: "*", write: false}
  - name: delete
    topic.absent: {topic: gone}
'''))
    changes = first["steps"][0]["changes"]
    assert sorted(c["what"] for c in changes) == ["topic gone", "topic orders-events", "topic other"]
    assert all((c["old"], c["new"]) == ("RW-", "R--") for c in changes)
    with EmbeddedAdmin(store) as admin:
        assert admin.topic_info("orders-events").perm == 4
        assert admin.topic_info("TBW102").perm == 7  # system topics are not matched by a pattern
        assert "gone" not in admin.list_topics()
        assert admin.topic_status("orders-events")[0].max_offset == 10  # data untouched


def test_group_user_acl_absent(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "s"
    setup = pb.write("setup.yml", book(store, '''  - group.ensure: {group: g1, retry_max_times: 3}
  - user.ensure: {username: u1, password: pw-12345}
  - acl.ensure: {subject: "User:u1", resources: ["Topic:a", "Topic:b"], actions: Pub}
'''))
    assert pb.run(setup).code == 0
    with EmbeddedAdmin(store) as admin:
        assert admin.get_sub_group("g1").retry_max_times == 3
    first, _ = run_twice(pb, book(store, '''  - acl.absent: {subject: "User:u1", resources: ["Topic:a"]}
  - group.absent: {group: g1}
'''))
    assert first["steps"][0]["changes"] == [{"what": "acl User:u1 Topic:a", "field": "entry", "old": "present",
                                             "new": None}]
    with EmbeddedAdmin(store) as admin:
        assert [e.resource.key for p in admin.get_acl("User:u1").policies for e in p.entries] == ["Topic:b"]
        assert admin.get_sub_group("g1") is None
    run_twice(pb, book(store, "  - acl.absent: {subject: u1}\n  - user.absent: {username: u1}\n"))
    with EmbeddedAdmin(store) as admin:
        assert admin.get_user("u1") is None


def test_acl_ensure_changes_only_what_differs(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "s"
    run_twice(pb, book(store, '''  - user.ensure: {username: u1, password: pw-12345}
  - acl.ensure: {subject: "User:u1", resources: ["Topic:a", "Topic:b"], actions: [Pub, Sub]}
'''))
    first, _ = run_twice(pb, book(store, '''  - acl.ensure: {subject: "User:u1", resources: ["Topic:a", "Topic:b"], actions: [Pub, Sub], decision: Deny, source_ips: ["10.0.0.0/8"]}
'''.replace("Topic:a\", \"Topic:b", "Topic:b")))
    assert {c["what"] for c in first["steps"][0]["changes"]} == {"acl User:u1 Topic:b"}
    with EmbeddedAdmin(store) as admin:
        entries = {e.resource.key: e for p in admin.get_acl("User:u1").policies for e in p.entries}
        assert entries["Topic:a"].decision.value == "Allow"
        assert entries["Topic:b"].decision.value == "Deny" and entries["Topic:b"].source_ips == ("10.0.0.0/8",)


def test_broker_config_persists_to_the_config_file(pb: Playbooks, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "s")
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\n# the operator's file\nflushIntervalCommitLog=500\n")
    first, _ = run_twice(pb, book(store, '''  - broker.config:
      config: {flushIntervalCommitLog: 1000, autoCreateTopicEnable: false}
''', conf))
    assert sorted((c["field"], c["old"], c["new"]) for c in first["steps"][0]["changes"]) == [
        ("autoCreateTopicEnable", "true", "false"), ("flushIntervalCommitLog", "500", "1000")]
    text = conf.read_text()
    assert "flushIntervalCommitLog=1000" in text and "autoCreateTopicEnable=false" in text
    assert text.splitlines() == ["brokerName=broker-a", "# the operator's file", "flushIntervalCommitLog=1000",
                                 "autoCreateTopicEnable=false"]
    with EmbeddedAdmin(store, conf) as admin:
        assert admin.get_broker_config()["flushIntervalCommitLog"] == "1000"

    bad = pb.write("bad.yml", book(store, "  - broker.config: {config: {noSuchKey: 1}}\n", conf))
    r = pb.run(bad)
    assert r.code == 1 and "unknown broker config key 'noSuchKey'" in r.doc["steps"][0]["message"]
    invalid = pb.write("inv.yml", book(store, "  - broker.config: {config: {flushIntervalCommitLog: soon}}\n", conf))
    r = pb.run(invalid)
    assert r.code == 1 and "flushIntervalCommitLog" in r.doc["steps"][0]["message"]
    assert "flushIntervalCommitLog=1000" in conf.read_text()  # a refused change leaves the file alone

    no_conf = pb.write("nc.yml", book(store, "  - broker.config: {config: {flushIntervalCommitLog: 700}}\n"))
    r = pb.run(no_conf)  # refused before anything runs, as playbook check refuses it
    assert r.code == 2 and "needs config: on that target (the broker's config file" in r.stderr, r.stderr


def test_offset_reset_plan_then_apply(pb: Playbooks, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "s", consumed=10)
    path = pb.write("p.yml", book(store, "  - offset.reset: {group: orders-billing, topic: orders-events, offset: 3}\n"
                                        "    register: r\n"))
    check = pb.run(path, "--check")
    assert check.code == 0 and check.doc["changed"] == 1
    assert [(c["old"], c["new"]) for c in check.doc["steps"][0]["changes"]] == [(10, 3), (10, 3)]
    with EmbeddedAdmin(store) as admin:
        assert [r.consumer_offset for r in admin.consumer_progress("orders-billing").rows] == [10, 10]
    run_twice(pb, path.read_text())
    with EmbeddedAdmin(store) as admin:
        assert [r.consumer_offset for r in admin.consumer_progress("orders-billing").rows] == [3, 3]


def test_wait_lag(pb: Playbooks, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "s", consumed=8)
    ok = pb.write("ok.yml", book(store, "  - wait.lag: {group: orders-billing, max_lag: 4}\n    register: w\n"
                                        "    assert: [w.lag == 4]\n"))
    r = pb.run(ok)
    assert r.code == 0 and r.doc["steps"][0]["status"] == "ok"
    late = pb.write("late.yml", book(store, "  - wait.lag: {group: orders-billing, timeout: 0.5, interval: 0.1}\n"))
    r = pb.run(late)
    assert r.code == 1
    assert r.doc["steps"][0]["message"] == "timed out after 0.5s: lag of orders-billing is 4 (want <= 0)"


def test_store_verify_and_rebuild_check(pb: Playbooks, tmp_path: Path) -> None:
    store = seed_store(tmp_path / "s")
    path = pb.write("p.yml", book(store, "  - store.verify: {}\n  - store.rebuild: {}\n"))
    r = pb.run(path, "--check")
    assert r.code == 0
    assert [s["status"] for s in r.doc["steps"]] == ["ok", "ok"]
    assert r.doc["steps"][1]["message"] == "verifyStore finds nothing to rebuild"
    _corrupt_first_cq_unit(store, "orders-events")
    r = pb.run(path, "--check")
    assert r.code == 1 and r.doc["steps"][0]["status"] == "failed"
    assert "verifyStore found 1 mismatch(es)" in r.doc["steps"][0]["message"]


def test_file_copy_and_shell_locally(pb: Playbooks, tmp_path: Path) -> None:
    src = tmp_path / "broker.conf"
    src.write_text("brokerName=broker-b\n")
    dest = tmp_path / "out" / "broker.conf"
    marker = tmp_path / "marker"
    text = book(tmp_path / "s", f'''  - file.copy: {{src: "{src}", dest: "{dest}", mode: "0600"}}
  - shell: {{cmd: "touch {marker}", creates: "{marker}"}}
''')
    path = pb.write("p.yml", text)
    r = pb.run(path, "--check")
    assert [s["status"] for s in r.doc["steps"]] == ["changed", "skipped"] and not dest.exists()
    first, second = run_twice(pb, text)
    assert [s["status"] for s in first["steps"]] == ["changed", "changed"]
    assert dest.read_text() == "brokerName=broker-b\n" and (dest.stat().st_mode & 0o777) == 0o600
    assert [s["message"] for s in second["steps"]] == [f"{dest} is up to date", f"{marker} exists; not run"]


def _corrupt_first_cq_unit(store: Path, topic: str) -> None:
    """Give the first consume-queue unit of queue 0 a wrong size: verifyStore must see a mismatch."""
    import struct

    cq = next((store / "consumequeue" / topic / "0").iterdir())
    data = bytearray(cq.read_bytes())
    data[8:12] = struct.pack(">i", 7)
    cq.write_bytes(bytes(data))
