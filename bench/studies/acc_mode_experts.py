"""Study (Issue 5, one-off, not adopted): RESULTS.md Issue 5 session 4 "mode experts".

Mode experts for the tree half of the hybrid: does a low-mode specialist lift the ranking?

Why: the labels are bimodal (31 % above 3.0). The shipped rank forests order the true low-mode rows
with Spearman ≈ 0.68 only, although label noise there is small (sd 0.015, acc_study). A forest fit on
low-mode rows alone orders them better. This script measures whether that specialist, gated by a
forest classifier's P(high), improves the whole ranking:

    refined = forests + β · (1 − P(high)) · (low_expert − mean(low_expert))

β ∈ BETAS is chosen per split on the validation carve (models fit on the train rows only); the chosen
β is then applied with every model refit on train + val, and scored on the untouched test rows. The
splits and test rows are the compare table's (seeded 80/20 by architecture id).

    .venv/bin/python bench/acc_mode_experts.py --out bench/results/acc_mode_experts.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import roc_auc_score

from forge.disk.io import shared_data_dir
from surrogate.dataset import LabelSet, load_labelset, train_val_test
from surrogate.metrics import evaluate, summarize
from surrogate.trees import fit_forests, forests_predict, tree_views

HIGH = 3.0  # the high-loss mode threshold
BETAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
KW = dict(max_features=0.3, min_samples_leaf=3, n_jobs=2)  # the shipped forests' fixed settings


def _parts(fit: LabelSet, extra: LabelSet | None, score: LabelSet, seed: int) -> dict[str, np.ndarray]:
    """Shipped forests, P(high) and the low-mode expert, fit on fit (+ extra), predicted on score."""
    both = fit.join(extra) if extra is not None else fit
    X, Xs = tree_views(both.genomes)["full"], tree_views(score.genomes)["full"]
    hi = both.y >= HIGH
    p = RandomForestClassifier(300, random_state=seed, **KW).fit(X, hi).predict_proba(Xs)[:, 1]
    low = RandomForestRegressor(300, random_state=seed, **KW).fit(X[~hi], both.y[~hi]).predict(Xs)
    return {"forests": forests_predict(fit_forests(fit, extra, 100, seed, 40), score.genomes), "p_high": p,
            "low": low}


def _refine(parts: dict[str, np.ndarray], beta: float) -> np.ndarray:
    low = parts["low"]
    return parts["forests"] + beta * (1.0 - parts["p_high"]) * (low - low.mean())


def run_split(data: LabelSet, s: int) -> dict:
    train, val, test = train_val_test(data, s, 0.2)
    on_val = _parts(train, None, val, s)
    val_rho = {b: float(spearmanr(_refine(on_val, b), val.y)[0]) for b in BETAS}
    beta = max(BETAS, key=lambda b: (val_rho[b], -b))  # ties → the smaller change
    on_test = _parts(train, val, test, s)
    low = test.y < HIGH
    within = {k: float(spearmanr(on_test[k][low], test.y[low])[0]) for k in ("forests", "low")}
    return {"split": s, "beta": beta, "val_spearman": val_rho, "within_low_spearman": within,
            "forests": evaluate(test.y, on_test["forests"]), "refined": evaluate(test.y, _refine(on_test, beta)),
            "auc_p_high": float(roc_auc_score(test.y >= HIGH, on_test["p_high"]))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", default="0,1,2,3,4")
    ap.add_argument("--out", default="bench/results/acc_mode_experts.json")
    a = ap.parse_args()
    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    runs = []
    for s in (int(v) for v in a.splits.split(",")):
        runs.append(run_split(data, s))
        r = runs[-1]
        print(f"split {s}: beta {r['beta']}  forests {r['forests']['spearman']:.4f}  refined "
              f"{r['refined']['spearman']:.4f}  within-low {r['within_low_spearman']}", flush=True)
    out = {"runs": runs, "forests": summarize([r["forests"] for r in runs]),
           "refined": summarize([r["refined"] for r in runs]),
           "within_low": {k: float(np.mean([r["within_low_spearman"][k] for r in runs])) for k in ("forests", "low")}}
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("forests", "refined", "within_low")}, indent=1))


if __name__ == "__main__":
    main()
