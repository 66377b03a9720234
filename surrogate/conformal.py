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

Two tails (`Tails`, the default of `ConformalInterval.fit`): the errors are not symmetric (a model
that shrinks toward the middle under-predicts its worst rows), so |y − μ| scores left every miss on one
side: the true loss above the upper bound for 7–8 % of unseen rows, never below the lower one. The
lower and upper bounds are therefore calibrated separately on the signed scores μ − y and y − μ, each at
level 1 − (1 − a)/2, so each tail misses at most (1 − a)/2 (Romano et al. 2019's asymmetric variant).
Bins may be given as quantile levels of μ: (0.1, 0.4, 0.7) gives the best-predicted 10 % its own bin,
the rows a loss-minimizing search picks from. No single row sets a bound (issue 35): a bin with fewer than
MIN_TAIL scores at or beyond its rank for the asked level is pooled with its neighbours (`ScoreBins.pooled`);
before, a 36-row best bin made its 95 % upper tail the one worst calibration residual, and 97.5 % infinite.
Where the scores come from: a held-out carve (`surrogate.fit.conformal_fit`) or, for a predictor fit on every
label, the out-of-fold rows of grouped CV (`surrogate.crossconf`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from forge.errors import UserError

METHODS = {"residual": "conformal-residual", "sigma": "conformal-sigma"}
MIN_BIN = 30  # fewest calibration rows per μ bin (a 90 % quantile of fewer is mostly noise)
MIN_TAIL = 5  # fewest scores at or beyond a bin's bound (else the bin is pooled with its neighbours)
BEST_BINS = (0.1, 0.4, 0.7)  # two-tailed default: μ-quantile edges, the best-predicted 10 % in a bin of its own


@dataclass(frozen=True)
class ScoreBins:
    """Sorted nonconformity scores per bin of μ; `edges` are the inner bin edges (ascending)."""

    edges: tuple[float, ...]
    scores: tuple[tuple[float, ...], ...]

    @classmethod
    def fit(cls, mu: np.ndarray, score: np.ndarray, bins: int | tuple[float, ...]) -> "ScoreBins":
        """`bins` equal-count bins of μ, or bins cut at those quantile levels of μ (fewer either way when a
        bin would hold < MIN_BIN rows)."""
        edges = np.quantile(mu, _levels(bins, len(mu))) if len(_levels(bins, len(mu))) else np.zeros(0)
        which = np.searchsorted(edges, mu, side="right")
        k = len(edges) + 1
        return cls(tuple(float(e) for e in edges),
                   tuple(tuple(float(s) for s in np.sort(score[which == b])) for b in range(k)))

    def quantile(self, level: float) -> np.ndarray:
        """Per bin: the ceil((n+1)·level)-th smallest score of the bin, pooled with its neighbours (`pooled`)
        until at least MIN_TAIL scores lie at or beyond that rank, so no single row sets a bound (inf only
        when even all bins together are too few for the level)."""
        out = []
        for b in range(len(self.scores)):
            s = self.pooled(b, level)
            r = math.ceil((len(s) + 1) * level)
            out.append(s[r - 1] if r <= len(s) else math.inf)
        return np.array(out)

    def pooled(self, b: int, level: float) -> np.ndarray:
        """Bin b's sorted scores, widened one neighbour bin at a time (both sides) until the bound at `level` is
        at worst the MIN_TAIL-th largest score. Why: a 36-row best bin made its 95 % tail the single worst row."""
        lo, hi = b, b + 1
        while True:
            s = np.sort(np.concatenate(self.scores[lo:hi]))
            if len(s) + 1 - math.ceil((len(s) + 1) * level) >= MIN_TAIL or (lo == 0 and hi == len(self.scores)):
                return s
            lo, hi = max(0, lo - 1), min(len(self.scores), hi + 1)

    def half_width(self, mu: np.ndarray, level: float) -> np.ndarray:
        return self.quantile(level)[np.searchsorted(np.array(self.edges), mu, side="right")]

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(self.edges), "scores": [[round(x, 6) for x in s] for s in self.scores]}

    @classmethod
    def from_dict(cls, d: dict[str, Any], signed: bool = False) -> "ScoreBins":
        """signed: a tail's scores (μ − y or y − μ), which may be negative; otherwise |error| scores >= 0."""
        edges, scores = tuple(float(e) for e in d["edges"]), tuple(tuple(float(x) for x in s) for s in d["scores"])
        if len(scores) != len(edges) + 1 or any(len(s) == 0 for s in scores) or list(edges) != sorted(edges):
            raise UserError("conformal bins: need len(edges) + 1 non-empty score lists and ascending edges")
        if any(not (np.all(np.isfinite(s)) and (signed or min(s) >= 0)) for s in scores):
            raise UserError("conformal scores must be finite" + ("" if signed else " and >= 0"))
        return cls(edges, scores)


def _levels(bins: int | tuple[float, ...], n: int) -> np.ndarray:
    """Inner quantile levels of μ for `bins`, keeping every bin at >= MIN_BIN of the n rows."""
    if isinstance(bins, (int, np.integer)):
        k = max(1, min(int(bins), n // MIN_BIN))
        return np.arange(1, k) / k
    kept: list[float] = []
    for q in sorted(float(b) for b in bins):
        if 0 < q < 1 and (q - (kept[-1] if kept else 0.0)) * n >= MIN_BIN and (1 - q) * n >= MIN_BIN:
            kept.append(q)
    return np.array(kept)


@dataclass(frozen=True)
class Tails:
    """Separately calibrated bounds: `lower` holds the signed scores μ − y, `upper` y − μ (σ-scaled for the
    sigma method). Each bound is set at level 1 − (1 − a)/2, so each side misses at most (1 − a)/2."""

    lower: ScoreBins
    upper: ScoreBins

    @classmethod
    def fit(cls, mu: np.ndarray, signed: np.ndarray, bins: int | tuple[float, ...]) -> "Tails":
        """`signed` = (y − μ) / scale: its negation calibrates the lower bound, itself the upper one."""
        return cls(ScoreBins.fit(mu, -signed, bins), ScoreBins.fit(mu, signed, bins))

    def half_widths(self, mu: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        a = 1.0 - (1.0 - level) / 2.0
        return self.lower.half_width(mu, a), self.upper.half_width(mu, a)

    def to_dict(self) -> dict[str, Any]:
        return {"lower": self.lower.to_dict(), "upper": self.upper.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tails":
        return cls(ScoreBins.from_dict(d["lower"], signed=True), ScoreBins.from_dict(d["upper"], signed=True))


def _bins_from_dict(d: dict[str, Any]) -> ScoreBins | Tails:
    return Tails.from_dict(d) if "lower" in d else ScoreBins.from_dict(d)


@dataclass(frozen=True)
class ConformalInterval:
    """Residual and (optionally) σ-scaled scores, each one-sided bins of |error| (`ScoreBins`, sidecars written
    before two tails) or separately calibrated tails (`Tails`), plus where they came from (`provenance`)."""

    residual: ScoreBins | Tails
    sigma: ScoreBins | Tails | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(cls, y: np.ndarray, mu: np.ndarray, mu_mc: np.ndarray | None = None, sigma: np.ndarray | None = None,
            bins: int | tuple[float, ...] = BEST_BINS, provenance: dict[str, Any] | None = None,
            two_tailed: bool = True) -> "ConformalInterval":
        """Scores from held-out labels `y`: deterministic μ (residual) and, if given, MC μ/σ (sigma)."""
        y, mu = np.asarray(y, float), np.asarray(mu, float)
        if y.shape != mu.shape or y.ndim != 1 or len(y) < 10 or not np.isfinite(y).all() or not np.isfinite(mu).all():
            raise UserError(f"conformal calibration needs >= 10 finite held-out (label, μ) pairs; got {len(y)}")
        scores = (lambda m, e: Tails.fit(m, e, bins)) if two_tailed else (lambda m, e: ScoreBins.fit(m, np.abs(e), bins))
        res, sig = scores(mu, y - mu), None
        if sigma is not None:
            mu_mc, sigma = np.asarray(mu_mc, float), np.asarray(sigma, float)
            if not (sigma > 0).all():
                raise UserError("conformal-sigma needs σ > 0 on every calibration row; allowed: n_mc > 0")
            sig = scores(mu_mc, (y - mu_mc) / sigma)
        return cls(res, sig, dict(provenance or {}))

    @property
    def two_tailed(self) -> bool:
        return isinstance(self.residual, Tails)

    def method(self, has_sigma: bool) -> str:
        return METHODS["sigma" if has_sigma and self.sigma is not None else "residual"]

    def interval(self, mu: np.ndarray, sigma: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi): σ-scaled where every σ > 0 and a σ calibration exists, else from the residual scores."""
        check_level(level)
        mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
        use_sigma = len(mu) and self.sigma is not None and np.all(sigma > 0)
        bins, scale = (self.sigma, sigma) if use_sigma else (self.residual, np.ones_like(mu))
        if isinstance(bins, Tails):
            h_lo, h_hi = bins.half_widths(mu, level)
        else:
            h_lo = h_hi = bins.half_width(mu, level)
        return mu - h_lo * scale, mu + h_hi * scale

    def to_dict(self) -> dict[str, Any]:
        return {"residual": self.residual.to_dict(), "sigma": self.sigma.to_dict() if self.sigma else None,
                "provenance": self.provenance}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ConformalInterval":
        try:
            return cls(_bins_from_dict(d["residual"]), _bins_from_dict(d["sigma"]) if d.get("sigma") else None,
                       dict(d.get("provenance") or {}))
        except (KeyError, TypeError) as e:
            raise UserError(f"conformal calibration: missing or malformed {e}; allowed: {{'residual': {{'edges', "
                            "'scores'}} or {{'lower', 'upper'}}, 'sigma': ... | null, 'provenance': {{...}}}}") from None


def interval_or_nan(conformal: ConformalInterval | None, mu: np.ndarray, sigma: np.ndarray,
                    level: float) -> tuple[np.ndarray, np.ndarray]:
    """A predictor's calibrated (lo, hi); NaN bounds when it has no calibration (an unknown error is not zero)."""
    if conformal is None:
        nan = np.full(len(np.asarray(mu)), np.nan)
        return nan, nan.copy()
    return conformal.interval(mu, sigma, level)


def check_level(level: float) -> None:
    if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
        raise UserError(f"interval level {level!r} is invalid; allowed: a number with 0 < level < 1 (e.g. 0.9)")


def interval_stats(y: np.ndarray, mu: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict[str, float]:
    """Coverage, each tail's miss rate (`above`: true loss worse than the upper bound, the optimistic miss a
    loss-minimizing search pays for), mean width, and coverage among the best-predicted 10 % of rows."""
    best = mu <= np.quantile(mu, 0.1)
    hit = (y >= lo) & (y <= hi)
    return {"coverage": float(hit.mean()), "below": float(np.mean(y < lo)), "above": float(np.mean(y > hi)),
            "width": float(np.mean(hi - lo)), "coverage_best10": float(hit[best].mean()),
            "width_best10": float(np.mean((hi - lo)[best])), "n_best10": int(best.sum())}


def coverage_cv(y: np.ndarray, mu: np.ndarray, mu_mc: np.ndarray | None, sigma: np.ndarray | None, level: float,
                folds: int = 5, bins: int | tuple[float, ...] = BEST_BINS, seed: int = 0,
                ids: Sequence[str] | None = None, two_tailed: bool = True) -> dict[str, Any]:
    """Cross-conformal check: calibrate on k−1 folds of the held-out rows, measure on the k-th. With `ids`
    (canonical genome ids) the folds are grouped by architecture (`surrogate.dataset.group_folds`).
    Returns per method `interval_stats` over the pooled test folds and the per-fold coverages."""
    from surrogate.dataset import group_folds

    y, mu = np.asarray(y, float), np.asarray(mu, float)
    fold = group_folds(ids, folds, seed) if ids is not None else np.random.default_rng(seed).permutation(len(y)) % folds
    out: dict[str, Any] = {}
    for name in ("residual", "sigma") if sigma is not None else ("residual",):
        m, s = (mu_mc, sigma) if name == "sigma" else (mu, np.zeros_like(mu))
        lo, hi, cov = np.zeros(len(y)), np.zeros(len(y)), []
        for f in range(folds):
            tr, te = fold != f, fold == f
            cal = ConformalInterval.fit(y[tr], mu[tr], None if mu_mc is None else mu_mc[tr],
                                        None if sigma is None else sigma[tr], bins, two_tailed=two_tailed)
            lo[te], hi[te] = cal.interval(m[te], s[te], level)
            cov.append(float(np.mean((y[te] >= lo[te]) & (y[te] <= hi[te]))))
        out[METHODS[name]] = {**interval_stats(y, m, lo, hi), "fold_coverage": cov}
    return out
