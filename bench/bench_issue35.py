"""Figures: RESULTS.md "Issue 35": interval variants, old vs new predictor, decision metrics (grouped CV).

Reads the grouped 5-fold out-of-fold predictions of `bench/bench_grouped_cv.py` (every row predicted by models
that never saw its architecture; labels re-read from ../shared). Everything fit is fit on the other folds' rows
(nested): the low-end stretch, the interval scores, the parts' spread scale.

1. Interval variants at 90 % (and 95 %): two-tailed residual scores in μ bins 0.1/0.4/0.7, without and with the
   minimum-tail pooling (`surrogate.conformal.MIN_TAIL`); scores normalized by the parts' disagreement (std of
   encoder / two forests [/ extra trees], plus a floor), in one bin and in the μ bins.
2. The old shipped checkpoint vs the new recipe on the SAME rows: the old checkpoint's own 354-row test split
   (0 architectures shared with its training rows), the new recipe's out-of-fold predictions of those rows.
3. Decision metrics (surrogate.decision) with bootstrap 95 % intervals for every part and the shipped blend
   (encoder, two rank forests, extra trees: equal quarters, fixed in advance), and the paired bootstrap
   (architectures resampled within folds) of the shipped blend against the old thirds (no extra trees).

    .venv/bin/python bench/bench_issue35.py      # ~1 min; writes bench/results/issue35.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

import surrogate.conformal as conformal
from surrogate.calibration import LowEndStretch
from surrogate.conformal import BEST_BINS, ConformalInterval, interval_stats
from surrogate.crossconf import KEYS, oof_rows
from surrogate.decision import decision_table
from surrogate.metrics import evaluate, top_rows

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from grouped_cv_report import paired_ci  # noqa: E402
SRC = ROOT / "bench" / "results" / "grouped_cv_oof.npz"


def nested(y, pred, fold, level, bins, spread=None, floor=0.0) -> dict:
    lo, hi, mu = np.zeros(len(y)), np.zeros(len(y)), np.zeros(len(y))
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        st = LowEndStretch.fit(pred[r], y[r])
        (m_r, s_r), (m_t, s_t) = (st.apply(pred[x], (spread[x] if spread is not None else np.zeros(x.sum())) + floor)
                                  for x in (r, t))
        mu[t] = m_t
        if spread is None:
            cal = ConformalInterval.fit(y[r], m_r, bins=bins)
            lo[t], hi[t] = cal.interval(m_t, np.zeros(t.sum()), level)
        else:
            cal = ConformalInterval.fit(y[r], m_r, m_r, s_r, bins=bins)
            lo[t], hi[t] = cal.interval(m_t, s_t, level)
    per = [interval_stats(y[fold == f], mu[fold == f], lo[fold == f], hi[fold == f]) for f in np.unique(fold)]
    out = {k: round(v, 4) for k, v in interval_stats(y, mu, lo, hi).items() if k in KEYS}
    return out | {f"fold_{k}": [round(p[k], 4) for p in per] for k in ("below", "above", "coverage_best10")}


def interval_variants(y, pred, fold, d) -> dict:
    sp3 = np.std([d["encoder"], d["rf_agg"], d["rf_full"]], axis=0)
    sp4 = np.std([d["encoder"], d["rf_agg"], d["rf_full"], d["et_full"]], axis=0)
    out = {}
    for level in (0.9, 0.95):
        keep = conformal.MIN_TAIL
        conformal.MIN_TAIL = 0  # the bins as shipped before issue 35: no pooling
        out[f"{level}: residual, bins 0.1/0.4/0.7, no pooling (before)"] = nested(y, pred, fold, level, BEST_BINS)
        conformal.MIN_TAIL = keep
        out[f"{level}: residual, bins 0.1/0.4/0.7, pooled to >= {keep} tail rows (shipped)"] = nested(
            y, pred, fold, level, BEST_BINS)
        for name, sp in (("3 parts", sp3), ("3 parts + extra trees", sp4)):
            for floor in (0.0, 0.05):
                for bins in (1, BEST_BINS):
                    out[f"{level}: normalized by spread of {name} + {floor}, bins {bins}"] = nested(
                        y, pred, fold, level, bins, sp, floor)
    return out


def old_vs_new(y, pred, ids) -> dict:
    """Old checkpoint on its test split vs the new recipe's out-of-fold predictions of the same rows."""
    from forge.disk.io import shared_data_dir
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.loading import load_predictor

    old = load_predictor("forgeformer-iha-paper")
    t = old.meta["test"]
    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    _, _, test = train_val_test(data, t["seed"], t["test_frac"])
    pos = {(i, round(float(v), 6)): j for j, (i, v) in enumerate(zip(ids, y))}  # duplicate ids: match the label too
    rows = np.array([pos[(i, round(float(v), 6))] for i, v in zip(test.ids, test.y)])
    p_old = old.predict(test.genomes)[0]
    st = LowEndStretch.fit(np.delete(pred, rows), np.delete(y, rows))  # the stretch fit off these rows
    p_new = st.apply(pred[rows], np.zeros(len(rows)))[0]
    return {"rows": len(rows), "old checkpoint (trained on 1,262 rows)": _m(test.y, p_old, test.ids),
            "new recipe (quarters + stretch), out-of-fold (fold models: ~1,400 rows)": _m(test.y, p_new, test.ids)}


def _m(y, p, ids) -> dict:
    ev = evaluate(y, p)
    return {k: round(ev[k], 4) for k in ("spearman", "kendall", "mae", "mae_at_5")} | decision_table(y, p, ids)


def cross_fit(y, pred, fold) -> np.ndarray:
    """pred with each test fold's low-end stretch fit on the other folds' rows."""
    out = np.zeros(len(y))
    for f in np.unique(fold):
        st = LowEndStretch.fit(pred[fold != f], y[fold != f])
        out[fold == f] = st.apply(pred[fold == f], np.zeros((fold == f).sum()))[0]
    return out


def main() -> None:
    y, pred, fold, ids = oof_rows(SRC)
    d = np.load(SRC)
    res = {"source": str(SRC.relative_to(ROOT)), "n_rows": len(y), "intervals": interval_variants(y, pred, fold, d),
           "old_vs_new": old_vs_new(y, pred, list(ids))}
    stretched = cross_fit(y, pred, fold)
    hyb = np.mean([d["encoder"], d["rf_agg"], d["rf_full"]], axis=0)
    parts = {"encoder (1 member, 12 ep)": d["encoder"], "rank forest, aggregates": d["rf_agg"],
             "rank forest, full view": d["rf_full"], "extra trees, full view": d["et_full"],
             "hybrid (encoder + 2 forests, thirds) + stretch": cross_fit(y, hyb, fold),
             "shipped: hybrid + extra trees (quarters), no stretch": pred, "shipped: quarters + stretch": stretched}
    res["decision"] = {name: _m(y, p, ids) for name, p in parts.items()}
    sp = lambda a, b: float(np.corrcoef(stats.rankdata(a), stats.rankdata(b))[0, 1])  # noqa: E731
    res["paired_quarters_minus_thirds"] = {  # both stretched; bootstrap of architectures within folds
        "spearman": paired_ci(y, stretched, parts["hybrid (encoder + 2 forests, thirds) + stretch"], fold, ids, sp),
        "mae_at_5": paired_ci(y, stretched, parts["hybrid (encoder + 2 forests, thirds) + stretch"], fold, ids,
                              lambda a, b: float(np.abs(a[top_rows(a, 5)] - b[top_rows(a, 5)]).mean()))}
    out = ROOT / "bench" / "results" / "issue35.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
