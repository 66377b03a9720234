"""Study (issue 44 §1): "looks good, trains badly". Can a risk model flag the front's disasters?

Rows: the 1,753 finite shared labels, predicted out of fold by the shipped blend (equal quarters of the
encoder, two rank forests and the extra trees; `bench/results/grouped_cv_oof.npz` from
`bench/bench_grouped_cv.py`, 5 GroupKFold folds over canonical genome ids), stretched as shipped with the
low-end stretch fit on the other four folds (nested). Residual r = true - predicted; "bad" = r > T inside the
predicted best quarter (the quarter cut fit on the other folds too).

1. What the bad rows share: median of each architecture aggregate (`acc_study.agg_features`) and of the
   provenance row id (`#idx`) among bad rows vs the rest of the best quarter, with a Mann-Whitney p.
2. Risk scores, every one fit by grouped CV (outer fold f scored by a model fit on the other folds' rows):
   the members' spread (std of the 4 parts, no fit), a classifier of P(r > T) (sklearn gradient boosting,
   fit on all rows of the other folds), a 90 %-quantile regressor of r. AUC of each inside the predicted
   best quarter, with a bootstrap 95 % interval over architectures.
3. Decision metrics (mean and worst true loss of the predicted top 10 and top 30), per test fold (averaged)
   and pooled, for today's pick (lowest μ) and two risk-aware picks fixed in advance: lowest μ + q90 (the
   quantile model's pessimistic loss) and lowest μ among rows whose P(bad) is below its best-quarter median.

    nice -n 10 .venv/bin/python bench/studies/risk_study.py     # ~1-2 min on 2 shared cores; writes
                                                                # bench/results/risk_study.json
"""
from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from acc_study import agg_features  # noqa: E402

from forge.disk.io import shared_data_dir  # noqa: E402
from surrogate.calibration import LowEndStretch  # noqa: E402
from surrogate.crossconf import PARTS, oof_rows  # noqa: E402
from surrogate.dataset import load_labelset  # noqa: E402

SRC = ROOT / "bench" / "results" / "grouped_cv_oof.npz"
OUT = ROOT / "bench" / "results" / "risk_study.json"
T = 0.3  # "far too optimistic" (the threshold)
Q = 0.25  # the predicted best quarter
REPS = 1000


def nested_mu(y, pred, fold) -> tuple[np.ndarray, np.ndarray]:
    """(stretched μ, in-best-quarter mask), each fold's stretch and quarter cut fit on the other folds."""
    mu, best = np.zeros(len(y)), np.zeros(len(y), bool)
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        st = LowEndStretch.fit(pred[r], y[r])
        m_r, m_t = (st.apply(pred[x], np.zeros(x.sum()))[0] for x in (r, t))
        mu[t], best[t] = m_t, m_t <= np.quantile(m_r, Q)
    return mu, best


def provenance_idx(n: int) -> np.ndarray:
    """The release's `#idx` of each finite row, in load order (the only provenance the CSV carries)."""
    with open(shared_data_dir() / "llmforge_iha_200M.csv") as fh:
        rows = [(int(r["#idx"]), float(r["val_loss"])) for r in csv.DictReader(fh)]
    idx = np.array([i for i, v in rows if np.isfinite(v)])
    assert len(idx) == n, "the CSV's finite rows are not the label set's rows"
    return idx


def risk_scores(x, y, mu, fold, bad_all, seed: int = 0) -> dict[str, np.ndarray]:
    """Out-of-fold risk scores: classifier P(r > T) and the 90 % quantile of r, features = x + μ."""
    xm = np.column_stack([x, mu])
    p_bad, q90 = np.zeros(len(y)), np.zeros(len(y))
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        clf = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                             l2_regularization=1.0, random_state=seed).fit(xm[r], bad_all[r])
        p_bad[t] = clf.predict_proba(xm[t])[:, 1]
        qr = HistGradientBoostingRegressor(loss="quantile", quantile=0.9, max_iter=200, learning_rate=0.05,
                                           max_leaf_nodes=15, random_state=seed).fit(xm[r], y[r] - mu[r])
        q90[t] = qr.predict(xm[t])
    return {"p_bad": p_bad, "q90": q90}


def auc_ci(bad, score, ids, reps: int = REPS, seed: int = 0) -> dict:
    """AUC and its bootstrap 95 % interval, architectures resampled."""
    groups = np.unique(ids, return_inverse=True)[1]
    members = [np.flatnonzero(groups == g) for g in range(groups.max() + 1)]
    rng, vals = np.random.default_rng(seed), []
    for _ in range(reps):
        pick = np.concatenate([members[j] for j in rng.integers(0, len(members), len(members))])
        if 0 < bad[pick].sum() < len(pick):
            vals.append(roc_auc_score(bad[pick], score[pick]))
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return {"auc": round(float(roc_auc_score(bad, score)), 4), "ci95": [round(float(lo), 4), round(float(hi), 4)]}


