"""Pairwise odds (issue 51): P(the member with the lower μ trains better | Δμ), calibrated on held-out pairs.

A front's members are compared with each other, so the statement a user needs is pairwise: "the best-predicted
member trains better than this one with probability p". The marginal 90 % interval cannot say it: its upper tail
prices the ~5 % of members that look good and train badly, so the intervals of members whose true losses differ
by 7-8 σ of label noise still overlap. Here the odds are counted directly on pairs the model never trained on:

    P(y_a < y_b | μ_a < μ_b, |μ_a − μ_b| = d)  ≈  g(d),   g non-decreasing, 0.5 <= g <= 1,

g fit by scikit-learn's IsotonicRegression on every pair of one model's held-out predictions (grouped-CV
out-of-fold rows: pairs within one fold, one model, as a front is; or a held-out test split) whose μ lie within
`band` of that model's best, the band a front spans (the main job's spans 0.98 in μ). The μ level was tried as a
second input and did not earn its place (bench/studies/pairwise_study.py, RESULTS "Issue 51"). The fitted curve is
stored as its knots (np.interp reproduces the isotonic prediction exactly), with the hash of the rows it came from
and a grouped check: fit on the pairs of four folds, counted on the fifth, per Δμ bin.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from forge.errors import UserError

BAND = 1.0  # loss units above a model's best prediction: the pairs a front holds
RULE_OUT = 0.9  # P at which the best-predicted member is said to beat another (groups, the decide line)
EDGES = (0.0, 0.01, 0.02, 0.04, 0.08, 0.12, 0.18, 0.25)  # Δμ bins of the check (the last one is open)
TAIL_Q = 0.99  # pairs wider than this quantile of |Δμ| are pooled into one block at the top of the curve
MAX_PAIRS = 2_000_000  # a larger held-out set is subsampled (seeded) before the fit
MIN_CHECK = 100  # pairs a check bin needs before its error counts
MAX_KNOTS = 4096  # a sidecar's curve: more knots than this is not a calibration this module wrote
METHOD = ("isotonic regression (scikit-learn) of P(lower mu trains better) on |delta mu|, over pairs of one "
          "model's held-out predictions within `band` of its best")


def pairs(mu: np.ndarray, y: np.ndarray, ids: np.ndarray, model: np.ndarray, band: float = BAND,
          seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(|Δμ|, win) of every pair of rows predicted by one model (same `model` value), both within `band` of that
    model's best μ, of two different architectures; win = 1 when the lower-μ row has the lower label (0.5 on a
    tie in μ or in the label)."""
    d_all, w_all = [], []
    for m in np.unique(model):
        idx = np.flatnonzero(model == m)
        idx = idx[mu[idx] <= mu[idx].min() + band]
        i, j = np.triu_indices(len(idx), 1)
        a, b = idx[i], idx[j]
        keep = ids[a] != ids[b]
        a, b = a[keep], b[keep]
        d = mu[b] - mu[a]
        win = np.where(d == 0, 0.5, np.where(y[a] == y[b], 0.5, ((y[a] < y[b]) == (d > 0)).astype(float)))
        d_all.append(np.abs(d))
        w_all.append(win)
    d, w = (np.concatenate(v) if v else np.zeros(0) for v in (d_all, w_all))
    if len(d) > MAX_PAIRS:
        pick = np.sort(np.random.default_rng(seed).choice(len(d), MAX_PAIRS, replace=False))
        d, w = d[pick], w[pick]
    return d, w


