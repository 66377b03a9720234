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

RECIPE = "nsga"
ALGORITHMS = ("nsga", "random")
PROBABILITIES = ("search.crossover", *(f"search.mutation.{k}" for k in ("rate", "p_delete", "p_duplicate", "p_rotate",
                                                                        "p_gene")))
SIZES = (("search.pop_size", 1), ("search.offspring", 1), ("search.generations", 0), ("search.mutation.max_step", 1))
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
    crossover: float  # single-point crossover probability
    mutation_rate: float  # per offspring (pymoo's `prob`)
    mutation: MutationParams  # the four operators' probabilities inside one mutation
    sampling: Any  # `uniform`, or a genome file or data/archs name to sample around
    coevolve_every: int  # K: a co-evolution event every K generations (0: off)

    @classmethod
    def of(cls, s: Mapping[str, Any]) -> "SearchSettings":
        """From a search section `settle_config` filled in and checked."""
        mut = dict(s["mutation"])
        rate = float(mut.pop("rate"))
        return cls(algorithm=str(s["algorithm"]), pop_size=int(s["pop_size"]), offspring=int(s["offspring"]),
                   generations=int(s["generations"]), crossover=float(s["crossover"]), mutation_rate=rate,
                   mutation=MutationParams(**mut), sampling=s["sampling"], coevolve_every=int(s["coevolve"]["every"]))


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
    hand, or saved by an older Forge that lacked a key, so reads the values a composed one holds."""
    out = copy.deepcopy(_recipe() if name == "search" else _run_defaults()[name])
    out.pop("defaults", None)
    for k, v in dict(node or {}).items():
        merge = isinstance(out.get(k), dict) and (v is None or isinstance(v, Mapping))
        out[k] = {**out[k], **dict(v or {})} if merge else v
    return out


def settle_config(c: Mapping[str, Any]) -> dict[str, Any]:
    """The config with its search section settled: the recipe's defaults filled in, every range checked (one line
    names the first value out of range and what is allowed); `hv` and `evaluator` over their YAML defaults."""
    s, hv, ev = (section(name, c.get(name)) for name in ("search", "hv", "evaluator"))
    check_ranges({**{f"search.{k}": v for k, v in s.items()}, **{f"search.mutation.{k}": v for k, v in s["mutation"].items()},
                  "seed": c.get("seed"), "stop_after": c.get("stop_after"), "threads": c.get("threads"),
                  "hv.ref": hv.get("ref"), "evaluator.n_mc": ev.get("n_mc")})
    if s["algorithm"] not in ALGORITHMS:
        raise SearchConfigError(f"search.algorithm = {s['algorithm']!r} is unknown; allowed: {' | '.join(ALGORITHMS)}")
    mut = [k for k in s["mutation"] if k != "rate"]
    if set(mut) - set(MutationParams.__dataclass_fields__):
        raise SearchConfigError(f"search.mutation keys {sorted(mut)} are invalid; allowed: rate, "
                                + ", ".join(MutationParams.__dataclass_fields__))
    return {**c, "search": s, "hv": hv, "evaluator": ev}


def check_ranges(v: Mapping[str, Any]) -> None:
    """The ranges Hydra cannot check, on `v` (dotted key -> value; a run-level key that is null passes)."""
    for key in PROBABILITIES:
        if not (isinstance(v[key], (int, float)) and 0.0 <= float(v[key]) <= 1.0):
            raise SearchConfigError(f"{key}={v[key]!r} is out of range; allowed: a probability in [0, 1]")
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
