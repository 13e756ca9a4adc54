"""Step options (when, register, until/retries/delay, ignore_errors, serial, assert, check_mode),
templating (native types, sandbox, -e overrides), secrets masking, --limit, and stopping on failure."""

from __future__ import annotations

import json
from pathlib import Path

from mqadmin.embedded import EmbeddedAdmin

from .conftest import Playbooks, seed_store


def head(store: Path, extra_targets: str = "") -> str:
    return f'name: t\ntargets:\n  local:\n    store: "{store}"\n    create: true\n{extra_targets}steps:\n'


def test_when_register_assert_and_native_types(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "s"
    path = pb.write("p.yml", head(store).replace("steps:\n", "vars:\n  n: 2\nsteps:\n") + '''  - name: topic
    topic.ensure: {topic: t1, read_queues: "{{ n }}", write_queues: "{{ (n | int) * 2 }}"}
    register: made
  - name: only when it changed
    group.ensure: {group: g1}
    when: made.changed
  - name: never
    group.ensure: {group: g2}
    when: "not made.changed"
  - name: checks
    assert:
      - made.status == "changed"
      - made.changes | length >= 2
''')
    r = pb.run(path)
    assert r.code == 0, r.stderr
    assert [s["status"] for s in r.doc["steps"]] == ["changed", "changed", "skipped", "ok"]
    with EmbeddedAdmin(store) as admin:
        t = admin.topic_info("t1")
        assert (t.read_queue_nums, t.write_queue_nums) == (2, 4)
        assert admin.get_sub_group("g2") is None
    # -e overrides vars; "3" from the command line is coerced for an integer option
    r = pb.run(path, "-e", "n=3")
    assert r.code == 0, r.stdout
    assert r.doc["steps"][0]["changes"] == [{"what": "topic t1", "field": "read_queues", "old": 2, "new": 3},
                                            {"what": "topic t1", "field": "write_queues", "old": 4, "new": 6}]


def test_failing_step_stops_the_play(pb: Playbooks, tmp_path: Path) -> None:
    store = tmp_path / "s"
    path = pb.write("p.yml", head(store) + '''  - name: fine
    group.ensure: {group: g1}
  - name: breaks
    topic.perm: {topic: no-such-topic, write: false}
  - name: never reached
    group.ensure: {group: g2}
''')
    r = pb.run(path)
    assert r.code == 1
    doc = r.doc
    assert [s["status"] for s in doc["steps"]] == ["changed", "failed"]
    assert doc["steps"][1]["message"] == "topic [no-such-topic] does not exist"
    assert doc["failed"] == 1 and doc["stopped"] == "step 2 'breaks' failed; later steps were not run"
    with EmbeddedAdmin(store) as admin:
        assert admin.get_sub_group("g2") is None


def test_ignore_errors_continues(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", head(tmp_path / "s") + '''  - name: breaks
    topic.perm: {topic: nope, write: false}
    ignore_errors: true
    register: broke
  - name: sees the failure
    assert: ["broke.failed", "'does not exist' in broke.msg"]
''')
    r = pb.run(path)
    assert r.code == 0, r.stdout
    assert r.doc["ignored"] == 1 and r.doc["failed"] == 0
    assert r.doc["steps"][0]["ignored"] is True and r.doc["steps"][1]["status"] == "ok"


def test_assert_failure(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", head(tmp_path / "s") + '''  - name: topic
    topic.ensure: {topic: t1, read_queues: 4}
    assert: ["result.read_queues == 5"]
''')
    r = pb.run(path)
    assert r.code == 1
    assert r.doc["steps"][0]["message"] == "assertion failed: result.read_queues == 5"


def test_until_retries_delay(pb: Playbooks, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    path = pb.write("p.yml", head(tmp_path / "s") + f'''  - name: count up
    shell: {{cmd: "echo x >> {counter}; wc -l < {counter}"}}
    register: c
    until: c.stdout | trim | int >= 3
    retries: 5
    delay: 0
  - name: gives up
    shell: {{cmd: "echo 1"}}
    until: result.stdout | trim == "2"
    retries: 2
    delay: 0
''')
    r = pb.run(path)
    assert r.code == 1
    first, second = r.doc["steps"]
    assert first["status"] == "changed" and first["attempts"] == 3
    assert second["status"] == "failed" and second["attempts"] == 3
    assert second["message"].startswith('until: result.stdout | trim == "2" still false after 3 attempt(s)')


def test_serial_rolls_and_stops_before_the_next_batch(pb: Playbooks, tmp_path: Path) -> None:
    targets = "".join(f'  b{i}:\n    store: "{tmp_path / f"b{i}"}"\n    create: true\n' for i in range(1, 5))
    text = "name: rolling\ntargets:\n" + targets + '''steps:
  - name: topic everywhere, two at a time
    topic.ensure: {target: "b*", topic: t1}
    serial: 2
    register: made
  - name: every batch changed its target
    assert: ["made.changed and made.ok and made.results | length == 4"]
  - name: drain the second batch; b3 has no topic t2 and fails
    topic.perm: {target: [b1, b3, b4], topic: "{{ 't2' if target == 'b3' else 't1' }}", write: false}
    serial: 1
'''
    r = pb.run(pb.write("p.yml", text))
    assert r.code == 1
    rows = [(s["step"], s["target"], s["status"]) for s in r.doc["steps"]]
    assert rows == [(1, "b1", "changed"), (1, "b2", "changed"), (1, "b3", "changed"), (1, "b4", "changed"),
                    (2, "-", "ok"), (3, "b1", "changed"), (3, "b3", "failed"), (3, "b4", "skipped")]
    with EmbeddedAdmin(tmp_path / "b4") as admin:
        assert admin.topic_info("t1").perm == 6  # b4 was never touched


def test_limit(pb: Playbooks, tmp_path: Path) -> None:
    text = f'name: t\ntargets:\n  a: {{store: "{tmp_path / "a"}", create: true}}\n  b: {{store: "{tmp_path / "b"}", create: true}}\nsteps:\n' \
           '  - group.ensure: {target: [a, b], group: g}\n  - group.ensure: {target: b, group: h}\n'
    r = pb.run(pb.write("p.yml", text), "--limit", "a")
    assert r.code == 0
    assert [(s["target"], s["status"]) for s in r.doc["steps"]] == [("a", "changed"), ("b", "skipped")]
    assert not (tmp_path / "b").exists()


def test_check_mode_step_option(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", head(tmp_path / "s") + '''  - name: plan only
    group.ensure: {group: g1}
    check_mode: true
  - name: real
    group.ensure: {group: g2}
''')
    r = pb.run(path)
    assert [s["status"] for s in r.doc["steps"]] == ["changed", "changed"]
    with EmbeddedAdmin(tmp_path / "s") as admin:
        assert admin.get_sub_group("g1") is None and admin.get_sub_group("g2") is not None


def test_env_secrets_are_masked_in_output_and_log(pb: Playbooks, tmp_path: Path) -> None:
    secret = "Very-Secret-Token-42"
    path = pb.write("p.yml", head(tmp_path / "s") + '''  - name: user
    user.ensure: {username: app, password: "{{ env.RMQOPS_TEST_SECRET }}"}
  - name: echo it (a careless command)
    shell: {cmd: "echo the password is {{ env.RMQOPS_TEST_SECRET }}; exit 3"}
''')
    r = pb.run(path, env={"RMQOPS_TEST_SECRET": secret})
    assert r.code == 1
    assert secret not in r.stdout and secret not in pb.log.read_text()
    assert "********" in pb.log.read_text()
    with EmbeddedAdmin(tmp_path / "s") as admin:
        assert admin.get_user("app").password == secret
    lines = [json.loads(x) for x in pb.log.read_text().splitlines()]
    assert lines[2]["message"] == "command exited with 3 on localhost: the password is ********"


def test_sandbox_refuses_python_internals(pb: Playbooks, tmp_path: Path) -> None:
    path = pb.write("p.yml", head(tmp_path / "s") + '''  - name: escape attempt
    group.ensure: {group: "{{ ''.__class__.__mro__[1].__subclasses__() }}"}
''')
    r = pb.run(path)
    assert r.code == 1
    msg = r.doc["steps"][0]["message"]
    assert "__class__" in msg and ("unsafe" in msg or "not allowed" in msg or "undefined" in msg), msg
    assert not (tmp_path / "s").exists()


def test_target_given_as_store_or_namesrv(pb: Playbooks, tmp_path: Path) -> None:
    text = '''name: either
targets:
  broker:
    store: "{{ store | default('') }}"
    namesrv: "{{ namesrv | default('') }}"
steps:
  - group.ensure: {group: g}
'''
    path = pb.write("p.yml", text)
    r = pb.run(path)
    assert r.code == 1 and r.doc["steps"][0]["message"] == (
        "target broker: store: and namesrv: both render empty; give -e store=DIR or -e namesrv=HOST:PORT")
    r = pb.run(path, "-e", f"store={tmp_path / 's'}", "-e", "namesrv=127.0.0.1:9")
    assert r.code == 1 and "both store: (" in r.doc["steps"][0]["message"]
    r = pb.run(path, "-e", f"store={seed_store(tmp_path / 's')}")
    assert r.code == 0 and r.doc["changed"] == 1