def picks(y, key, ks=(10, 30)) -> dict:
    """Mean and worst true loss of the k lowest-`key` rows."""
    out = {}
    for k in ks:
        top = np.argsort(key, kind="stable")[:k]
        out[f"top{k}_mean"], out[f"top{k}_worst"] = float(y[top].mean()), float(y[top].max())
    return out


def decisions(y, mu, fold, best, scores) -> dict:
    """Per-fold (averaged) and pooled decision metrics for today's pick and the two risk-aware ones."""
    thr = np.zeros(len(y))
    for f in np.unique(fold):  # P(bad) median over the other folds' best quarter (no test rows)
        r = (fold != f) & best
        thr[fold == f] = np.median(scores["p_bad"][r])
    keys = {"today (lowest mu)": mu, "lowest mu + q90": mu + scores["q90"],
            "lowest mu, P(bad) below the best-quarter median": np.where(scores["p_bad"] <= thr, mu, mu + 10.0)}
    out = {}
    for name, key in keys.items():
        per = [picks(y[fold == f], key[fold == f]) for f in np.unique(fold)]
        out[name] = {"per_fold_mean": {m: round(float(np.mean([p[m] for p in per])), 4) for m in per[0]},
                     "pooled": {m: round(v, 4) for m, v in picks(y, key).items()}}
    return out


def shared_traits(x, names, idx, r, best, bad) -> list[dict]:
    """Features whose distribution differs most between bad rows and the rest of the best quarter."""
    rest = best & ~bad
    cols = list(zip(names, x.T)) + [("provenance #idx", idx)]
    rows = []
    for name, v in cols:
        p = stats.mannwhitneyu(v[bad], v[rest]).pvalue if np.ptp(v[best]) > 0 else 1.0
        rows.append({"feature": name, "bad_median": round(float(np.median(v[bad])), 3),
                     "rest_median": round(float(np.median(v[rest])), 3), "p": float(p)})
    return sorted(rows, key=lambda d: d["p"])[:12]


def provenance_halves(idx, best, bad) -> dict:
    """Bad rate in the best quarter for release rows below / above the best quarter's median `#idx`."""
    cut = float(np.median(idx[best]))
    late = idx > cut
    return {"median_idx": cut, "bad_rate_early": round(float(bad[best & ~late].mean()), 4),
            "bad_rate_late": round(float(bad[best & late].mean()), 4),
            "bad_late": int(bad[late].sum()), "bad_early": int(bad[~late].sum())}


def main() -> None:
    t0 = time.time()
    y, pred, fold, ids = oof_rows(SRC)
    parts = np.load(SRC)
    spread = np.std([parts[p] for p in PARTS], axis=0)
    mu, best = nested_mu(y, pred, fold)
    r = y - mu
    bad_all = r > T
    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    x, names = agg_features(data.genomes)
    idx = provenance_idx(len(y))
    scores = risk_scores(x, y, mu, fold, bad_all)
    b = best
    res = {"threshold": T, "quarter": Q, "rows": len(y), "best_quarter_rows": int(b.sum()),
           "bad_in_best_quarter": int(bad_all[b].sum()), "bad_rate_best_quarter": round(float(bad_all[b].mean()), 4),
           "bad_rate_all": round(float(bad_all.mean()), 4),
           "auc_best_quarter": {"members' spread": auc_ci(bad_all[b], spread[b], ids[b]),
                                "classifier P(r > T)": auc_ci(bad_all[b], scores["p_bad"][b], ids[b]),
                                "quantile q90 of r": auc_ci(bad_all[b], scores["q90"][b], ids[b]),
                                "mu itself": auc_ci(bad_all[b], mu[b], ids[b])},
           "decisions": decisions(y, mu, fold, best, scores),
           "shared_traits": shared_traits(x, names, idx, r, b, bad_all & b),
           "provenance_halves": provenance_halves(idx, b, bad_all & b),
           "bad_rows": [{"id": ids[i][:12], "idx": int(idx[i]), "y": round(float(y[i]), 3), "mu": round(float(mu[i]), 3)}
                        for i in np.flatnonzero(bad_all & b)],
           "wall_s": round(time.time() - t0, 1)}
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "bad_rows"}, indent=1))


if __name__ == "__main__":
    main()
