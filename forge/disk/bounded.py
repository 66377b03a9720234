"""Readers of untrusted data with bounds: a few hundred bytes must never cost hours or a RecursionError.

`check_yaml_shape` refuses YAML whose data, aliases expanded, is too large or too deep (an alias bomb), before
anything is built from it (forge.disk.io.load_yaml calls it); `loads` is `json.loads` with a bound on nesting,
refused as a `json.JSONDecodeError`, which every reader already reports as a corrupt line naming the file.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from forge.errors import UserError

JSON_MAX_DEPTH = 64  # Forge's own files nest under 10 deep (a checkpoint's config, a row's genome and its layers)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def loads(text: str | bytes, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """`json.loads` of untrusted text whose nesting is bounded: a 100,000-deep row would end in a RecursionError
    here or in any later walk, so it is a `json.JSONDecodeError` (a ValueError: every reader already calls that
    corrupt, naming the file and line) past `max_depth` levels."""
    if isinstance(text, bytes):
        text = text.decode()
    if text.count("[") + text.count("{") > max_depth and not _depth_within(text, max_depth):
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", text, 0)
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {max_depth} levels", text, 0) from None


def _depth_within(text: str, limit: int) -> bool:
    """Whether `text`'s brackets (outside strings) nest at most `limit` deep: the running sum of opening minus
    closing brackets, vectorized (a row of a few KB in ~20 us, 100,000 levels in ~1 ms)."""
    import numpy as np

    b = np.frombuffer(_JSON_STRING.sub("", text).encode(), np.uint8)
    step = (b == 91).astype(np.int32) + (b == 123) - (b == 93) - (b == 125)  # [ { ] }
    return int(np.cumsum(step).max(initial=0)) <= limit



YAML_MAX_NODES, YAML_MAX_DEPTH = 200_000, 100  # a run config has ~500 nodes, 6 deep; a genome file ~10 deep


def check_yaml_shape(root: Any, where: str | Path) -> None:
    """Refuse YAML whose data, with its aliases (`*a`) expanded, would exceed `YAML_MAX_NODES` nodes or
    `YAML_MAX_DEPTH` levels, or refers to itself: ten 40-byte lines of `&a [*b, *b, ...]` expand to 10^9 nodes,
    which every later walk (checks, merges, hashing) would visit. Counted over the composed graph, each distinct
    node once (memoized), so the check itself is linear in the file."""
    size: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded nodes, expanded depth)
    stack: list[tuple[Any, bool]] = [(root, False)] if root is not None else []
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        kids = [x for pair in node.value for x in pair] if node.id == "mapping" else (
            node.value if node.id == "sequence" else [])
        if done:
            n = 1 + sum(size[id(k)][0] for k in kids)
            d = 1 + max((size[id(k)][1] for k in kids), default=0)
            open_.discard(id(node))
            size[id(node)] = (n, d)
            if n > YAML_MAX_NODES or d > YAML_MAX_DEPTH:
                line = node.start_mark.line + 1
                raise UserError(f"{where}:{line}: this YAML expands to more than {YAML_MAX_NODES:,} nodes or "
                                f"{YAML_MAX_DEPTH} levels (aliases included); allowed: plain data of a usual size "
                                "(write out what the aliases repeat)")
            continue
        if id(node) in size:
            continue
        if id(node) in open_:
            raise UserError(f"{where}:{node.start_mark.line + 1}: a YAML alias refers to its own node (a cycle); "
                            "allowed: plain data")
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
