"""Figures: RESULTS.md "Issue 27: loss side": grouped-CV metrics, ensemble weight, stretch, paired CIs, intervals.

Reads the out-of-fold predictions of `bench/bench_grouped_cv.py` (every row predicted by models that never
saw its architecture). Everything chosen here is chosen by cross-fitting: for test fold f, the extra-trees
weight and the low-end stretch are picked on the other folds' out-of-fold rows only, then scored on fold f.
Paired CIs: 500 bootstrap resamples of architectures within each fold (the per-fold metric averaged over
folds, both models on the same resample), 2.5-97.5 percentiles of the difference.

    .venv/bin/python bench/grouped_cv_report.py
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import stats

from surrogate.calibration import LowEndStretch
from surrogate.conformal import BEST_BINS, ConformalInterval, interval_stats
from surrogate.metrics import evaluate, top_rows

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "bench" / "results" / "grouped_cv_oof.npz"
GRID_W = np.round(np.arange(0.0, 1.01, 0.1), 2)  # extra-trees weight in the ensemble, fixed in advance


def per_fold(y, pred, fold, fn) -> list[float]:
    return [fn(y[fold == f], pred[fold == f]) for f in np.unique(fold)]


def spearman(y, p) -> float:
    """Spearman's rho as the Pearson correlation of average ranks (what scipy computes, ~10x faster here)."""
    return float(np.corrcoef(stats.rankdata(y), stats.rankdata(p))[0, 1])


def mae5(y, p) -> float:
    top = top_rows(y, 5)
    return float(np.abs(y[top] - p[top]).mean())


def cross_fit_weight(y, hybrid, et, fold) -> tuple[np.ndarray, dict]:
    """The ensemble's test-fold predictions, each fold's weight picked by mean Spearman on the other folds."""
    out, picked = np.zeros(len(y)), {}
    for f in np.unique(fold):
        rest = fold != f
        score = [np.mean(per_fold(y[rest], (1 - w) * hybrid[rest] + w * et[rest], fold[rest], spearman)) for w in GRID_W]
        w = float(GRID_W[int(np.argmax(score))])
        picked[int(f)] = w
        out[fold == f] = ((1 - w) * hybrid + w * et)[fold == f]
    return out, picked


def cross_fit_stretch(y, pred, fold) -> tuple[np.ndarray, dict]:
    """pred with each fold's low-end stretch picked (surrogate.calibration) on the other folds' rows."""
    out, picked = pred.copy(), {}
    for f in np.unique(fold):
        s = LowEndStretch.fit(pred[fold != f], y[fold != f])
        picked[int(f)] = {"cut": round(s.cut, 4), "k": s.k}
        out[fold == f] = s.apply(pred[fold == f], np.zeros((fold == f).sum()))[0]
    return out, picked


def paired_ci(y, a, b, fold, ids, fn, reps=500, seed=0) -> dict:
    """Bootstrap CI of mean-over-folds fn(a) − fn(b), resampling architectures within each fold."""
    rng = np.random.default_rng(seed)
    parts = []
    for f in np.unique(fold):
        rows = np.flatnonzero(fold == f)
        _, g = np.unique(ids[rows], return_inverse=True)
        parts.append((rows, [rows[g == j] for j in range(g.max() + 1)]))
    diffs = []
    for _ in range(reps):
        d = []
        for rows, groups in parts:
            pick = np.concatenate([groups[j] for j in rng.integers(0, len(groups), len(groups))])
            d.append(fn(y[pick], a[pick]) - fn(y[pick], b[pick]))
        diffs.append(np.mean(d))
    point = np.mean(per_fold(y, a, fold, fn)) - np.mean(per_fold(y, b, fold, fn))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return {"diff": round(float(point), 4), "ci95": [round(float(lo), 4), round(float(hi), 4)]}


