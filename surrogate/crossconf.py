"""Cross-conformal calibration (issue 35 §1-§2): every shared label calibrates, none is carved out of training.

A split-conformal checkpoint trains on ~70 % of the labels and calibrates on a 20 % carve (354 rows on
iha-paper; 36 in its best-predicted bin, so that bin's upper bound was the single worst row). Here the
predictor is fit on ALL labels, and its scores are the out-of-fold residuals of the SAME recipe under grouped
K-fold CV (folds grouped by architecture, `surrogate.dataset.group_folds`): each row is predicted by a model
that never saw its architecture. This is cross-conformal / CV (Vovk 2015; Barber et al. 2021, Ann. Stat.
49:486, "CV" variant around the full-data model): the full model trains on 5/4 the rows of a fold model, so
its errors are, in expectation, no larger than the scores. Coverage is checked by nested grouped CV
(calibrate on 4 folds' out-of-fold rows, measure on the 5th, the stretch also cross-fitted), recorded in the
sidecar's provenance.

Why not MAPIE (1.6.0 on PyPI, considered first): its CV+/jackknife+ refits an sklearn estimator per fold and keeps
every fold model for prediction (5x the checkpoint and the search's inference), and its fitted objects persist
only by pickling, which a checkpoint here never does; the part we need is a per-bin quantile of stored scores
(`surrogate.conformal.ScoreBins`), ~20 lines of numpy.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from surrogate.calibration import LowEndStretch
from surrogate.conformal import BEST_BINS, MIN_TAIL, ConformalInterval, interval_stats
from surrogate.pairwise import PairwiseOdds

PARTS = ("encoder", "rf_agg", "rf_full", "et_full")  # the shipped blend: equal quarters (RESULTS.md, issue 35)
KEYS = ("coverage", "below", "above", "width", "coverage_best10", "width_best10")


def oof_rows(path: str | Path, parts: tuple[str, ...] = PARTS
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(labels, equal-weight out-of-fold prediction of `parts`, fold, ids) from a `bench/bench_grouped_cv.py`
    file; the labels are re-read from the shared CSV by row (never stored with the predictions)."""
    from forge.disk.io import shared_data_dir
    from surrogate.dataset import load_labelset

    d = np.load(path)
    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    if list(data.ids) != [str(i) for i in d["ids"]]:
        raise ValueError(f"{path}: its rows are not the shared labels' rows; re-run bench/bench_grouped_cv.py")
    pred = np.mean([d[p] for p in parts], axis=0)
    return np.asarray(data.y, float), pred, np.asarray(d["fold"]), np.asarray(d["ids"]).astype(str)


def nested_check(y: np.ndarray, pred: np.ndarray, fold: np.ndarray, level: float = 0.9,
                 bins: int | tuple[float, ...] = BEST_BINS) -> dict[str, Any]:
    """Interval stats on each test fold, stretch and scores fit on the other folds' out-of-fold rows only."""
    lo, hi, mu = np.zeros(len(y)), np.zeros(len(y)), np.zeros(len(y))
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        st = LowEndStretch.fit(pred[r], y[r])
        m_r, m_t = (st.apply(pred[x], np.zeros(x.sum()))[0] for x in (r, t))
        cal = ConformalInterval.fit(y[r], m_r, bins=bins)
        mu[t] = m_t
        lo[t], hi[t] = cal.interval(m_t, np.zeros(t.sum()), level)
    per = [interval_stats(y[fold == f], mu[fold == f], lo[fold == f], hi[fold == f]) for f in np.unique(fold)]
    out = {k: round(v, 4) for k, v in interval_stats(y, mu, lo, hi).items() if k in KEYS}
    return out | {f"fold_{k}": [round(p[k], 4) for p in per] for k in ("below", "above", "coverage_best10")}


def attach_cross_conformal(p: Any, oof_path: str | Path, level: float = 0.9) -> Any:
    """Give predictor `p` (fit on all labels with the recipe that made `oof_path`) its low-end stretch and its
    two-tailed interval, both from the out-of-fold rows; provenance records the nested check."""
    y, pred, fold, ids = oof_rows(oof_path)
    p.calib = LowEndStretch.fit(pred, y)
    mu = p.calib.apply(pred, np.zeros(len(pred)))[0]
    prov = {"rows": "out-of-fold predictions of this recipe, grouped 5-fold CV over architectures "
                    "(cross-conformal; every label also trains the shipped model)",
            "source": str(Path(oof_path).name), "n_rows": len(y), "folds": int(fold.max() + 1), "n_mc": 0,
            "bins": list(BEST_BINS), "min_tail": MIN_TAIL, "tails": "two (lower and upper calibrated apart)",
            "cv_check": {"level": level, "grouped_by": "architecture (canonical genome id)",
                         "nested": "stretch and scores fit on 4 folds' out-of-fold rows, measured on the 5th",
                         "conformal-residual": nested_check(y, pred, fold, level)}}
    p.conformal = ConformalInterval.fit(y, mu, bins=BEST_BINS, provenance=prov)
    # pairs within one fold: one fold model predicted both members, as one model predicts a whole front
    p.pairwise = PairwiseOdds.fit(mu, y, ids, fold, fold, source=f"{Path(oof_path).name}: out-of-fold pairs of "
                                  "grouped 5-fold CV, within each fold")
    p.meta["calibration_fit"] = {"method": "out-of-fold rows of grouped 5-fold CV (cross-fitted, no carve)",
                                 "n_rows": len(y)}
    return p
