"""PEP 562 lazy package exports: a package names what it offers, a submodule loads on first use.

Why: ``broker_core.auth`` and ``broker_core.broker.pop`` offer their main types at the package level,
yet a tool that needs one small submodule (mqadmin's start-up reads ``auth.model``; the broker config
reads ``pop.order_info``) must not pay for importing all of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``exports`` maps each name to the module that defines it.

    The first use imports that module and keeps the value in ``namespace`` (the package's ``globals()``),
    so later uses are plain attribute reads.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
