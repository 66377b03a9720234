"""The search section's defaults, read from their one home: conf/search/nsga.yaml (the recipe Hydra composes).

A config built by Hydra already holds every key; a section built by hand (the Python API, tests) gets the
YAML's values for what it leaves out, so no default is written twice. Ranges are checked once, by
`search.cli.check_search_config`.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Mapping

from forge.config import group_yaml

RECIPE = "nsga"


@functools.lru_cache(maxsize=1)
def _recipe() -> dict[str, Any]:
    node = group_yaml("search", RECIPE)
    if node is None:  # a packaging bug, never bad input
        raise RuntimeError(f"conf/search/{RECIPE}.yaml is missing from forge_conf")
    return node


def search_section(s: Mapping[str, Any] | None) -> dict[str, Any]:
    """`s` over the recipe's defaults, one level deep for the `mutation` and `coevolve` nodes."""
    out = copy.deepcopy(_recipe())
    out.pop("defaults", None)
    for k, v in dict(s or {}).items():
        out[k] = {**out[k], **dict(v or {})} if k in ("mutation", "coevolve") and isinstance(out.get(k), dict) else v
    return out
