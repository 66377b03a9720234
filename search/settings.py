"""The search's settings, settled once: the search section over its one home of defaults (conf/search/nsga.yaml,
the recipe Hydra composes), and every range Hydra cannot check, refused in one line before anything is built.

A config built by Hydra already holds every key; a section built by hand (the Python API, tests) gets the YAML's
values for what it leaves out, so no default is written twice. `search.build.build_search` settles the config
once; everything it builds from (algorithm, co-evolution, the run's plain settings) reads the settled section and
neither re-checks nor re-defaults it. The config stays a plain dict (what the run saves, config.yaml and the
checkpoint, is unchanged); the search section is also handed on typed, as `SearchSettings` (as Hydra's structured
configs are), so each function's signature shows what it gets.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

from forge.runtime.config import group_yaml
from forge.runtime.limits import check_range
from search.errors import SearchConfigError
from search.operators import MutationParams
from search.operators_plugin import KINDS as OPERATORS, OperatorSpec, settle_operators

RECIPE = "nsga"
ALGORITHMS = ("nsga", "random")
LAYER_MUTATION = "search.operators.LayerMutation"  # its options: MutationParams' fields and `rate`
SIZES = (("search.pop_size", 1), ("search.offspring", 1), ("search.generations", 0))
UPPER = ("seed", "search.pop_size", "search.offspring", "evaluator.n_mc")  # bounded by forge.runtime.limits
COUNTS = (("stop_after", 0), ("evaluator.n_mc", 0), ("threads", 1))  # run-level integers, null allowed


@dataclass(frozen=True)
class Plan:
    """A run's plain settings, read by `search.build` from the settled config."""

    generations: int
    seed: int = 0
    algorithm: str = "nsga"
    hv_ref: float = 2.0  # the HV reference point, in anchor units
    anchor_values: Mapping[str, float] = field(default_factory=dict)  # anchor metrics given, not scored
    progress: bool = False  # the rich progress display


@dataclass(frozen=True)
class SearchSettings:
    """The settled `search` section, typed: what the algorithm and the builder read of it."""

    algorithm: str  # nsga | random
    pop_size: int  # N
    offspring: int  # λ per generation
    generations: int  # G
    crossover: OperatorSpec  # the operators (`_target_` + options, search.operators_plugin)
    mutation: OperatorSpec
    repair: OperatorSpec
    sampling: Any  # `uniform`, a genome file or data/archs name to sample around, or an OperatorSpec
    coevolve_every: int  # K: a co-evolution event every K generations (0: off)

    @classmethod
    def of(cls, s: Mapping[str, Any]) -> "SearchSettings":
        """From a search section `settle_config` filled in and checked."""
        return cls(algorithm=str(s["algorithm"]), pop_size=int(s["pop_size"]), offspring=int(s["offspring"]),
                   generations=int(s["generations"]), crossover=OperatorSpec.of(s["crossover"]),
                   mutation=OperatorSpec.of(s["mutation"]), repair=OperatorSpec.of(s["repair"]),
                   sampling=OperatorSpec.of(s["sampling"]) if isinstance(s["sampling"], Mapping) else s["sampling"],
                   coevolve_every=int(s["coevolve"]["every"]))


@functools.lru_cache(maxsize=1)
def _recipe() -> dict[str, Any]:
    node = group_yaml("search", RECIPE)
    if node is None:  # a packaging bug, never bad input
        raise RuntimeError(f"conf/search/{RECIPE}.yaml is missing from forge_conf")
    return node


@functools.lru_cache(maxsize=1)
def _run_defaults() -> dict[str, Any]:
    node = group_yaml("", "forge-search")
    if node is None:  # a packaging bug, never bad input
        raise RuntimeError("conf/forge-search.yaml is missing from forge_conf")
    return node


def section(name: str, node: Mapping[str, Any] | None) -> dict[str, Any]:
    """`node` over its one home of defaults: conf/search/nsga.yaml for `search`, conf/forge-search.yaml for
    `evaluator` and `hv` (a mapping default, such as `search.mutation`, is merged one level deep). A config made by
    hand, or saved by an older Forge that lacked a key, so reads the values a composed one holds. The operators
    (search.operators_plugin.settle_operator) become full nodes: a name read, a legacy form read as it was meant."""
    out = copy.deepcopy(_recipe() if name == "search" else _run_defaults()[name])
    out.pop("defaults", None)
    for k, v in dict(node or {}).items():
        merge = isinstance(out.get(k), dict) and (v is None or isinstance(v, Mapping)) and not _operator(name, k)
        out[k] = {**out[k], **dict(v or {})} if merge else v
    if name == "search":
        settle_operators(out, dict(node or {}), _recipe())
    return out


def _operator(section_name: str, key: str) -> bool:
    return section_name == "search" and key in OPERATORS


def settle_config(c: Mapping[str, Any]) -> dict[str, Any]:
    """The config with its search section settled: the recipe's defaults filled in, every range checked (one line
    names the first value out of range and what is allowed); `hv` and `evaluator` over their YAML defaults."""
    s, hv, ev = (section(name, c.get(name)) for name in ("search", "hv", "evaluator"))
    check_ranges({**{f"search.{k}": v for k, v in s.items()}, "seed": c.get("seed"), "stop_after": c.get("stop_after"),
                  "threads": c.get("threads"), "hv.ref": hv.get("ref"), "evaluator.n_mc": ev.get("n_mc")})
    if s["algorithm"] not in ALGORITHMS:
        raise SearchConfigError(f"search.algorithm = {s['algorithm']!r} is unknown; allowed: {' | '.join(ALGORITHMS)}")
    if s["mutation"].get("_target_") == LAYER_MUTATION:
        mut = [k for k in s["mutation"] if k not in ("rate", "_target_")]
        if set(mut) - set(MutationParams.__dataclass_fields__):
            raise SearchConfigError(f"search.mutation keys {sorted(mut)} are invalid; allowed: rate, "
                                    + ", ".join(MutationParams.__dataclass_fields__))
    return {**c, "search": s, "hv": hv, "evaluator": ev}


def check_ranges(v: Mapping[str, Any]) -> None:
    """The ranges Hydra cannot check, on `v` (dotted key -> value; a run-level key that is null passes)."""
    for key, low in SIZES:
        if not (isinstance(v[key], int) and v[key] >= low):
            raise SearchConfigError(f"{key}={v[key]!r} is out of range; allowed: an integer >= {low}")
    for key in UPPER:
        if v[key] is not None:
            check_range("forge-search", key, v[key])
    ref = v["hv.ref"]
    if not (isinstance(ref, (int, float)) and not isinstance(ref, bool) and ref > 0):  # filled in: null is explicit
        raise SearchConfigError(f"hv.ref={ref!r} is out of range; allowed: a number > 0 (in anchor units; 2.0 = "
                                "twice the anchor genome's value)")
    for key, low in COUNTS:
        if v[key] is not None and not (isinstance(v[key], int) and v[key] >= low):
            raise SearchConfigError(f"{key}={v[key]!r} is out of range; allowed: an integer >= {low}")
