"""Figures: RESULTS.md "Calibrated loss intervals" (coverage on CV test folds, width, locally adaptive or not).

For each shipped surrogate, on the held-out rows of the split it was trained on (the rows its conformal
calibration comes from): repeated 5-fold cross-conformal checks grouped by architecture (calibrate on 4
folds, measure on the 5th), for the residual and the MC-σ scores, one-tailed (|error|, the old scores) and
two-tailed (lower and upper calibrated apart): coverage, how often the true loss falls below the lower /
above the upper bound, width, and coverage on the best-predicted 10 % (where search fronts live); plus the
coverage without calibration (raw σ under a Gaussian z).

    .venv/bin/python bench/bench_intervals.py --repeats 10

Writes bench/results/intervals.json and prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from forge.runtime.config import data_dir
from forge.disk.io import shared_data_dir
from surrogate.conformal import BEST_BINS, coverage_cv
from surrogate.dataset import duplicate_groups, load_labelset, train_val_test
from surrogate.fit import held_predictions
from surrogate.loading import load_predictor

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = {"forgeformer-iha-paper": lambda: shared_data_dir() / "llmforge_iha_200M.csv",
               "forgeformer-iha-tiny": lambda: data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl"}
Z90 = 1.6449  # two-sided 90 % Gaussian quantile


VARIANTS = {"one-tailed |e|, 3 equal bins": (False, 3), "two-tailed, bins at μ quantiles 0.1/0.4/0.7": (True, BEST_BINS)}
KEYS = ("coverage", "below", "above", "width", "coverage_best10")


def folds_check(y, mu, mu_mc, sigma, ids, level, repeats, two_tailed, bins):
    """Mean over `repeats` grouped 5-fold cross-conformal checks (folds by architecture, seeded r) of coverage,
    each tail's misses, width and best-10 % coverage, per method; plus the std of coverage over repeats."""
    runs = [coverage_cv(y, mu, mu_mc, sigma, level, bins=bins, seed=r, ids=ids, two_tailed=two_tailed)
            for r in range(repeats)]
    return {m: {**{k: round(float(np.mean([r[m][k] for r in runs])), 4) for k in KEYS},
                "coverage_std": round(float(np.std([r[m]["coverage"] for r in runs])), 4)} for m in runs[0]}


def one(name: str, level: float, repeats: int) -> dict:
    torch.set_num_threads(1)
    p = load_predictor(name)
    t = p.meta["test"]
    train, _, held = train_val_test(load_labelset(CHECKPOINTS[name]()), t["seed"], t["test_frac"])
    mu, mu_mc, sigma = held_predictions(p, held, 10, 0)
    raw = np.abs(held.y - mu_mc) <= Z90 * sigma
    return {"n_rows": len(held), "rows_hash": held.data_hash(), "duplicates_in_held": duplicate_groups(held.ids),
            "architectures_also_in_train": len(set(held.ids) & set(train.ids)),
            "uncalibrated_sigma_coverage": float(raw.mean()),
            **{v: folds_check(held.y, mu, mu_mc, sigma, held.ids, level, repeats, *a) for v, a in VARIANTS.items()}}


def table(res: dict, level: float) -> str:
    lines = [f"| surrogate (held-out rows) | scores | method | coverage at {level:.0%} | true loss below lo | "
             "above hi | mean width | coverage, best-predicted 10 % |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in res.items():
        for v in VARIANTS:
            for m, x in r[v].items():
                lines.append(f"| {name} ({r['n_rows']}) | {v} | {m} | {x['coverage']:.3f} ± {x['coverage_std']:.3f} | "
                             f"{x['below']:.3f} | {x['above']:.3f} | {x['width']:.3f} | {x['coverage_best10']:.2f} |")
        lines.append(f"| {name} ({r['n_rows']}) | – | raw σ, Gaussian z (no calibration) | "
                     f"{r['uncalibrated_sigma_coverage']:.3f} | | | | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--level", type=float, default=0.9)
    a = ap.parse_args()
    res = {name: one(name, a.level, a.repeats) for name in CHECKPOINTS}
    out = ROOT / "bench" / "results" / "intervals.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": f".venv/bin/python bench/bench_intervals.py --repeats {a.repeats}",
                               "level": a.level, **res}, indent=2) + "\n")
    print(table(res, a.level))


if __name__ == "__main__":
    main()
