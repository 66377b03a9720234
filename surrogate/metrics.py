"""Surrogate metrics (LLMForge Table 1): regression error and ranking fidelity on a test split.

Lower loss is better, so "top-X%" means the X% lowest true losses. k@X% is the smallest k such that
the k lowest *predicted* rows contain every true top-X% row (= the worst predicted rank among them).
"""
from __future__ import annotations

import math

import numpy as np

from forge.errors import UserError

METRICS = ("mae", "mae_at_5", "spearman", "kendall", "k_at_1", "k_at_5")


def top_rows(y: np.ndarray, pct: float) -> np.ndarray:
    """Indices of the true top-pct% (lowest loss) rows; at least one row."""
    n = max(1, int(math.ceil(pct / 100.0 * len(y))))
    return np.argsort(y, kind="stable")[:n]


def k_at(y: np.ndarray, pred: np.ndarray, pct: float) -> int:
    rank = np.empty(len(pred), dtype=np.int64)
    rank[np.argsort(pred, kind="stable")] = np.arange(1, len(pred) + 1)
    return int(rank[top_rows(y, pct)].max())


def mae(y: np.ndarray, pred: np.ndarray) -> float | None:
    """Mean absolute error; None for no rows (a refit that labelled nothing reports no error, not NaN)."""
    return float(np.mean(np.abs(pred - y))) if len(y) else None


def evaluate(y_true, y_pred) -> dict[str, float]:
    """All six metrics under the names the CLI and summary.json use."""
    y, p = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    if y.shape != p.shape or y.ndim != 1 or len(y) < 2:
        raise ValueError(f"metrics need two equal 1-D arrays of >= 2 rows; got {y.shape} and {p.shape}")
    if not (np.isfinite(y).all() and np.isfinite(p).all()):
        raise UserError("metrics: non-finite value in labels or predictions; allowed: finite numbers")
    from scipy import stats  # here, not at import: the search path needs top_rows only (~1 s of imports)

    top5 = top_rows(y, 5)
    return {
        "mae": float(np.abs(y - p).mean()),
        "mae_at_5": float(np.abs(y[top5] - p[top5]).mean()),
        "spearman": float(stats.spearmanr(y, p).statistic),
        "kendall": float(stats.kendalltau(y, p).statistic),
        "k_at_1": float(k_at(y, p, 1)),
        "k_at_5": float(k_at(y, p, 5)),
    }


def summarize(runs: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """{metric: {mean, std}} over seeds (population std, as a spread, not an error bar)."""
    return {k: {"mean": float(np.mean([r[k] for r in runs])), "std": float(np.std([r[k] for r in runs]))}
            for k in METRICS}
