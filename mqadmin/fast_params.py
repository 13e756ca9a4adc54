"""Option values without pydantic: start-up of a command that takes only plain options.

Why: typer (0.29) coerces every option value through a pydantic TypeAdapter built on first use;
importing pydantic and building the adapters cost ~0.09 s of CPU, a third of a small read command
(issue 16: a read on a small store should cost <= 0.3 s). mqadmin's options are plain str, int
(bounded by min/max, as Java bounds them), float and enum choices; for those this module gives each
parameter a coercion that behaves as typer's does — same values, same messages ("Input should be less
than or equal to 1024", "'x' is not one of 'table', 'json', 'yaml'.") — and leaves anything else
(paths, lists, custom parsers, clamping) to typer. It uses typer's documented lazy hook: a parameter's
runtime coercion is built on first use unless already set.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any

from typer._click.exceptions import BadParameter
from typer._coercion import RuntimeParam
from typer._param_types import coerce_cli_choice
from typer.core import _TyperParameter

_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})  # pydantic's lax booleans
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_INT = re.compile(r"\s*[+-]?\d+\s*")
_FLOAT = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")


def _plain(annotation: Any) -> Any:
    """``X | None`` -> X; anything else unchanged."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


@dataclass(frozen=True)
class PlainRuntimeParam(RuntimeParam):
    """typer's coercion of str/int/float/enum options, without a TypeAdapter."""

    kind: str = "str"
    target: Any = None

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        try:
            return self._convert(value, ctx)
        except ValueError as e:
            raise BadParameter(str(e), ctx=ctx, param=param) from None

    def _convert(self, value: Any, ctx: Any) -> Any:
        if self.kind == "str":
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        if self.kind == "choice":
            try:
                return coerce_cli_choice(value, choices=list(self.target),
                                         case_sensitive=self.parameter_info.case_sensitive, ctx=ctx)
            except ValueError as e:  # pydantic prefixes a validator's ValueError so
                raise ValueError(f"Value error, {e}") from None
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE or text == "":
                return False
            raise ValueError("Input should be a valid boolean, unable to interpret input")
        if self.kind == "int":
            if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and _INT.fullmatch(value))):
                raise ValueError("Input should be a valid integer, unable to parse string as an integer")
            number: float = int(value)
        else:
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or (isinstance(value, str)
                                                                                and _FLOAT.fullmatch(value))):
                raise ValueError("Input should be a valid number, unable to parse string as a number")
            number = float(value)
            if not math.isfinite(number):
                raise ValueError("Input should be a finite number")
        low, high = self.parameter_info.min, self.parameter_info.max
        if low is not None and number < low:
            raise ValueError(f"Input should be greater than or equal to {low}")
        if high is not None and number > high:
            raise ValueError(f"Input should be less than or equal to {high}")
        return number


def plain_runtime_param(param: Any) -> PlainRuntimeParam | None:
    """The pydantic-free coercion for ``param``, or None when typer's own is needed."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None or desc.file_annotation is not None:
        return None
    info = desc.parameter_info
    if info.parser is not None or info.clamp:
        return None
    annotation = _plain(desc.annotation)
    if annotation is str:
        kind = "str"
    elif annotation is int:
        kind = "int"
    elif annotation is float:
        kind = "float"
    elif annotation is bool:
        kind = "bool"
    elif isinstance(annotation, type) and issubclass(annotation, Enum):
        kind = "choice"
    else:
        return None
    return PlainRuntimeParam(parameter_info=info, annotation=desc.annotation, kind=kind, target=annotation)


def install(params: list[Any]) -> None:
    """Give each plain parameter of a command its pydantic-free coercion (before any value arrives)."""
    for param in params:
        if isinstance(param, _TyperParameter) and getattr(param, "_runtime_param", None) is None:
            fast = plain_runtime_param(param)
            if fast is not None:
                param._runtime_param = fast
