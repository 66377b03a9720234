"""Constraints of a search: `<metric> <op> <bound>` strings such as `val_loss < 3.8` or `ttft_ms <= 20`.

A constraint names the same metrics an objective may (`search.objectives`); `ForgeProblem` turns each into
one pymoo inequality column g ≤ 0, and adds one more for hardware infeasibility.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

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
