"""Chip Pareto of one genome (LLMForge App. E.3 step 5): joint non-dominated filter and top-K order.

The feasible chip configurations are filtered jointly on (TTFT, TPOT, energy per token, total ring
area) with pymoo's NonDominatedSorting. The front is then ordered (`rank_by`):

- "balanced" (default): by Σ_j log(f_j / min_front f_j), i.e. the geometric mean of each objective
  relative to the best value on the front; scale-free, so no objective dominates by its units;
- "energy" | "tpot" | "ttft" | "area": lexicographic with that objective first.

Ties fall back to energy, TPOT, TTFT, area, then grid order (stable sort). The first pick is the
one a search consumes; the first K are reported.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

OBJECTIVES = ("ttft_ms", "tpot_ms", "energy_per_token_uj", "area_mm2")
RANK_BY = ("balanced", "energy", "tpot", "ttft", "area")


def in_envelope(sim: dict[str, np.ndarray], area: Optional[tuple[float, float]],
                power: Optional[tuple[float, float]]) -> np.ndarray:
    """Configs inside the optional ring-area (mm²) and mean-decode-power (mW) envelopes."""
    ok = np.ones(len(sim["area_mm2"]), bool)
    for env, col in ((area, "area_mm2"), (power, "power_mw")):
        if env is not None:
            ok &= (sim[col] >= env[0]) & (sim[col] <= env[1])
    return ok


def rank_front(F: np.ndarray, rank_by: str = "balanced") -> np.ndarray:
    """Order (indices into F's rows) of non-dominated objective rows F (n, 4) for the top-K list."""
    tie = (F[:, 2], F[:, 1], F[:, 0], F[:, 3])  # energy, TPOT, TTFT, area
    if rank_by == "balanced":
        first = np.round(np.log(np.maximum(F, 1e-300) / np.maximum(F.min(axis=0), 1e-300)).sum(axis=1), 12)
    else:
        first = F[:, {"ttft": 0, "tpot": 1, "energy": 2, "area": 3}[rank_by]]
    return np.lexsort(tuple(reversed((first,) + tie)))  # lexsort: last key is primary


def top_k(sim: dict[str, np.ndarray], ok: np.ndarray, k: int, rank_by: str) -> tuple[np.ndarray, int]:
    """Indices of the first k configs of the joint front among `ok`, and the front size."""
    idx = np.flatnonzero(ok)
    F = np.stack([np.asarray(sim[o], float)[idx] for o in OBJECTIVES], axis=1)
    front = np.sort(NonDominatedSorting().do(F, only_non_dominated_front=True))
    order = front[rank_front(F[front], rank_by)]
    return idx[order[:k]], len(front)


def dedupe(keys: list[Any]) -> list[int]:
    """Positions of the first occurrence of each key (the same chip and partition reached twice)."""
    seen: set = set()
    out = []
    for i, key in enumerate(keys):
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out
