"""Objectives declared by name and direction: one config entry each.

An entry of `objectives` (or a name in a constraint) is
- a string `name` (minimized) or `max:name` (maximized), or
- a mapping `{name: ..., direction: min|max, fn: package.module.function, params: {key: value}}` (`params`: the
  function's keyword arguments from config, `fn(genomes, **params)`).

A name is the loss (`val_loss`), a model total of `forge.lm.workload.model_totals` (params, kv_bytes_per_token,
...), a workload total of `forge.lm.workload.workload_totals` (kv_bytes and peak_memory_bytes at the workload's
context and batch), a core backend metric (ttft_ms, tpot_ms, energy_per_token_uj), any numeric backend extra,
or, with `fn`, a user function `fn(genomes) -> one number per genome`. The search minimizes `sign * value`,
so a maximized objective enters pymoo, the archive and the hypervolume negated; every file stores the value.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from forge.genomes.genome import Genome
from forge.lm.workload import WORKLOAD_TOTALS
from search.errors import SearchConfigError

LOSS = "val_loss"
MODEL_METRICS = ("params", "non_embedding_params", "kv_bytes_per_token", "flops_per_token",
                 "n_active_layers", "n_attn_layers")
CORE_COST = ("ttft_ms", "tpot_ms", "energy_per_token_uj")
NOT_BACKEND = (LOSS, *MODEL_METRICS, *WORKLOAD_TOTALS)  # metrics the backend is never asked for
DIRECTIONS = ("min", "max")


@dataclass(frozen=True)
class Objective:
    """One objective: its metric name, its direction and, for a user metric, the function that computes it."""

    name: str
    direction: str = "min"
    fn: Callable[[Sequence[Genome]], Any] | None = None

    @property
    def sign(self) -> float:
        return -1.0 if self.direction == "max" else 1.0

    def values(self, genomes: Sequence[Genome]) -> np.ndarray:
        """The user function's values as floats, one per genome (refused with a clear message otherwise)."""
        out = np.asarray(self.fn(list(genomes)), dtype=float).reshape(-1)  # type: ignore[misc]
        if len(out) != len(genomes):
            raise SearchConfigError(f"objective {self.name!r}: its function returned {len(out)} values for "
                                    f"{len(genomes)} genomes; allowed: one number per genome")
        return out


def parse_objective(entry: Any) -> Objective:
    """A config entry (string or mapping) → Objective; bad input names what is allowed."""
    if isinstance(entry, str):
        direction, _, name = entry.rpartition(":") if ":" in entry else ("min", "", entry)
        return _checked(name.strip(), direction.strip(), None)
    if isinstance(entry, Mapping) and "name" in entry:
        unknown = set(entry) - {"name", "direction", "fn", "params"}
        if unknown:
            raise SearchConfigError(f"objective key {sorted(unknown)[0]!r} is unknown; allowed: name, direction, fn, "
                                    "params")
        fn = _resolve(str(entry["fn"]), str(entry["name"])) if entry.get("fn") else None
        params = entry.get("params") or {}
        if not isinstance(params, Mapping) or (params and fn is None):
            raise SearchConfigError(f"objective {entry['name']!r}: params = {params!r} is invalid; allowed: a mapping "
                                    "of keyword arguments, with fn")
        fn = functools.partial(fn, **params) if params else fn
        return _checked(str(entry["name"]), str(entry.get("direction", "min")), fn)
    raise SearchConfigError(f"objective {entry!r} is invalid; allowed: a metric name, 'max:<name>', or "
                            "{name: ..., direction: min|max, fn: package.module.function}")


def _checked(name: str, direction: str, fn: Any) -> Objective:
    if not name.isidentifier():
        raise SearchConfigError(f"objective name {name!r} is invalid; allowed: a metric name such as params")
    if direction not in DIRECTIONS:
        raise SearchConfigError(f"objective {name!r} direction {direction!r} is invalid; allowed: min | max")
    return Objective(name, direction, fn)


def _resolve(spec: str, name: str) -> Callable:
    """'package.module.function' → the function: a user metric named in the config the user launched
    (an allowed `objective` plug-in, so a resumed run's saved config names no code)."""
    from forge import plugins

    try:
        fn = plugins.resolve("objective", spec)
    except plugins.PluginError as e:
        raise SearchConfigError(f"objective {name!r}: {e}") from None
    if not callable(fn):
        raise SearchConfigError(f"objective {name!r}: fn {spec!r} is not callable; allowed: "
                                "'package.module.function' taking a list of genomes")
    return fn


def parse_objectives(entries: Sequence[Any]) -> list[Objective]:
    objs = [parse_objective(e) for e in entries or []]
    if not objs:
        raise SearchConfigError("objectives is empty; allowed: a list such as [val_loss, ttft_ms]")
    names = [o.name for o in objs]
    if len(set(names)) != len(names):
        raise SearchConfigError(f"objectives {names} repeat a name; allowed: distinct names")
    return objs
