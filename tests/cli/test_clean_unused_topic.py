"""cleanUnusedTopic and topics an operator retired by removing their config from topics.json.

Opening a store used to adopt every consume queue directory without a config as a topic (and write
it back into topics.json), so a retired topic came back and cleanUnusedTopic never found anything to
remove. Only a store with no topics.json at all (a golden store) has its topics inferred from its
queues; elsewhere topics.json is the topic table, as RocketMQ's TopicConfigManager loads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.conftest import Cli
from tests.cli.test_cli_remote import mqadmin_ok
from tests.remoting_broker import running_broker


def _topics_json(store: Path) -> dict:
    return json.loads((store / "config" / "topics.json").read_text(encoding="utf-8"))["topicConfigTable"]


def _retire(store: Path, topic: str) -> None:
    """What an operator does with the broker stopped: drop the topic's entry from topics.json."""
    path = store / "config" / "topics.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    del doc["topicConfigTable"][topic]
    path.write_text(json.dumps(doc), encoding="utf-8")


def _store_with_retired_topic(cli: Cli) -> Path:
    """Orders and Gone with one message each; Gone's config removed, its queue left (sent last, so its
    record is the newest one the queues point at: a re-dispatch at the next start would bring it back)."""
    for topic in ("Orders", "Gone"):
        assert cli("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2").exit_code == 0
    for topic, body in (("Orders", "hello"), ("Gone", "bye")):
        assert cli("sendMessage", "-t", topic, "-p", body).exit_code == 0
    _retire(cli.store, "Gone")
    return cli.store


def _topic_list(cli: Cli) -> list[str]:
    r = cli("topicList")
    assert r.exit_code == 0, r.stderr
    return r.stdout.split()


def test_clean_unused_topic_removes_a_retired_topics_queues_for_good(cli: Cli) -> None:
    store = _store_with_retired_topic(cli)
    # a queue copied under a name with no config, and one of a system topic (rmq_sys_ prefix) likewise
    shutil.copytree(store / "consumequeue" / "Orders", store / "consumequeue" / "Ghost")
    shutil.copytree(store / "consumequeue" / "Orders", store / "consumequeue" / "rmq_sys_custom")
    assert "Gone" not in _topic_list(cli) and "Ghost" not in _topic_list(cli)
    assert "Gone" not in _topics_json(store) and "Ghost" not in _topics_json(store)
    # (the copies are mismatches too: their units point at Orders' records)
    assert json.loads(cli("verifyStore", "--output", "json").stdout)["unused_topics"] == ["Ghost", "Gone"]

    done = cli.json("cleanUnusedTopic")
    assert done[0]["result"] == "removed the queues of 2 unused topic(s): Ghost, Gone"
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == ["Orders", "rmq_sys_custom"]
    assert cli.json("cleanUnusedTopic")[0]["result"] == "no unused topic"

    # the next writable opening (abnormal too) does not dispatch Gone's record into a new queue
    assert cli("sendMessage", "-t", "Orders", "-p", "again").exit_code == 0
    (store / "abort").touch()
    assert cli("sendMessage", "-t", "Orders", "-p", "after a crash").exit_code == 0
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == ["Orders", "rmq_sys_custom"]
    assert "Gone" not in _topic_list(cli) and "Gone" not in _topics_json(store)
    assert json.loads(cli("verifyStore", "--output", "json").stdout)["unused_topics"] == []


def test_a_topic_made_again_after_the_clean_starts_empty(cli: Cli) -> None:
    store = _store_with_retired_topic(cli)
    cli.json("cleanUnusedTopic")
    assert cli("updateTopic", "-c", "DefaultCluster", "-t", "Gone", "-r", "2", "-w", "2").exit_code == 0
    (store / "abort").touch()
    assert cli("sendMessage", "-t", "Orders", "-p", "x").exit_code == 0
    assert "Gone" in _topic_list(cli)
    assert not (store / "consumequeue" / "Gone").exists()  # its old record stays out of the new topic


def test_verify_store_names_the_unused_topics(cli: Cli) -> None:
    store = _store_with_retired_topic(cli)
    r = cli("verifyStore")
    assert r.exit_code == 0, r.stderr
    assert "unused topics          Gone (queues without a topic config; cleanUnusedTopic removes them)" in r.stdout
    assert r.stdout.rstrip().endswith("store OK")
    cli.json("cleanUnusedTopic")
    assert "unused topics" not in cli("verifyStore").stdout
    assert (store / "consumequeue" / "Orders").is_dir()


def test_a_store_without_topics_json_still_has_its_topics_from_its_queues(golden_cli) -> None:  # noqa: ANN001
    c = golden_cli("store-basic")
    assert not (c.store / "config" / "topics.json").exists()
    queues = sorted(p.name for p in (c.store / "consumequeue").iterdir())
    listed = _topic_list(c)
    assert queues and all(t in listed for t in queues)
    assert c.json("cleanUnusedTopic")[0]["result"] == "no unused topic"
    assert sorted(p.name for p in (c.store / "consumequeue").iterdir()) == queues
    assert all(t in _topics_json(c.store) for t in queues)  # written once, topics.json holds them from now on
    assert all(t in _topic_list(c) for t in queues)


def test_clean_unused_topic_over_n(cli: Cli, tmp_path: Path) -> None:
    _store_with_retired_topic(cli)
    work = tmp_path / "work"
    work.mkdir()
    shutil.move(str(cli.store), str(work / "store"))
    with running_broker(work, conf={"brokerName": "broker-a"}) as b:
        n = b.namesrv_addr
        assert "Gone" not in mqadmin_ok("topicList", "-n", n).split()
        assert "Gone" not in _topics_json(b.store)
        doc = json.loads(mqadmin_ok("cleanUnusedTopic", "-n", n, "--output", "json"))
        assert doc == [{"brokerName": "broker-a", "brokerAddr": b.broker_addr,
                        "result": "removed the queues of 1 unused topic(s): Gone"}]
        assert not (b.store / "consumequeue" / "Gone").exists()
        assert mqadmin_ok("cleanUnusedTopic", "-n", n) == "success"
        assert "Gone" not in mqadmin_ok("topicList", "-n", n).split()
