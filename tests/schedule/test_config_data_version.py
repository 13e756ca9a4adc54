"""A damaged dataVersion in delayOffset.json or transactionMetrics is a config-file error naming the file
and the field, as in topics.json; it escaped as a bare ``int()`` error without the file's name, and
delayOffset.json.bak was never tried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker_core.broker.transaction.transaction_metrics import TRANSACTION_METRICS_FILE, TransactionMetrics
from broker_core.store.config_file import ConfigFileError
from broker_core.store.schedule.delay_offset import DELAY_OFFSET_FILE, DelayOffsetTable

BAD = [({}, "{}"), ("x", '"x"'), ([1], "[1]")]


@pytest.mark.parametrize(("state", "shown"), BAD)
def test_delay_offset_names_the_file_and_the_field(tmp_path: Path, state: object, shown: str) -> None:
    (tmp_path / DELAY_OFFSET_FILE).write_text(json.dumps(
        {"dataVersion": {"counter": 0, "stateVersion": state, "timestamp": 0}, "offsetTable": {"1": 5}}))
    with pytest.raises(ConfigFileError) as e:
        DelayOffsetTable(tmp_path).load()
    assert DELAY_OFFSET_FILE in str(e.value) and f"dataVersion.stateVersion: expected a Java long, got {shown}" \
        in str(e.value)


def test_delay_offset_falls_back_to_its_bak(tmp_path: Path) -> None:
    (tmp_path / DELAY_OFFSET_FILE).write_text('{"dataVersion": "broken", "offsetTable": {}}')
    (tmp_path / f"{DELAY_OFFSET_FILE}.bak").write_text(
        '{"dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 7}, "offsetTable": {"2": 9}}')
    table = DelayOffsetTable(tmp_path)
    table.load()
    assert table.get(2) == 9 and table.data_version.counter == 3


def test_transaction_metrics_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / TRANSACTION_METRICS_FILE
    path.write_text('{"dataVersion": {"counter": {}}, "transactionCount": {}}')
    with pytest.raises(ConfigFileError, match=r"transactionMetrics: dataVersion\.counter: expected a Java long"):
        TransactionMetrics(tmp_path).load()
    path.write_text("[1, 2]")
    with pytest.raises(ConfigFileError, match="transactionMetrics: expected a JSON object, got list"):
        TransactionMetrics(tmp_path).load()
