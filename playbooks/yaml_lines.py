"""YAML loading that remembers line numbers, so every validation error can name its line.

Why: PyYAML's safe loader returns plain dicts and lists and forgets where they came from; an operator
told "bad type for read_queues" in a 200-line playbook needs the line. Mappings and sequences come
back as ``LineMap``/``LineList`` (still a dict/list) carrying the line of the node and of each key.
Duplicate keys are an error (YAML allows the second to win silently, hiding a typo); a key given
explicitly beside a merge key (``<<: *defaults``) overrides the merged one, as the YAML merge spec says.
Aliases share one node, but everything after loading (validation, rendering) walks the expanded tree,
so a document whose aliases expand beyond ``MAX_EXPANDED_NODES`` (a "billion laughs") is refused.
"""

from __future__ import annotations

from typing import Any

import yaml

from playbooks.errors import PlaybookError

MAX_EXPANDED_NODES = 100_000
MERGE_TAG = "tag:yaml.org,2002:merge"


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
    explicit = sum(1 for key_node, _ in node.value if key_node.tag != MERGE_TAG)
    loader.flatten_mapping(node)  # merged pairs first (the first of several merges last), then explicit
    merged = len(node.value) - explicit
    out = LineMap()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    given: set[str] = set()
    for i, (key_node, value_node) in enumerate(node.value):
        key = _key(loader, key_node)
        if i >= merged:  # explicit keys may override merged ones, never each other
            if key in given:
                raise PlaybookError(f"duplicate key {key!r} (first on line {out.key_lines[key]})",
                                    key_node.start_mark.line + 1)
            given.add(key)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _key(loader: _Loader, key_node: yaml.Node) -> str:
    key = loader.construct_object(key_node, deep=True)
    if not isinstance(key, str | int | float | bool):
        raise PlaybookError(f"a mapping key must be a plain value, got {type(key).__name__}",
                            key_node.start_mark.line + 1)
    return str(key)


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document; syntax errors become a PlaybookError with the line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_alias_bombs(node, source)
        return loader.construct_document(node)
    except PlaybookError as e:
        e.source = source
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise PlaybookError(f"invalid YAML: {e.problem or e.context}", line, source) from None
    except yaml.YAMLError as e:
        raise PlaybookError(f"invalid YAML: {e}", None, source) from None
    finally:
        loader.dispose()


def _refuse_alias_bombs(root: yaml.Node, source: str) -> None:
    """Count the nodes the document has once its aliases are expanded (memoized by node identity, so
    this is linear in the file) and refuse it beyond ``MAX_EXPANDED_NODES``: nested aliases of a few
    hundred bytes ("billion laughs") would otherwise keep validation and rendering busy for minutes."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: meeting one again is a recursive alias
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done:
            if id(node) in open_nodes:
                raise PlaybookError("an alias refers to a node that contains it (recursive YAML)",
                                    node.start_mark.line + 1, source)
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        open_nodes.discard(id(node))
        sizes[id(node)] = min(1 + sum(sizes.get(id(c), 0) for c in children), MAX_EXPANDED_NODES + 1)
    if sizes[id(root)] > MAX_EXPANDED_NODES:
        raise PlaybookError(f"the YAML expands to more than {MAX_EXPANDED_NODES:,} values through nested "
                            "aliases (*name); refusing it (a playbook never needs that many)", None, source)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
