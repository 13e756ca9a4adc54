"""mqadmin on a golden store copy whose config/messageRequestMode.json or subscriptionGroup.json holds a
value of the wrong type: the refusal names the file, the entry and the field in one line (exit 1), and a
null topic is never saved back as the text "None". A newly written delayOffset.json carries the time it
was made in its dataVersion, as Apache's DataVersion does (it said 0, 1970)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from tests.cli.conftest import Cli

MODE_FILE = "messageRequestMode.json"


def _store_with_a_mode(golden_cli: Callable[[str], Cli], writes: int = 1) -> Cli:
    """store-basic with group gA consuming GoldenTopicA by POP (written ``writes`` times: 2 leaves a .bak)."""
    c = golden_cli("store-basic")
    assert c("updateSubGroup", "-c", "DefaultCluster", "-g", "gA").exit_code == 0
    for n in range(writes):
        r = c("setConsumeMode", "-c", "DefaultCluster", "-t", "GoldenTopicA", "-g", "gA", "-m", "POP", "-q", str(n + 1))
        assert r.exit_code == 0, r.stderr
    return c


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new))


def _one_line_refusal(c: Cli) -> str:
    r = c("sendMessage", "-t", "GoldenTopicA", "-p", "x")
    err = r.stderr.strip()
    assert r.exit_code == 1 and "\n" not in err and "Traceback" not in err, (r.exit_code, r.stdout, err)
    return err


def test_a_null_topic_is_refused_naming_the_field_not_saved_as_none(golden_cli) -> None:  # noqa: ANN001
    c = _store_with_a_mode(golden_cli)
    path = c.store / "config" / MODE_FILE
    _edit(path, '"topic":"GoldenTopicA"', '"topic":null')
    err = _one_line_refusal(c)
    assert MODE_FILE in err and "topic 'GoldenTopicA', group 'gA': topic: expected a string, got null" in err, err
    assert '"topic":null' in path.read_text()  # nothing rewritten


def test_a_null_consumer_group_with_a_bak_loads_the_previous_version(golden_cli) -> None:  # noqa: ANN001
    c = _store_with_a_mode(golden_cli, writes=2)
    path = c.store / "config" / MODE_FILE
    _edit(path, '"consumerGroup":"gA"', '"consumerGroup":null')
    r = c("setConsumeMode", "-c", "DefaultCluster", "-t", "GoldenTopicB", "-g", "gA", "-m", "PULL")
    assert r.exit_code == 0, r.stderr
    modes = json.loads(path.read_text())["messageRequestModeMap"]
    assert "None" not in path.read_text()
    assert modes["GoldenTopicA"]["gA"] == {"consumerGroup": "gA", "mode": "POP", "popShareQueueNum": 1,
                                           "topic": "GoldenTopicA"}  # the .bak's version
    assert modes["GoldenTopicB"]["gA"]["mode"] == "PULL"


def test_a_wrong_typed_pop_share_queue_num_names_the_entry_and_field(golden_cli) -> None:  # noqa: ANN001
    c = _store_with_a_mode(golden_cli)
    _edit(c.store / "config" / MODE_FILE, '"popShareQueueNum":1', '"popShareQueueNum":"abc"')
    err = _one_line_refusal(c)
    assert MODE_FILE in err and \
        "topic 'GoldenTopicA', group 'gA': popShareQueueNum: expected a Java int, got \"abc\"" in err, err
    assert "invalid literal" not in err


def test_a_wrong_typed_forbidden_perm_names_the_group_and_topic(golden_cli) -> None:  # noqa: ANN001
    c = _store_with_a_mode(golden_cli)
    (c.store / "config" / "subscriptionGroup.json.bak").unlink()  # else the previous version is loaded
    _edit(c.store / "config" / "subscriptionGroup.json", '"forbiddenTable":{}',
          '"forbiddenTable":{"gA":{"GoldenTopicA":"x"}}')
    err = _one_line_refusal(c)
    assert "subscriptionGroup.json" in err and \
        "forbiddenTable: group 'gA': topic 'GoldenTopicA': expected a Java int, got \"x\"" in err, err


def test_a_new_delay_offset_file_has_the_time_in_its_data_version(golden_cli) -> None:  # noqa: ANN001
    c = golden_cli("store-basic")
    before = int(time.time() * 1000)
    assert c("sendMessage", "-t", "GoldenTopicA", "-p", "x").exit_code == 0
    text = (c.store / "config" / "delayOffset.json").read_text()
    stamp = int(re.search(r'"timestamp":(-?\d+)', text).group(1))
    assert before - 60_000 <= stamp <= int(time.time() * 1000), text