def cv_intervals(y, pred, fold, two_tailed: bool, bins, level=0.9) -> dict:
    """Residual conformal interval of each test fold calibrated on the other folds' out-of-fold rows."""
    lo, hi = np.zeros(len(y)), np.zeros(len(y))
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        cal = ConformalInterval.fit(y[r], pred[r], bins=bins, two_tailed=two_tailed)
        lo[t], hi[t] = cal.interval(pred[t], np.zeros(t.sum()), level)
    per = [interval_stats(y[fold == f], pred[fold == f], lo[fold == f], hi[fold == f]) for f in np.unique(fold)]
    pooled = interval_stats(y, pred, lo, hi)
    return {k: round(v, 4) for k, v in pooled.items()} | {
        "fold_above": [round(p["above"], 4) for p in per], "fold_below": [round(p["below"], 4) for p in per],
        "fold_coverage_best10": [round(p["coverage_best10"], 4) for p in per]}


def summarize(y, pred, fold) -> dict:
    runs = [evaluate(y[fold == f], pred[fold == f]) for f in np.unique(fold)]
    return {k: [round(float(np.mean([r[k] for r in runs])), 4), round(float(np.std([r[k] for r in runs])), 4)]
            for k in ("spearman", "kendall", "mae", "mae_at_5", "k_at_1", "k_at_5")}


def _labels(ids: np.ndarray) -> np.ndarray:
    """The real labels, read from ../shared by row (never committed), checked against the stored ids."""
    from forge.disk.io import shared_data_dir
    from surrogate.dataset import load_labelset

    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    if list(data.ids) != [str(i) for i in ids]:
        raise SystemExit(f"{SRC}: its rows are not the shared labels' rows; re-run bench/bench_grouped_cv.py")
    return np.asarray(data.y, dtype=float)


def main() -> None:
    d = np.load(SRC)
    fold, ids = d["fold"], d["ids"]
    y = _labels(ids)
    hybrid = (d["encoder"] + d["rf_agg"] + d["rf_full"]) / 3.0
    ens, w_fold = cross_fit_weight(y, hybrid, d["et_full"], fold)
    score_all = [np.mean(per_fold(y, (1 - w) * hybrid + w * d["et_full"], fold, spearman)) for w in GRID_W]
    w_all = float(GRID_W[int(np.argmax(score_all))])
    hyb_s, k_hyb = cross_fit_stretch(y, hybrid, fold)
    ens_s, k_ens = cross_fit_stretch(y, ens, fold)
    models = {"encoder (1 member, 12 ep)": d["encoder"], "extra trees (full view)": d["et_full"],
              "hybrid recipe, no stretch": hybrid, "hybrid recipe + stretch": hyb_s,
              "ensemble, no stretch": ens, "ensemble + stretch": ens_s}
    res = {"source": str(SRC.relative_to(ROOT)), "n_rows": len(y), "folds": int(fold.max() + 1),
           "metrics": {m: summarize(y, p, fold) for m, p in models.items()},
           "ensemble_weight": {"per_fold": w_fold, "all_folds": w_all,
                               "spearman_by_weight": dict(zip(map(float, GRID_W), np.round(score_all, 4)))},
           "stretch": {"hybrid": k_hyb, "ensemble": k_ens}}
    res["paired"] = {f"{a} - {b}": {"spearman": paired_ci(y, models[a], models[b], fold, ids, spearman),
                                    "mae_at_5": paired_ci(y, models[a], models[b], fold, ids, mae5)}
                     for a, b in (("ensemble, no stretch", "hybrid recipe, no stretch"),
                                  ("ensemble + stretch", "hybrid recipe + stretch"),
                                  ("ensemble, no stretch", "encoder (1 member, 12 ep)"),
                                  ("hybrid recipe + stretch", "hybrid recipe, no stretch"),
                                  ("ensemble + stretch", "ensemble, no stretch"))}
    res["intervals"] = {m: {"one-tailed |e|, 3 equal bins": cv_intervals(y, models[m], fold, False, 3),
                            "two-tailed, bins at μ quantiles 0.1/0.4/0.7": cv_intervals(y, models[m], fold, True,
                                                                                         BEST_BINS)}
                        for m in ("hybrid recipe + stretch", "ensemble, no stretch", "ensemble + stretch")}
    out = ROOT / "bench" / "results" / "grouped_cv_report.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
