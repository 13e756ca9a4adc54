"""YAML loading that remembers line numbers, so every validation error can name its line.

Why: PyYAML's safe loader returns plain dicts and lists and forgets where they came from; an operator
told "bad type for read_queues" in a 200-line playbook needs the line. Mappings and sequences come
back as ``LineMap``/``LineList`` (still a dict/list) carrying the line of the node and of each key.
Duplicate keys are an error (YAML allows the second to win silently, hiding a typo); a key given
explicitly beside a merge key (``<<: *defaults``) overrides the merged one, as the YAML merge spec says.
Aliases share one node, but everything after loading (validation, rendering) walks the expanded tree,
so a document whose aliases expand beyond ``MAX_EXPANDED_NODES`` values or ``MAX_EXPANDED_BYTES`` (a
"billion laughs") is refused, as is one nested deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

from typing import Any

import yaml

from playbooks.errors import PlaybookError

MAX_EXPANDED_NODES = 100_000
MAX_EXPANDED_BYTES = 10_000_000
MAX_DEPTH = 100
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
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader refuses control characters here, before any parsing
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_alias_bombs(node, source)
        return loader.construct_document(node)
    except PlaybookError as e:
        e.source = source
        raise
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1 if isinstance(e.position, int) else None
        raise PlaybookError(f"invalid YAML: unacceptable character #x{e.character:04x} (control characters are "
                            "not allowed; in a double-quoted string write it as an escape, e.g. \"\\x01\")",
                            line, source) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise PlaybookError(f"invalid YAML: {e.problem or e.context}", line, source) from None
    except yaml.YAMLError as e:
        raise PlaybookError(f"invalid YAML: {' '.join(str(e).split())}", None, source) from None
    except RecursionError:  # the parser recurses per level of nesting: deeper than Python's stack
        raise PlaybookError(f"the YAML is nested too deeply (more than {MAX_DEPTH} levels)", None, source) from None
    finally:
        if loader is not None:
            loader.dispose()


def _refuse_alias_bombs(root: yaml.Node, source: str) -> None:
    """Count the values (and the bytes of the scalars) the document has once its aliases are
    expanded, and how deep it nests (memoized by node identity, so this is linear in the file).
    Refuse it beyond ``MAX_EXPANDED_NODES`` values or ``MAX_EXPANDED_BYTES``: nested aliases of a few
    hundred bytes ("billion laughs"), or one long string behind many aliases, would otherwise keep
    validation and rendering busy for minutes. And beyond ``MAX_DEPTH`` levels: validation and
    rendering walk the tree recursively."""
    sizes: dict[int, tuple[int, int, int]] = {}  # id -> (values, scalar bytes, depth), expanded
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
        inner = [sizes.get(id(c), (0, 0, 0)) for c in children]
        values = min(1 + sum(v for v, _, _ in inner), MAX_EXPANDED_NODES + 1)
        size = min(len(node.value) if isinstance(node, yaml.ScalarNode) else 0, MAX_EXPANDED_BYTES + 1)
        size = min(size + sum(b for _, b, _ in inner), MAX_EXPANDED_BYTES + 1)
        depth = 1 + max((d for _, _, d in inner), default=0)
        if depth > MAX_DEPTH:
            raise PlaybookError(f"the YAML is nested too deeply (more than {MAX_DEPTH} levels)",
                                node.start_mark.line + 1, source)
        sizes[id(node)] = (values, size, depth)
    values, size, _ = sizes[id(root)]
    if values > MAX_EXPANDED_NODES:
        raise PlaybookError(f"the YAML has more than {MAX_EXPANDED_NODES:,} nodes (mappings, lists, keys and "
                            "values; an alias (*name) counts as the copy it stands for); refusing it (a playbook "
                            "never needs that many)", None, source)
    if size > MAX_EXPANDED_BYTES:
        raise PlaybookError(f"the YAML's strings add up to more than {MAX_EXPANDED_BYTES:,} bytes (each alias "
                            "(*name) counted as the copy it stands for); refusing it (a playbook never needs "
                            "that much)", None, source)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
