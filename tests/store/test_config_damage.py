"""Config files survive damage (issue 11 item 8).

Why: topics.json full of random bytes blocked the open without naming the file (its .bak ignored),
wrong JSON types raised ``AttributeError: 'list' object...``, and an empty consumerOffset.json
silently dropped every committed offset. Now: the .bak is used with a WARNING naming both files;
otherwise one clear error naming the file and the problem; offsets are never dropped silently.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker_core.store.config_file import ConfigFileError
from broker_core.store.consumer_offset_file import read_consumer_offsets, write_consumer_offsets
from broker_core.store.subscription_group_config import SubscriptionGroupTable
from broker_core.store.topic_config import DataVersion, TopicConfig, TopicConfigTable
from mqadmin.app import app

GARBAGE = bytes((i * 97 + 13) % 256 for i in range(3000))
WRONG_SHAPES = ['[1, 2, 3]', '{"topicConfigTable": [1]}', '{"topicConfigTable": {"T": "x"}}', '"text"', "42"]


def topics_with_bak(cfg: Path) -> TopicConfigTable:
    table = TopicConfigTable(cfg)
    table.put(TopicConfig("Alpha", 4, 4), 1)
    table.persist()
    table.put(TopicConfig("Beta", 2, 2), 2)
    table.persist()  # topics.json.bak now holds Alpha
    return table


@pytest.mark.parametrize("content", [GARBAGE, b"", *[s.encode() for s in WRONG_SHAPES]])
def test_damaged_topics_json_falls_back_to_bak(tmp_path: Path, content: bytes,
                                               caplog: pytest.LogCaptureFixture) -> None:
    topics_with_bak(tmp_path)
    (tmp_path / "topics.json").write_bytes(content)
    caplog.set_level(logging.WARNING, "rmqops")
    table = TopicConfigTable(tmp_path)
    table.load()
    assert set(table.topics) == {"Alpha"}
    (warning,) = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert str(tmp_path / "topics.json") in warning and str(tmp_path / "topics.json.bak") in warning


@pytest.mark.parametrize("content", [GARBAGE, b"", *[s.encode() for s in WRONG_SHAPES]])
def test_damaged_topics_json_without_usable_bak_is_one_clear_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "topics.json").write_bytes(content)
    with pytest.raises(ConfigFileError) as e:
        TopicConfigTable(tmp_path).load()
    msg = str(e.value)
    assert str(tmp_path / "topics.json") in msg and "\n" not in msg and "topics.json.bak" in msg


def test_cli_names_the_damaged_file(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_bytes(GARBAGE)
    res = CliRunner().invoke(app, ["topicList", "--store", str(tmp_path)])
    assert res.exit_code == 1
    err = res.stderr.strip()
    assert "topics.json" in err and "Traceback" not in err and "\n" not in err, err


@pytest.mark.parametrize("content", [b"", b"   \n", GARBAGE, b'{"offsetTable": []}'])
def test_offsets_are_never_dropped_silently(tmp_path: Path, content: bytes) -> None:
    write_consumer_offsets(tmp_path, {"T@g": {0: 5}}, DataVersion())
    write_consumer_offsets(tmp_path, {"T@g": {0: 9}}, DataVersion())
    (tmp_path / "consumerOffset.json").write_bytes(content)
    assert read_consumer_offsets(tmp_path)[0] == {"T@g": {0: 5}}  # the previous version
    (tmp_path / "consumerOffset.json.bak").unlink()
    with pytest.raises(ConfigFileError, match="consumerOffset.json"):
        read_consumer_offsets(tmp_path)


def test_subscription_groups_of_wrong_shape(tmp_path: Path) -> None:
    (tmp_path / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": {"g": [1]}}')
    with pytest.raises(ConfigFileError, match="subscriptionGroup.json"):
        SubscriptionGroupTable(tmp_path).load()


def test_a_refused_group_field_names_the_group(tmp_path: Path) -> None:
    """The message named the field alone ("retryMaxTimes: expected a Java int"), not which of the
    file's groups holds it."""
    (tmp_path / "subscriptionGroup.json").write_text(
        '{"subscriptionGroupTable": {"G_ok": {"retryMaxTimes": 3}, "G_bad": {"retryMaxTimes": "many"}}}')
    with pytest.raises(ConfigFileError, match="group 'G_bad': retryMaxTimes: expected a Java int"):
        SubscriptionGroupTable(tmp_path).load()


def test_writing_after_loading_the_bak_keeps_the_damaged_file_and_the_bak(tmp_path: Path) -> None:
    """The first write after a .bak fallback copied the damaged file over the good .bak and then replaced
    the damaged file: the damaged bytes and the version they were loaded from were both gone."""
    topics_with_bak(tmp_path)
    good_bak = (tmp_path / "topics.json.bak").read_bytes()
    (tmp_path / "topics.json").write_bytes(GARBAGE)
    table = TopicConfigTable(tmp_path)
    table.load()
    table.put(TopicConfig("Gamma", 1, 1), 3)
    table.persist()
    assert (tmp_path / "topics.json.bak").read_bytes() == good_bak
    (aside,) = tmp_path.glob("topics.json.corrupt.*")
    assert aside.read_bytes() == GARBAGE
    reread = TopicConfigTable(tmp_path)
    reread.load()
    assert set(reread.topics) == {"Alpha", "Gamma"}
    table.put(TopicConfig("Delta", 1, 1), 4)
    table.persist()  # later writes keep the previous version in .bak as before, nothing more aside
    assert len(list(tmp_path.glob("topics.json.corrupt.*"))) == 1
    assert b"Gamma" in (tmp_path / "topics.json.bak").read_bytes()
