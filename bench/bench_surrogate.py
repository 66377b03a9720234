"""Surrogate speed: predict (48 genomes × 10 MC passes) and paper-recipe training time.

    .venv/bin/python bench/bench_surrogate.py predict [--ckpt forgeformer-iha-paper] [--threads 2]
    .venv/bin/python bench/bench_surrogate.py train --epochs 200 [--threads 2]

Training uses the first ~1,400 rows of a seeded 80/20 split of the shared LLMForge CSV (the issue's
"200 epochs on about 1,400 rows") with the exact paper recipe (raw targets, lr 1e-4, batch 32).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch


def bench_predict(ckpt: str, n: int, n_mc: int, reps: int) -> dict:
    from forge.space import load_space
    from surrogate.predictor import load_predictor

    p = load_predictor(ckpt)
    genomes = load_space(p.space["name"]).sample(n, np.random.default_rng(0))
    p.predict(genomes, n_mc=n_mc)  # warm-up
    times = {}
    for mc in (0, n_mc):
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            p.predict(genomes, n_mc=mc)
            ts.append((time.perf_counter() - t) * 1e3)
        times[f"n_mc={mc}"] = {"median_ms": round(statistics.median(ts), 2), "min_ms": round(min(ts), 2)}
    return {"ckpt": ckpt, "members": len(p.members), "n_genomes": n, **times}


def bench_train(epochs: int, seed: int) -> dict:
    from forge.io import shared_data_dir
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.fit import train_forgeformer
    from surrogate.metrics import evaluate
    from surrogate.training import Recipe

    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    train, val, test = train_val_test(data, seed)
    t = time.perf_counter()
    p = train_forgeformer(train, val, Recipe(epochs=epochs, seed=seed))
    wall = time.perf_counter() - t
    m = evaluate(test.y, p.predict(test.genomes)[0])
    return {"epochs": epochs, "n_train": len(train), "n_val": len(val), "wall_s": round(wall, 1),
            "s_per_epoch": round(wall / epochs, 2), "best_epoch": p.meta["members"][0]["best_epoch"],
            "test": {k: round(v, 4) for k, v in m.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["predict", "train"])
    ap.add_argument("--ckpt", default="forgeformer-iha-paper")
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--n-mc", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = bench_predict(a.ckpt, a.n, a.n_mc, a.reps) if a.what == "predict" else bench_train(a.epochs, a.seed)
    print(json.dumps({"threads": a.threads, **res}, indent=1))


if __name__ == "__main__":
    main()
