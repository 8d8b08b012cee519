"""A params file's YAML, read safely: a key given twice is refused with both its lines (plain
YAML keeps the last one silently), and so are aliases that expand to more than
MAX_EXPANDED_NODES values ("billion laughs") or refer to themselves, before anything is built."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..config import TclError

MAX_EXPANDED_NODES = 100_000


def read_yaml(text: str, path: Path) -> Any:
    """The values of the YAML ``text`` of the params file ``path``; a TclError naming the file
    and the problem where it is no tree of values."""
    try:
        _check_expansion(yaml.compose(text, Loader=yaml.SafeLoader), path)
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _KeyTwice as e:
        raise TclError(f"params file {path}: key {e.key!r} is given twice (lines {e.first} and "
                       f"{e.second}); keep one (YAML would silently take the last)") from None
    except yaml.YAMLError as e:
        raise TclError(f"{path}: not valid YAML: {e}") from None
    except RecursionError:
        raise TclError(f"params file {path} nests its values too deeply; a params file is a "
                       "page of knobs") from None


class _KeyTwice(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"key {key!r} given twice")
        self.key, self.first, self.second = key, first, second


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key given twice (``_KeyTwice``, with both lines);
    plain YAML keeps the last one silently. Keys merged in by ``<<`` may be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _KeyTwice(key, seen[key], line)
                seen[key] = line
            except TypeError:   # an unhashable key: SafeLoader's own error names it
                continue
        return super().construct_mapping(node, deep=deep)


def _check_expansion(root: yaml.Node | None, path: Path) -> None:
    """Refuse YAML whose aliases expand to more than MAX_EXPANDED_NODES nodes, or refer to
    themselves. Counted on the node graph, once per distinct node, so nothing is expanded."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise TclError(f"params file {path}: an alias refers to itself (line "
                           f"{node.start_mark.line + 1}); a params file is a tree of values")
        open_.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                raise TclError(f"params file {path}: its aliases expand to more than "
                               f"{MAX_EXPANDED_NODES} values (line {node.start_mark.line + 1}); "
                               "a params file is a page of knobs")
        open_.discard(key)
        sizes[key] = total
        return total

    if root is not None:
        size(root)