def rows_hash(mu: np.ndarray, y: np.ndarray, ids: np.ndarray) -> str:
    """16 hex of the rows a calibration came from (ids, labels and predictions at 6 decimals, in id order)."""
    order = np.argsort(ids, kind="stable")
    text = "\n".join(f"{ids[k]} {y[k]:.6f} {mu[k]:.6f}" for k in order)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _isotonic(d: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.isotonic import IsotonicRegression

    if len(d) < 20:
        raise UserError(f"pairwise calibration needs >= 20 held-out pairs; got {len(d)}")
    d = np.minimum(d, np.quantile(d, TAIL_Q))  # the widest pairs pooled: no 1.00 read off a handful of pairs
    iso = IsotonicRegression(y_min=0.5, y_max=1.0, increasing=True, out_of_bounds="clip").fit(d, w)
    return np.asarray(iso.X_thresholds_, float), np.asarray(iso.y_thresholds_, float)


def bin_table(d: np.ndarray, w: np.ndarray, p: np.ndarray) -> list[dict[str, Any]]:
    """Per Δμ bin (EDGES): pairs, mean predicted P, observed share of wins."""
    out = []
    for lo, hi in zip(EDGES, (*EDGES[1:], np.inf)):
        s = (d >= lo) & (d < hi)
        if s.any():
            out.append({"lo": lo, "hi": None if hi == np.inf else hi, "n": int(s.sum()),
                        "predicted": round(float(p[s].mean()), 4), "observed": round(float(w[s].mean()), 4)})
    return out


@dataclass(frozen=True)
class PairwiseOdds:
    """The calibrated curve g(|Δμ|) as knots, and where it came from."""

    x: tuple[float, ...]  # |Δμ| knots, ascending
    p: tuple[float, ...]  # g at each knot: non-decreasing, in [0.5, 1]
    band: float = BAND
    provenance: dict[str, Any] = field(default_factory=dict)

    def prob(self, dmu: Any) -> np.ndarray:
        """P(the lower-μ member trains better) for each |Δμ| (rounded to 2 decimals: a statement, not a score)."""
        return np.round(np.interp(np.abs(np.asarray(dmu, float)), self.x, self.p), 2)

    @classmethod
    def fit(cls, mu: Any, y: Any, ids: Any, model: Any, folds: Any, band: float = BAND,
            source: str = "") -> "PairwiseOdds":
        """Fit on every pair (`pairs`); the provenance holds the grouped check (`cross_check`) on `folds`."""
        mu, y, ids, model, folds = _arrays(mu, y, ids, model, folds)
        d, w = pairs(mu, y, ids, model, band)
        x, p = _isotonic(d, w)
        prov = {"method": METHOD, "source": source, "rows_hash": rows_hash(mu, y, ids), "n_rows": int(len(y)),
                "n_pairs": int(len(d)), "check": cross_check(mu, y, ids, model, folds, band)}
        return cls(tuple(float(v) for v in x), tuple(float(v) for v in p), float(band), prov)

    def inherited(self, parent: str) -> "PairwiseOdds":
        """The same curve, marked as its parent checkpoint's (a fine-tune does not re-measure it)."""
        return PairwiseOdds(self.x, self.p, self.band, {**self.provenance, "inherited_from": parent})

    def to_dict(self) -> dict[str, Any]:
        return {"x": [round(v, 6) for v in self.x], "p": [round(v, 6) for v in self.p], "band": self.band,
                "provenance": self.provenance}

    @classmethod
    def from_dict(cls, d: Any) -> "PairwiseOdds":
        """Read back a sidecar's (untrusted) curve; anything else is refused in one line."""
        allowed = "allowed: {x: [ascending |delta mu| >= 0], p: [non-decreasing in [0.5, 1]], band > 0}"
        if not isinstance(d, dict) or not isinstance(d.get("x"), list) or not isinstance(d.get("p"), list):
            raise ValueError(f"pairwise is not a calibration curve; {allowed}")
        try:
            x, p, band = np.array(d["x"], float), np.array(d["p"], float), float(d.get("band", BAND))
        except (TypeError, ValueError):
            raise ValueError(f"pairwise holds a non-number; {allowed}") from None
        ok = (x.ndim == p.ndim == 1 and 1 <= len(x) == len(p) <= MAX_KNOTS and np.isfinite(x).all()
              and np.isfinite(p).all() and np.isfinite(band) and band > 0 and (x >= 0).all()
              and (np.diff(x) >= 0).all() and (np.diff(p) >= 0).all() and (p >= 0.5).all() and (p <= 1).all())
        if not ok:
            raise ValueError(f"pairwise curve is malformed ({len(x)} knots); {allowed}")
        prov = d.get("provenance") if isinstance(d.get("provenance"), dict) else {}
        return cls(tuple(x.tolist()), tuple(p.tolist()), band, prov)


def _arrays(*cols: Any) -> list[np.ndarray]:
    mu, y, ids, model, folds = (np.asarray(c) for c in cols)
    if not (len(mu) == len(y) == len(ids) == len(model) == len(folds)):
        raise UserError("pairwise calibration: mu, y, ids, model and folds differ in length")
    mu, y = mu.astype(float), y.astype(float)
    if not (np.isfinite(mu).all() and np.isfinite(y).all()):
        raise UserError("pairwise calibration: non-finite prediction or label; allowed: finite numbers")
    return [mu, y, ids.astype(str), model, folds]


def cross_check(mu: np.ndarray, y: np.ndarray, ids: np.ndarray, model: np.ndarray, folds: np.ndarray,
                band: float = BAND) -> dict[str, Any]:
    """Grouped check: for each fold f, fit on the pairs of rows outside f, count on the pairs inside f.
    Returns every fold's bins and the largest |predicted − observed| over bins of >= MIN_CHECK pairs (None when
    no bin is that large: too few held-out rows to check the curve)."""
    per_fold, errs = [], []
    for f in np.unique(folds):
        r, t = folds != f, folds == f
        x, p = _isotonic(*pairs(mu[r], y[r], ids[r], model[r], band))
        d, w = pairs(mu[t], y[t], ids[t], model[t], band)
        table = bin_table(d, w, np.interp(d, x, p))
        errs += [abs(b["predicted"] - b["observed"]) for b in table if b["n"] >= MIN_CHECK]
        per_fold.append(table)
    return {"folds": int(len(np.unique(folds))), "fit": "pairs of the other folds' rows", "bins": per_fold,
            "checked_bins": len(errs), "max_error": round(max(errs), 4) if errs else None}


def group_folds_of(ids: Sequence[str], k: int = 5, seed: int = 0) -> np.ndarray:
    """Fold of each row, grouped by architecture (surrogate.dataset.group_folds), for a single model's rows."""
    from surrogate.dataset import group_folds

    return np.asarray(group_folds(list(ids), k, seed))
