"""pymoo duplicate elimination by network: two rows are duplicates when they build the same genome.

The key function is `ForgeProblem.keys` (read from the encoded rows, equal exactly when the genome ids are),
so rejected offspring are never decoded.
"""
from __future__ import annotations

from typing import Callable, Hashable

import numpy as np
from pymoo.core.duplicate import DuplicateElimination


class IdDuplicateElimination(DuplicateElimination):
    """Two rows are duplicates exactly when they build the same network (same genome id)."""

    def __init__(self, row_keys: Callable[[np.ndarray], list[Hashable]]):
        super().__init__()
        self.row_keys = row_keys  # rows -> network keys (ForgeProblem.keys), equal exactly when genome ids are

    def _do(self, pop, other, is_duplicate):
        keys = self.row_keys(_rows(pop))
        if other is None:
            seen: set = set()
            for i, k in enumerate(keys):
                is_duplicate[i] = k in seen
                seen.add(k)
        else:
            taken = set(self.row_keys(_rows(other)))
            is_duplicate[:] = [k in taken for k in keys]
        return is_duplicate


def _rows(pop) -> np.ndarray:
    """The X matrix of a pymoo Population (what `pop.get("X")` gives, without its per-individual lookups: pymoo
    calls the remover several times per generation)."""
    return np.array([ind.X for ind in pop])
