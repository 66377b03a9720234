"""A user's search-space class, as a researcher would write one outside Forge: one extra config field
(`min_active`, a depth floor) enforced by its own repair, loaded from config alone through `_target_`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forge.spaces.space import SearchSpace


@dataclass(frozen=True)
class MinDepthSpace(SearchSpace):
    """Every genome keeps at least `min_active` active layers (the first slots are switched on)."""

    min_active: int = 1

    def repair_x(self, X: np.ndarray) -> np.ndarray:
        X = super().repair_x(X)
        X3 = X[:, :self.n_layer_var].reshape(len(X), self.L_max, self.n_genes)
        short = X3[:, :, 0].sum(axis=1) < self.min_active
        X3[short, :self.min_active, 0] = 1
        X[:, :self.n_layer_var] = X3.reshape(len(X), -1)
        return X
