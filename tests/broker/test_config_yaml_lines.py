"""updateBrokerConfig / updateNamesrvConfig on a YAML config file keep its lines (persist_changes).

Why: a YAML ``-c`` file was re-dumped on every update: sorted, its comments gone, ``listenPort: '35858'``
quoted (a string where the file had a number). A flat mapping of ``key: value`` lines now gets each
changed key's line replaced where it stands and new keys appended, in a form YAML reads back as the
same value; only YAML that is not flat (nested, multi-line values) is still re-dumped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from broker_core.broker.config_update import persist_changes
from broker_core.config_loader import read_properties_file


def test_a_flat_yaml_file_keeps_its_comments_order_and_types(tmp_path: Path) -> None:
    path = tmp_path / "broker.yaml"
    path.write_text("# yaml broker config\nbrokerName: broker-y\nlistenPort: 35858  # remoting\n\n"
                    "fileReservedTime: 72\n")
    persist_changes(path, {"fileReservedTime": "30", "enableAllTopicList": "false", "listenPort": "36100"})
    assert path.read_text() == ("# yaml broker config\nbrokerName: broker-y\nlistenPort: 36100  # remoting\n\n"
                                "fileReservedTime: 30\nenableAllTopicList: false\n")
    assert yaml.safe_load(path.read_text()) == {"brokerName": "broker-y", "listenPort": 36100,
                                                "fileReservedTime": 30, "enableAllTopicList": False}


@pytest.mark.parametrize("value", ["yes", "off", "010", "0x1F", "", "a: b", "#x", "1_000", "~", "null", "[1]",
                                   "'q'", "a #b", "true", "3.5", "broker-a"])
def test_every_value_reads_back_as_written(tmp_path: Path, value: str) -> None:
    path = tmp_path / "b.yml"
    path.write_text("# keep me\nbrokerName: broker-a\nmsgTraceTopicName: old\n")
    persist_changes(path, {"msgTraceTopicName": value})
    text = path.read_text()
    assert text.startswith("# keep me\nbrokerName: broker-a\nmsgTraceTopicName: "), text
    assert read_properties_file(path) == {"brokerName": "broker-a", "msgTraceTopicName": value}


def test_yaml_that_is_not_flat_is_re_dumped_with_the_change(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("# comment\nbrokerName: >-\n  broker-a\nlistenPort: 10911\n")
    persist_changes(path, {"listenPort": "10912"})
    assert read_properties_file(path) == {"brokerName": "broker-a", "listenPort": "10912"}
    assert "# comment" not in path.read_text()
