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
from scipy import stats

KINDS = ("raw", "standard", "normal_scores")


@dataclass
class TargetMap:
    kind: str = "raw"
    mean: float = 0.0
    std: float = 1.0
    sorted_y: np.ndarray | None = None  # normal_scores: the training losses, ascending

    @classmethod
    def fit(cls, y: np.ndarray, kind: str) -> "TargetMap":
        if kind not in KINDS:
            raise ValueError(f"target = {kind!r} is invalid; allowed: {' | '.join(KINDS)}")
        y = np.asarray(y, dtype=np.float64)
        if kind == "standard":
            return cls(kind, float(y.mean()), float(y.std()) or 1.0)
        if kind == "normal_scores":
            return cls(kind, sorted_y=np.sort(y))
        return cls(kind)

    @property
    def scale(self) -> float:
        """Loss units per target unit near the middle (only used to report validation MAE)."""
        return self.std if self.sorted_y is None else float(np.std(self.sorted_y))

    def _q(self) -> np.ndarray:
        return (np.arange(len(self.sorted_y)) + 0.5) / len(self.sorted_y)

    def to_target(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        if self.sorted_y is None:
            return (y - self.mean) / self.std
        return stats.norm.ppf(np.interp(y, self.sorted_y, self._q()))  # train CDF, clipped to the range

    def to_loss(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64)
        if self.sorted_y is None:
            return z * self.std + self.mean
        return np.interp(stats.norm.cdf(z), self._q(), self.sorted_y)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "mean": self.mean, "std": self.std}
        if self.sorted_y is not None:
            d["sorted_y"] = [float(v) for v in self.sorted_y]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TargetMap":
        sy = d.get("sorted_y")
        kind = d.get("kind", "standard" if (d.get("mean", 0.0), d.get("std", 1.0)) != (0.0, 1.0) else "raw")
        return cls(kind, float(d.get("mean", 0.0)), float(d.get("std", 1.0)),
                   None if sy is None else np.asarray(sy, dtype=np.float64))
