"""Figures: RESULTS.md "Calibrated loss intervals" (coverage on CV test folds, width, locally adaptive or not).

For each shipped surrogate, on the held-out rows of the split it was trained on (the rows its conformal
calibration comes from): repeated 5-fold cross-conformal checks (calibrate on 4 folds, measure on the 5th),
for the residual and the MC-σ scores, with one global bin or Mondrian bins of predicted loss; plus the
same coverage without calibration (raw σ under a Gaussian z), and the width on the best-predicted 10 %
(where search fronts live).

    nice -n 10 .venv/bin/python bench/bench_intervals.py --repeats 20

Writes bench/results/intervals.json and prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from forge.config import data_dir
from forge.io import shared_data_dir
from surrogate.conformal import ConformalInterval
from surrogate.dataset import load_labelset, train_val_test
from surrogate.fit import held_predictions
from surrogate.predictor import load_predictor

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = {"forgeformer-iha-paper": lambda: shared_data_dir() / "llmforge_iha_200M.csv",
               "forgeformer-iha-tiny": lambda: data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl"}
Z90 = 1.6449  # two-sided 90 % Gaussian quantile


def folds_check(y, mu, mu_mc, sigma, bins, level, repeats, low):
    """Mean ± std over `repeats` 5-fold splits of coverage (all rows) and mean width (all, best-10 %)."""
    out = {}
    for method in ("residual", "sigma"):
        cov, width, width_low, cov_low = [], [], [], []
        for r in range(repeats):
            fold = np.random.default_rng(r).permutation(len(y)) % 5
            hit, w = np.zeros(len(y), bool), np.zeros(len(y))
            for f in range(5):
                tr, te = fold != f, fold == f
                cal = ConformalInterval.fit(y[tr], mu[tr], mu_mc[tr], sigma[tr], bins)
                m, s = (mu_mc, sigma) if method == "sigma" else (mu, np.zeros_like(mu))
                lo, hi = cal.interval(m[te], s[te], level)
                hit[te], w[te] = (y[te] >= lo) & (y[te] <= hi), hi - lo
            cov.append(hit.mean())
            width.append(w.mean())
            width_low.append(w[low].mean())
            cov_low.append(hit[low].mean())
        out[f"conformal-{method}"] = {"coverage": [float(np.mean(cov)), float(np.std(cov))],
                                      "width": float(np.mean(width)), "width_best10": float(np.mean(width_low)),
                                      "coverage_best10": float(np.mean(cov_low))}
    return out


def one(name: str, level: float, repeats: int) -> dict:
    torch.set_num_threads(1)
    p = load_predictor(name)
    t = p.meta["test"]
    _, _, held = train_val_test(load_labelset(CHECKPOINTS[name]()), t["seed"], t["test_frac"])
    mu, mu_mc, sigma = held_predictions(p, held, 10, 0)
    low = mu <= np.quantile(mu, 0.1)
    raw = np.abs(held.y - mu_mc) <= Z90 * sigma
    return {"n_rows": len(held), "rows_hash": held.data_hash(),
            "uncalibrated_sigma_coverage": float(raw.mean()),
            "bins_1": folds_check(held.y, mu, mu_mc, sigma, 1, level, repeats, low),
            "bins_3": folds_check(held.y, mu, mu_mc, sigma, 3, level, repeats, low)}


def table(res: dict, level: float) -> str:
    lines = [f"| surrogate (held-out rows) | bins | method | coverage at {level:.0%} (mean ± std over splits) | "
             "mean width | width, best-predicted 10 % | coverage there |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in res.items():
        for b in ("bins_1", "bins_3"):
            for m, v in r[b].items():
                c = v["coverage"]
                lines.append(f"| {name} ({r['n_rows']}) | {b[-1]} | {m} | {c[0]:.3f} ± {c[1]:.3f} | {v['width']:.3f} | "
                             f"{v['width_best10']:.3f} | {v['coverage_best10']:.2f} |")
        lines.append(f"| {name} ({r['n_rows']}) | – | raw σ, Gaussian z (no calibration) | "
                     f"{r['uncalibrated_sigma_coverage']:.3f} | | | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--level", type=float, default=0.9)
    a = ap.parse_args()
    res = {name: one(name, a.level, a.repeats) for name in CHECKPOINTS}
    out = ROOT / "bench" / "results" / "intervals.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": f"nice -n 10 .venv/bin/python bench/bench_intervals.py --repeats {a.repeats}",
                               "level": a.level, **res}, indent=2) + "\n")
    print(table(res, a.level))


if __name__ == "__main__":
    main()
