"""Figure: RESULTS.md "vectorized workload analyzer" (genomes/s, ratio to the per-genome path).

How long the vectorized workload analyzer takes for 50,000 sampled iha-paper genomes.

Baseline in the same run: the per-genome path (PopArrays.from_genomes on Genome objects, one at a
time) on a 500-genome subset, scaled to 50,000.
    python bench/bench_workload.py [--n 50000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from forge.spaces.arrays import PopArrays
from forge.spaces.space import load_space
from forge.lm.workload import layer_ops, model_totals


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--chunk", type=int, default=5_000)
    a = ap.parse_args()
    torch.set_num_threads(2)
    s = load_space("iha-paper")
    X = s.sample_x(a.n, np.random.default_rng(0))
    res = {}
    for dtype in (np.float64, np.float32):
        t0 = time.perf_counter()
        for i in range(0, a.n, a.chunk):
            pop = s.to_arrays(X[i:i + a.chunk])
            pre = layer_ops(pop, tokens=256, context=256, dtype=dtype)
            dec = layer_ops(pop, tokens=1, context=384, dtype=dtype)
            tot = model_totals(pop)
            _ = pre.total("flops") + dec.total("weight_bytes") + tot["params"]
        res[np.dtype(dtype).name] = time.perf_counter() - t0
    sub = s.decode(X[:500])
    t0 = time.perf_counter()
    for g in sub:
        pop = PopArrays.from_genomes([g])
        layer_ops(pop, tokens=256, context=256), layer_ops(pop, tokens=1, context=384), model_totals(pop)
    loop = (time.perf_counter() - t0) * a.n / len(sub)
    for k, v in res.items():
        print(f"vectorized {k}: {a.n} genomes (prefill 256 + one decode step + totals) in {v:.2f} s "
              f"({a.n / v:,.0f} genomes/s); speed-up over the per-genome loop {loop / v:.0f}x")
    print(f"per-genome loop (float64, extrapolated from 500 genomes): {loop:.1f} s")


if __name__ == "__main__":
    main()
