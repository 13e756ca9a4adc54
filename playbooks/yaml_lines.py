"""YAML loading that remembers line numbers, so every validation error can name its line.

Why: PyYAML's safe loader returns plain dicts and lists and forgets where they came from; an operator
told "bad type for read_queues" in a 200-line playbook needs the line. Mappings and sequences come
back as ``LineMap``/``LineList`` (still a dict/list) carrying the line of the node and of each key.
Duplicate keys are an error (YAML allows the second to win silently, hiding a typo).
"""

from __future__ import annotations

from typing import Any

import yaml

from playbooks.errors import PlaybookError


class LineMap(dict):
    """A mapping from the playbook, with ``line`` (1-based) and the line of each key."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineMap:
    loader.flatten_mapping(node)
    out = LineMap()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool):
            raise PlaybookError(f"a mapping key must be a plain value, got {type(key).__name__}",
                                key_node.start_mark.line + 1)
        key = str(key)
        if key in out:
            raise PlaybookError(f"duplicate key {key!r} (first on line {out.key_lines[key]})",
                                key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document; syntax errors become a PlaybookError with the line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except PlaybookError as e:
        e.source = source
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise PlaybookError(f"invalid YAML: {e.problem or e.context}", line, source) from None
    except yaml.YAMLError as e:
        raise PlaybookError(f"invalid YAML: {e}", None, source) from None
