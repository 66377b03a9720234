"""Split-conformal intervals on the loss predictions: [lo, hi] that hold the true loss at a stated level.

Not the low-end stretch of `surrogate.calibration` (that moves μ; this sizes an interval around it).

Calibration rows are labelled architectures the model never trained on nor selected an epoch on (for
a shipped checkpoint: its held-out test split). On them we keep the nonconformity scores
- `residual`: |y − μ| with deterministic μ (the search's default single pass, σ = 0), and
- `sigma`:    |y − μ| / σ with μ, σ from n_mc MC-dropout passes (σ scaled by a conformal factor),
split into bins of predicted μ (Mondrian conformal: the score quantile is taken within the bin a
prediction falls in). Binning is the locally-adaptive part: on iha-paper the best-predicted third
errs about 4x less than the rest, so one global quantile would make every front interval ~4x too
wide (bench/RESULTS.md, "Calibrated loss intervals"). For n scores in a bin the interval at level a
uses the ceil((n + 1)·a)-th smallest score (Vovk et al. 2005; Lei et al. 2018, JASA 113:1094), which
covers a fresh exchangeable row with probability >= a, conditional on the bin.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forge.errors import UserError

METHODS = {"residual": "conformal-residual", "sigma": "conformal-sigma"}
MIN_BIN = 30  # fewest calibration rows per μ bin (a 90 % quantile of fewer is mostly noise)


@dataclass(frozen=True)
class ScoreBins:
    """Sorted nonconformity scores per bin of μ; `edges` are the inner bin edges (ascending)."""

    edges: tuple[float, ...]
    scores: tuple[tuple[float, ...], ...]

    @classmethod
    def fit(cls, mu: np.ndarray, score: np.ndarray, bins: int) -> "ScoreBins":
        """`bins` equal-count bins of μ (fewer when a bin would hold < MIN_BIN rows)."""
        k = max(1, min(int(bins), len(mu) // MIN_BIN))
        edges = np.quantile(mu, np.arange(1, k) / k) if k > 1 else np.zeros(0)
        which = np.searchsorted(edges, mu, side="right")
        return cls(tuple(float(e) for e in edges),
                   tuple(tuple(float(s) for s in np.sort(score[which == b])) for b in range(k)))

    def quantile(self, level: float) -> np.ndarray:
        """Per bin: the ceil((n+1)·level)-th smallest score (inf when the bin is too small for the level)."""
        out = []
        for s in self.scores:
            r = math.ceil((len(s) + 1) * level)
            out.append(s[r - 1] if r <= len(s) else math.inf)
        return np.array(out)

    def half_width(self, mu: np.ndarray, level: float) -> np.ndarray:
        return self.quantile(level)[np.searchsorted(np.array(self.edges), mu, side="right")]

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(self.edges), "scores": [[round(x, 6) for x in s] for s in self.scores]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ScoreBins":
        edges, scores = tuple(float(e) for e in d["edges"]), tuple(tuple(float(x) for x in s) for s in d["scores"])
        if len(scores) != len(edges) + 1 or any(len(s) == 0 for s in scores) or list(edges) != sorted(edges):
            raise UserError("conformal bins: need len(edges) + 1 non-empty score lists and ascending edges")
        if any(not (np.all(np.isfinite(s)) and min(s) >= 0) for s in scores):
            raise UserError("conformal scores must be finite and >= 0")
        return cls(edges, scores)


@dataclass(frozen=True)
class ConformalInterval:
    """Residual and (optionally) σ-scaled score bins plus where they came from (`provenance`)."""

    residual: ScoreBins
    sigma: ScoreBins | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(cls, y: np.ndarray, mu: np.ndarray, mu_mc: np.ndarray | None = None, sigma: np.ndarray | None = None,
            bins: int = 3, provenance: dict[str, Any] | None = None) -> "ConformalInterval":
        """Scores from held-out labels `y`: deterministic μ (residual) and, if given, MC μ/σ (sigma)."""
        y, mu = np.asarray(y, float), np.asarray(mu, float)
        if y.shape != mu.shape or y.ndim != 1 or len(y) < 10 or not np.isfinite(y).all() or not np.isfinite(mu).all():
            raise UserError(f"conformal calibration needs >= 10 finite held-out (label, μ) pairs; got {len(y)}")
        res = ScoreBins.fit(mu, np.abs(y - mu), bins)
        sig = None
        if sigma is not None:
            mu_mc, sigma = np.asarray(mu_mc, float), np.asarray(sigma, float)
            if not (sigma > 0).all():
                raise UserError("conformal-sigma needs σ > 0 on every calibration row; allowed: n_mc > 0")
            sig = ScoreBins.fit(mu_mc, np.abs(y - mu_mc) / sigma, bins)
        return cls(res, sig, dict(provenance or {}))

    def method(self, has_sigma: bool) -> str:
        return METHODS["sigma" if has_sigma and self.sigma is not None else "residual"]

    def interval(self, mu: np.ndarray, sigma: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi): σ-scaled where every σ > 0 and a σ calibration exists, else μ ± the residual quantile."""
        check_level(level)
        mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
        if len(mu) and self.sigma is not None and np.all(sigma > 0):
            h = self.sigma.half_width(mu, level) * sigma
        else:
            h = self.residual.half_width(mu, level)
        return mu - h, mu + h

    def to_dict(self) -> dict[str, Any]:
        return {"residual": self.residual.to_dict(), "sigma": self.sigma.to_dict() if self.sigma else None,
                "provenance": self.provenance}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ConformalInterval":
        try:
            return cls(ScoreBins.from_dict(d["residual"]), ScoreBins.from_dict(d["sigma"]) if d.get("sigma") else None,
                       dict(d.get("provenance") or {}))
        except (KeyError, TypeError) as e:
            raise UserError(f"conformal calibration: missing or malformed {e}; allowed: "
                            "{'residual': {'edges', 'scores'}, 'sigma': ... | null, 'provenance': {...}}") from None


def check_level(level: float) -> None:
    if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
        raise UserError(f"interval level {level!r} is invalid; allowed: a number with 0 < level < 1 (e.g. 0.9)")


def coverage_cv(y: np.ndarray, mu: np.ndarray, mu_mc: np.ndarray | None, sigma: np.ndarray | None, level: float,
                folds: int = 5, bins: int = 3, seed: int = 0) -> dict[str, Any]:
    """Cross-conformal check: calibrate on k−1 folds of the held-out rows, measure on the k-th.
    Returns per method the mean coverage, per-fold coverages, and the mean interval width."""
    y, mu = np.asarray(y, float), np.asarray(mu, float)
    fold = np.random.default_rng(seed).permutation(len(y)) % folds
    out: dict[str, Any] = {}
    for name in ("residual", "sigma") if sigma is not None else ("residual",):
        cov, width = [], []
        for f in range(folds):
            tr, te = fold != f, fold == f
            cal = ConformalInterval.fit(y[tr], mu[tr], None if mu_mc is None else mu_mc[tr],
                                        None if sigma is None else sigma[tr], bins)
            m, s = (mu_mc, sigma) if name == "sigma" else (mu, np.zeros_like(mu))
            lo, hi = cal.interval(m[te], s[te], level)
            cov.append(float(np.mean((y[te] >= lo) & (y[te] <= hi))))
            width.append(float(np.mean(hi - lo)))
        out[METHODS[name]] = {"coverage": float(np.mean(cov)), "fold_coverage": cov, "width": float(np.mean(width))}
    return out
