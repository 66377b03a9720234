"""Decision metrics (issue 35 §3): what a user picking architectures from the predictions pays, not only ranks.

- `regret@k`: true loss of the best of the k best-predicted rows minus the true best loss (0 = the pick holds
  the true best; in loss units).
- `overlap@k`: share of the true top-k among the k best-predicted rows.
- `optimism@10%`: mean (true − predicted) over the best-predicted 10 % (> 0: the front's losses read too good).

Each comes with a bootstrap 95 % interval (rows resampled by architecture when ids are given, so duplicate
labels of one network move together), percentiles of `reps` resamples drawn from one seeded generator.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

Metric = Callable[[np.ndarray, np.ndarray], float]


def regret_at(k: int) -> Metric:
    def regret(y: np.ndarray, p: np.ndarray) -> float:
        pick = np.argsort(p, kind="stable")[: min(k, len(p))]
        return float(y[pick].min() - y.min())
    return regret


def overlap_at(k: int) -> Metric:
    def overlap(y: np.ndarray, p: np.ndarray) -> float:
        k_ = min(k, len(p))
        both = set(np.argsort(p, kind="stable")[:k_]) & set(np.argsort(y, kind="stable")[:k_])
        return len(both) / k_
    return overlap


def optimism_best10(y: np.ndarray, p: np.ndarray) -> float:
    best = p <= np.quantile(p, 0.1)
    return float(np.mean(y[best] - p[best]))


def decision_metrics(k: int = 10) -> dict[str, Metric]:
    return {f"regret_at_{k}": regret_at(k), f"overlap_at_{k}": overlap_at(k), "optimism_best10": optimism_best10}


def bootstrap(y: np.ndarray, p: np.ndarray, fn: Metric, ids: Sequence[str] | None = None, reps: int = 500,
              seed: int = 0) -> dict[str, float | list[float]]:
    """{value, ci95: [lo, hi]}: fn on all rows, and the 2.5-97.5 percentiles over resamples of architectures."""
    y, p = np.asarray(y, float), np.asarray(p, float)
    groups = np.unique(np.asarray(ids if ids is not None else np.arange(len(y)).astype(str)), return_inverse=True)[1]
    members = [np.flatnonzero(groups == g) for g in range(groups.max() + 1)]
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(reps):
        pick = np.concatenate([members[j] for j in rng.integers(0, len(members), len(members))])
        vals.append(fn(y[pick], p[pick]))
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return {"value": round(fn(y, p), 6), "ci95": [round(float(lo), 6), round(float(hi), 6)]}


def decision_table(y: np.ndarray, p: np.ndarray, ids: Sequence[str] | None = None, k: int = 10, reps: int = 500,
                   seed: int = 0) -> dict[str, dict]:
    """Every decision metric with its bootstrap interval (`bootstrap`)."""
    return {name: bootstrap(y, p, fn, ids, reps, seed) for name, fn in decision_metrics(k).items()}
