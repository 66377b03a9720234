"""A user's plug-ins, defined outside the package: an objective function and a surrogate class.

They reach the search through config alone (`objectives: [{name: ..., fn: tests.search.user_plugins.width}]`,
`evaluator.predictor: {_target_: tests.search.user_plugins.UserSurrogate}`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from forge.genomes.genome import Genome


def width(genomes: Sequence[Genome]) -> list[float]:
    """Summed MLP width of the active layers (a metric no backend and no analyzer knows)."""
    return [float(sum(layer.d_mlp for layer in g.active_layers)) for g in genomes]


class UserSurrogate:
    """A train-side surrogate only (fit / point predict, no n_mc, no interval): loss falls with depth."""

    def __init__(self, slope: float = 0.1, seed: int = 0):
        self.slope, self.seed, self.base = float(slope), seed, 4.0

    def fit(self, train: Any, val: Any = None) -> "UserSurrogate":
        self.base = float(np.mean(train.y)) if len(train.y) else 4.0
        return self

    def predict(self, genomes: Sequence[Genome]) -> np.ndarray:
        return np.array([self.base + 1.0 - self.slope * g.n_active for g in genomes], dtype=float)
