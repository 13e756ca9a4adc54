"""The apache.rocketmq.v2 message classes and service registration, from the official client's wheel.

Why from there: the official ``rocketmq-python-client`` ships stubs generated from the upstream
protocol definition, so our server and the client we test against agree on every field number by
construction. Why this loader: importing ``rocketmq.grpc_protocol`` normally runs the client
package's ``__init__``, which imports the whole client and creates a log file under ``$HOME`` — a
broker must not. The generated modules themselves only need their package to be importable, so the
``rocketmq`` package is registered without running its ``__init__`` for the duration of this import;
a later ``import rocketmq`` in the same process still runs the real ``__init__`` and reuses the
already-loaded protocol modules.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any


def _load() -> tuple[Any, Any, Any]:
    names = ("rocketmq.grpc_protocol.definition_pb2", "rocketmq.grpc_protocol.service_pb2",
             "rocketmq.grpc_protocol.service_pb2_grpc")
    if "rocketmq" in sys.modules:
        return tuple(importlib.import_module(n) for n in names)  # type: ignore[return-value]
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the gRPC endpoint needs the apache.rocketmq.v2 stubs of PyPI "
                          "'rocketmq-python-client' (pip install rocketmq-python-client)")
    shell = types.ModuleType("rocketmq")
    shell.__path__ = list(spec.submodule_search_locations)
    shell.__spec__ = spec
    sys.modules["rocketmq"] = shell
    try:
        protocol_spec = importlib.util.find_spec("rocketmq.grpc_protocol")
        assert protocol_spec is not None and protocol_spec.submodule_search_locations
        # The protocol package's own __init__ only re-exports; register it empty too.
        protocol = types.ModuleType("rocketmq.grpc_protocol")
        protocol.__path__ = list(protocol_spec.submodule_search_locations)
        protocol.__spec__ = protocol_spec
        sys.modules["rocketmq.grpc_protocol"] = protocol
        modules = tuple(importlib.import_module(n) for n in names)
    finally:
        # Let a later `import rocketmq` run the real package __init__ files.
        del sys.modules["rocketmq"]
        del sys.modules["rocketmq.grpc_protocol"]
    return modules  # type: ignore[return-value]


definition_pb2, service_pb2, service_pb2_grpc = _load()
pb = types.SimpleNamespace(**{k: getattr(definition_pb2, k) for k in dir(definition_pb2) if not k.startswith("_")},
                           **{k: getattr(service_pb2, k) for k in dir(service_pb2)
                              if not k.startswith("_") and not hasattr(definition_pb2, k)})
"""Every message and enum of apache.rocketmq.v2 by its proto name (``pb.Message``, ``pb.Code.OK``)."""

MessagingServiceServicer = service_pb2_grpc.MessagingServiceServicer
add_messaging_service = service_pb2_grpc.add_MessagingServiceServicer_to_server
