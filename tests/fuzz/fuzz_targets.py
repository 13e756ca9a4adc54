"""atheris fuzz targets for the decoders that read untrusted bytes (issue 11).

Why: the record decoder reads whatever is on disk, the properties parser whatever a client sent,
the SQL92 parser whatever a consumer subscribed with. Each may refuse input only with its module's
own error type; any other exception (struct.error, IndexError, RecursionError...) is a bug.

Run: ``python tests/fuzz/fuzz_targets.py <record|properties|sql92> -runs=N`` (``make fuzz`` runs all three
with a bounded number of runs). Exit status 0 means no unexpected exception in N runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from broker_core.broker.filter.errors import FilterSyntaxError
    from broker_core.broker.filter.sql92.filter import compile_sql92
    from broker_core.broker.filter.sql92.javalang import SqlEvaluationError
    from broker_core.store.codec.batch import iter_batch_raw
    from broker_core.store.codec.message import (
        RecordError,
        check_record,
        decode_dispatch_fields,
        decode_record,
    )
    from broker_core.store.codec.properties import decode_properties, get_property
    from broker_core.store.codec.salvage import iter_intact_records


def record(data: bytes) -> None:
    """decode_record raises only RecordError; check_record / decode_dispatch_fields never raise."""
    try:
        decode_record(data, 0)
    except RecordError:
        pass
    check_record(data, 0, len(data), check_crc=True)
    decode_dispatch_fields(data, 0, len(data))
    for _pos, _m in iter_intact_records(data[:4096]):
        pass
    try:
        for _ in iter_batch_raw(data):
            pass
    except RecordError:
        pass


def properties(data: bytes) -> None:
    """The properties parser never raises, whatever the text."""
    fdp = atheris.FuzzedDataProvider(data)
    key = fdp.ConsumeUnicodeNoSurrogates(8)
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    decoded = decode_properties(text)
    assert isinstance(decoded, dict)
    get_property(text, key)
    for k in list(decoded)[:4]:
        assert get_property(text, k) is not None


def sql92(data: bytes) -> None:
    """Parsing and compiling a selector raises only FilterSyntaxError; evaluating only its own error."""
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))
    try:
        selector = compile_sql92(text)
    except FilterSyntaxError:
        return
    try:
        selector.evaluate({"a": "1", "TAGS": "t", "b": "x"})
    except SqlEvaluationError:
        pass


TARGETS: dict[str, Callable[[bytes], None]] = {"record": record, "properties": properties, "sql92": sql92}


def main(argv: list[str]) -> None:
    target = TARGETS[argv[1]]
    atheris.Setup([argv[0], *argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
