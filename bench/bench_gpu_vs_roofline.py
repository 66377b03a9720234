"""Measured GPU vs. roofline, before and after `calibrate` (needs a CUDA GPU; prints what to paste in RESULTS.md).

    .venv/bin/python bench/bench_gpu_vs_roofline.py --hardware a100-40gb [--n-random 12] [--decode 256]

Measures the baselines in data/archs that fit, plus random iha-paper genomes, with backend=gpu-measured
(bf16, KV-cached, CUDA events, NVML energy where readable); fits eta/launch/layer overheads on half of the
genomes and reports the relative TTFT/TPOT error of the roofline on the other half, before and after.
"""
from __future__ import annotations

import argparse

import numpy as np

from backends.gpu.calibrate import calibrate, write_config
from backends.interface import Workload
from backends.registry import build_backend
from forge.runtime.config import data_dir
from forge.genomes.importers import load_genome
from forge.spaces.space import load_space

ARCHS = ("smollm2-135m", "smollm2-360m", "qwen2.5-0.5b", "pythia-160m", "gpt2", "llama-3.2-1b")


def rel_err(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.median(np.abs(pred / meas - 1)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hardware", default="a100-40gb")
    ap.add_argument("--base", default="roofline", choices=("roofline", "roofline-eager"))
    ap.add_argument("--n-random", type=int, default=12)
    ap.add_argument("--prefill", type=int, default=256)
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--out", default="outputs/roofline-calibrated.yaml")
    a = ap.parse_args()
    wl = Workload(prefill=a.prefill, decode=a.decode)
    genomes = [load_genome(data_dir() / "archs" / f"{n}.yaml") for n in ARCHS]
    genomes += load_space("iha-paper").sample(a.n_random, np.random.default_rng(0))
    meas = build_backend("gpu-measured").evaluate(genomes, wl)
    ok = np.flatnonzero(meas.feasible)
    fit, held = ok[::2], ok[1::2]
    roof = build_backend(a.base, hardware=a.hardware)
    before = roof.evaluate([genomes[i] for i in held], wl)
    cfg = calibrate([(genomes[i], meas.ttft_ms[i], meas.tpot_ms[i]) for i in fit], base=roof.config(), workload=wl)
    write_config(cfg, a.out)
    after = build_backend({k: v for k, v in cfg.items() if k != "calibration"}).evaluate([genomes[i] for i in held], wl)
    print(f"base {a.base}; fitted on {len(fit)} genomes, tested on {len(held)}: {cfg['calibration']['fitted']}")
    for k in ("ttft_ms", "tpot_ms"):
        m = getattr(meas, k)[held]
        print(f"{k}: median |rel error| before {rel_err(getattr(before, k), m):.1%}, after {rel_err(getattr(after, k), m):.1%}")
    for i in ok:
        print(f"{genomes[i].name or genomes[i].id}: TTFT {meas.ttft_ms[i]:.2f} ms, TPOT {meas.tpot_ms[i]:.2f} ms, "
              f"{meas.energy_per_token_uj[i]:.0f} µJ/token ({meas.extras[i].get('energy_source')})")


if __name__ == "__main__":
    main()
