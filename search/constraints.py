"""Constraints of a search: `<metric> <op> <bound>` strings such as `val_loss < 3.8` or `ttft_ms <= 20`.

A constraint names the same metrics an objective may (`search.objectives`); `ForgeProblem` turns each into
one pymoo inequality column g ≤ 0, and adds one more for hardware infeasibility.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from forge.disk.io import as_float
from forge.numeric import round_float
from search.errors import SearchConfigError


@dataclass(frozen=True)
class Constraint:
    """`name op bound`, with op in <, <=, >, >=; g ≤ 0 means satisfied (pymoo convention)."""

    name: str
    op: str
    bound: float

    def g(self, values: np.ndarray) -> np.ndarray:
        return values - self.bound if self.op in ("<", "<=") else self.bound - values

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    """One constraint string; anything else is refused naming the allowed form."""
    m = re.fullmatch(r"\s*([A-Za-z_][\w.]*)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*", str(text))
    if not m:
        raise SearchConfigError(f"constraint {text!r} is invalid; allowed: '<metric> <|<=|>|>= <number>', "
                                f"e.g. 'val_loss < 3.8' or 'ttft_ms <= 20'")
    return Constraint(m.group(1), m.group(2), float(m.group(3)))


def constraint_use(constraints: list[Constraint], records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per constraint, over every evaluated genome: how many failed it and the value closest to failing it (the
    largest for `<`/`<=`, the smallest for `>`/`>=`). `failed == 0` means it never bound: the search would have
    gone the same way without it, which a user who set a budget should be told."""
    metrics = [r.get("metrics") or {} for r in records]
    return use_of_values(constraints, {c.name: np.array([as_float(m.get(c.name), np.nan) for m in metrics], float)
                                       for c in constraints})


def use_of_values(constraints: list[Constraint], values: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """`constraint_use` from each constraint metric's values, one per evaluated genome (nan: not recorded)."""
    out = []
    for c in constraints:
        v = np.asarray(values[c.name], float)
        v = v[np.isfinite(v)]
        upper = c.op in ("<", "<=")
        worst = (v.max() if upper else v.min()) if len(v) else None
        g = c.g(v)
        failed = (g >= 0) if c.op in ("<", ">") else (g > 0)  # a strict bound is failed by its own value too
        out.append({"constraint": str(c), "metric": c.name, "evaluated": int(len(v)), "failed": int(failed.sum()),
                    "closest": None if worst is None else round_float(float(worst)),
                    "closest_is": "largest" if upper else "smallest"})
    return out


def constraint_line(use: list[dict[str, Any]]) -> str | None:
    """`constraints: val_loss < 3.8 (65 of the 1836 genomes evaluated failed it); tpot_ms <= 5 (never bound: no
    evaluated genome came near it, the largest tpot_ms was 1.446)`, or None for a run without constraints."""
    parts = []
    keys = ("constraint", "metric", "evaluated", "failed", "closest", "closest_is")
    for u in (u for u in use if isinstance(u, dict) and all(k in u for k in keys)):  # summary.json is data
        if u["failed"] or not isinstance(u["closest"], (int, float)):
            parts.append(f"{u['constraint']} ({u['failed']} of the {u['evaluated']} genomes evaluated failed it)")
        else:
            parts.append(f"{u['constraint']} (never bound: no evaluated genome came near it, the {u['closest_is']} "
                         f"{u['metric']} was {u['closest']:.4g})")
    return "constraints: " + "; ".join(parts) if parts else None
