"""atheris fuzz targets for the decoders that read untrusted bytes (issue 11).

Why: the record decoder reads whatever is on disk, the properties parser whatever a client sent,
the SQL92 parser whatever a consumer subscribed with, the remoting frame, body and header decoders
whatever a peer sends over TCP. Each may refuse input only with its module's
own error type; any other exception (struct.error, IndexError, RecursionError...) is a bug.

Run: ``python tests/fuzz/fuzz_targets.py <record|properties|sql92|remoting> -runs=N`` (``make fuzz`` runs all
with a bounded number of runs). Exit status 0 means no unexpected exception in N runs.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    from broker_core.broker.filter.errors import FilterSyntaxError
    from broker_core.broker.filter.sql92.filter import compile_sql92
    from broker_core.broker.filter.sql92.javalang import SqlEvaluationError
    from broker_core.remoting import bodies, headers
    from broker_core.remoting.body_base import BodyError, JsonBody
    from broker_core.remoting.frame import FrameError, decode_frame
    from broker_core.remoting.header_base import CommandHeader, HeaderError
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


BODIES = [c for _, c in inspect.getmembers(bodies, inspect.isclass) if issubclass(c, JsonBody) and c is not JsonBody]
HEADERS = [c for _, c in inspect.getmembers(headers, inspect.isclass)
           if issubclass(c, CommandHeader) and c is not CommandHeader]


def _json_value(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> Any:
    """A JSON value shaped like what a peer may send: numbers of any size, number-like strings, nesting."""
    kind = fdp.ConsumeIntInRange(0, 7 if depth < 3 else 5)
    if kind == 0:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 60))  # up to 480 bits: past int64 and past a double
    if kind == 1:
        return fdp.ConsumeFloat()
    if kind == 2:
        return fdp.ConsumeBool()
    if kind == 3:
        return None
    if kind in (4, 5):
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 12))
    if kind == 6:
        return [_json_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return {fdp.ConsumeUnicodeNoSurrogates(6): _json_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))}


def remoting(data: bytes) -> None:
    """What a peer sends over TCP: a frame decodes or raises FrameError; the body of any command decodes
    or raises BodyError (wrong shapes, numbers that do not parse or do not fit); a header from any ext
    fields decodes or raises HeaderError."""
    fdp = atheris.FuzzedDataProvider(data)
    pick = fdp.ConsumeIntInRange(0, len(BODIES) + len(HEADERS))
    if pick == 0:
        try:
            decode_frame(fdp.ConsumeBytes(fdp.remaining_bytes()))
        except FrameError:
            pass
    elif pick <= len(BODIES):
        cls = BODIES[pick - 1]
        obj = {wire: _json_value(fdp) for _, wire, _ in cls._spec() if fdp.ConsumeBool()}
        text = json.dumps(obj if fdp.ConsumeIntInRange(0, 9) else _json_value(fdp)).encode()
        try:
            cls.from_json(text + fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 2)))
        except BodyError:
            pass
    else:
        header = HEADERS[pick - len(BODIES) - 1]
        ext = {wire: fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 24))
               for _, wire, _, _ in header._fields() if fdp.ConsumeBool()}
        try:
            header.from_ext_fields(ext)
        except HeaderError:
            pass


TARGETS: dict[str, Callable[[bytes], None]] = {"record": record, "properties": properties, "sql92": sql92,
                                               "remoting": remoting}


def main(argv: list[str]) -> None:
    target = TARGETS[argv[1]]
    atheris.Setup([argv[0], *argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
