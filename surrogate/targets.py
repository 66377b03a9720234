"""The map between losses and what the encoder is trained on, fitted on the training split only.

- `raw`: the loss itself (LLMForge App. C).
- `standard`: (loss − mean) / std.
- `normal_scores`: the loss's quantile in the training split, through the standard normal inverse
  CDF (rank-Gauss). The labels are bimodal (about 30 % of rows sit in a high-loss mode above 3.0); on
  normal scores L1 weighs every rank step alike instead of letting the gap between the modes dominate.
  Predictions map back through the training quantile function, so they are in loss units and never
  leave the training range.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri  # = scipy.stats.norm.cdf / .ppf, without importing scipy.stats

from forge.errors import UserError

KINDS = ("raw", "standard", "normal_scores")


GRID = 257  # quantile-grid points kept for normal_scores: a compact map, not the training label column


@dataclass
class TargetMap:
    kind: str = "raw"
    mean: float = 0.0
    std: float = 1.0
    grid_q: np.ndarray | None = None  # normal_scores: training-split quantile levels, ascending
    grid_y: np.ndarray | None = None  # ... and the training losses at those levels

    @classmethod
    def fit(cls, y: np.ndarray, kind: str) -> "TargetMap":
        if kind not in KINDS:
            raise UserError(f"target = {kind!r} is invalid; allowed: {' | '.join(KINDS)}")
        y = np.asarray(y, dtype=np.float64)
        if kind == "standard":
            return cls(kind, float(y.mean()), float(y.std()) or 1.0)
        if kind == "normal_scores":
            ys = np.sort(y)
            q = (np.arange(len(ys)) + 0.5) / len(ys)  # plotting positions of the sorted losses
            if len(ys) > GRID:  # keep GRID points of the empirical quantile function
                gq = np.linspace(q[0], q[-1], GRID)
                q, ys = gq, np.interp(gq, q, ys)
            return cls(kind, grid_q=q, grid_y=ys)
        return cls(kind)

    @property
    def scale(self) -> float:
        """Loss units per target unit near the middle (only used to report validation MAE)."""
        return self.std if self.grid_y is None else float(np.std(self.grid_y))

    def to_target(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if self.grid_y is None:
            return (y - self.mean) / self.std
        return ndtri(np.interp(y, self.grid_y, self.grid_q))  # train CDF, clipped to the range

    def to_loss(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64)
        if self.grid_y is None:
            return z * self.std + self.mean
        return np.interp(ndtr(z), self.grid_q, self.grid_y)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "mean": self.mean, "std": self.std}
        if self.grid_y is not None:
            d.update(grid_q=[float(v) for v in self.grid_q], grid_y=[float(v) for v in self.grid_y])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TargetMap":
        kind = d.get("kind", "standard" if (d.get("mean", 0.0), d.get("std", 1.0)) != (0.0, 1.0) else "raw")
        gq, gy = d.get("grid_q"), d.get("grid_y")
        if (gq is None) != (gy is None) or (gq is not None and len(gq) != len(gy)) or \
                (kind == "normal_scores" and gq is None):
            raise UserError("target map: grid_q and grid_y must both be present and of equal length")
        arr = lambda v: None if v is None else np.asarray(v, dtype=np.float64)  # noqa: E731
        return cls(kind, float(d.get("mean", 0.0)), float(d.get("std", 1.0)), arr(gq), arr(gy))
