"""Throughput of the cost backends, and the baseline comparison table for the README.

    .venv/bin/python bench/bench_backends.py [--n 50000] [--table-only]

1. Roofline: N iha-paper genomes through the fast path (space.sample_x → space.to_arrays → evaluate),
   vs. the same backend called one genome at a time (baseline, measured on a subset, per genome).
2. Systolic mapper per template: one 40-layer iha-paper genome with an empty cache (cold), then
   genomes/s on 200 genomes already seen (re-evaluation) and on 200 new genomes after warming the
   cache on 1,000 others (the search's steady state), default workload 256/256, int8.
3. SmolLM2-135M and Pythia-160M on the roofline and every systolic template (default workload, bf16 on the
   GPU roofline, int8 on the accelerators). numpy only; single-threaded BLAS is not involved.
4. Substrate fidelity: SmolLM2-135M with conventions=physical and =llmforge against the closed-form reading of
   the LLMForge release's Timeloop pipeline (backends/systolic/reference.py).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from backends.registry import build_backend, resolve_workload
from backends.systolic import clear_cache
from forge.runtime.config import data_dir
from forge.genomes.importers import load_genome
from forge.spaces.space import load_space

DEFAULT_WL = {"prefill": 256, "decode": 256, "batch": 1}


CPU: dict[str, float] = {}


def timed(fn, *a):
    """Wall seconds; the process CPU seconds of the same call go to CPU[fn name] (the machine is shared)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*a)
    CPU[getattr(fn, "__name__", "fn")] = time.process_time() - c
    return out, time.perf_counter() - t


def bench_roofline(n: int) -> None:
    sp, b = load_space("iha-paper"), build_backend("roofline")
    wl = resolve_workload(DEFAULT_WL, b)
    X, t_sample = timed(sp.sample_x, n, np.random.default_rng(0))
    pop, t_arrays = timed(sp.to_arrays, X)
    r, t_eval = timed(b.evaluate, pop, wl)
    assert np.isfinite(r.tpot_ms).all()
    genomes = sp.decode(X[:200])
    _, t_one = timed(lambda: [b.evaluate([g], wl) for g in genomes])
    per_loop = t_one / len(genomes)
    total = t_sample + t_arrays + t_eval
    cpu = CPU["sample_x"] + CPU["to_arrays"] + CPU["evaluate"]
    print(f"roofline: {n} iha-paper genomes: sample {t_sample:.2f}s + to_arrays {t_arrays:.2f}s + evaluate {t_eval:.2f}s"
          f" = {total:.2f}s wall, {cpu:.2f}s CPU (evaluate alone {CPU['evaluate']:.2f}s CPU); "
          f"one-at-a-time baseline {per_loop * 1e3:.2f} ms/genome → vectorized is {per_loop * n / t_eval:.0f}x faster")


def full_depth(sp, n: int, rng) -> np.ndarray:
    X = sp.sample_x(n, rng)
    X[:, 0::7] = 1  # every slot active
    X[:, 1::7] = 1  # every layer with attention
    return sp.repair_x(X)


def bench_systolic(name: str) -> None:
    sp, b = load_space("iha-paper"), build_backend(name)
    wl = resolve_workload(DEFAULT_WL, b)
    rng = np.random.default_rng(1)
    one = sp.to_arrays(full_depth(sp, 1, rng))
    clear_cache()
    _, cold = timed(b.evaluate, one, wl)
    cold_cpu = CPU["evaluate"]
    seen = sp.to_arrays(sp.sample_x(200, rng))
    b.evaluate(seen, wl)
    _, again = timed(b.evaluate, seen, wl)
    clear_cache()
    b.evaluate(sp.to_arrays(sp.sample_x(1000, rng)), wl)
    _, fresh = timed(b.evaluate, sp.to_arrays(sp.sample_x(200, rng)), wl)
    print(f"{name}: cold 40-layer genome {cold:.3f}s wall ({cold_cpu:.3f}s CPU); warm re-evaluation {200 / again:,.0f} genomes/s; "
          f"new genomes after 1,000 warm-up {200 / fresh:,.0f} genomes/s")


SUBSTRATES = ("gemmini", "eyeriss", "simba", "flat", "dxe", "dxe-relaxed")


def table() -> None:
    print("\n| model | backend | TTFT ms | TPOT ms | energy µJ/token | note |\n| --- | --- | ---: | ---: | ---: | --- |")
    for arch in ("smollm2-135m", "pythia-160m"):
        g = load_genome(data_dir() / "archs" / f"{arch}.yaml")
        for name in ("roofline", "roofline-eager") + SUBSTRATES:
            b = build_backend(name)
            wl = resolve_workload(DEFAULT_WL, b)
            row = b.evaluate([g], wl).row(0)
            note = ("A100-40GB, bf16" + (f", eager PyTorch ({b.layer_us:.0f} µs per layer)" if b.layer_us else "")
                    if name.startswith("roofline") else
                    f"int8, {row['area_mm2']:.2f} mm², weights {'on chip' if row['weights_resident'] else 'from DRAM'}")
            e = float(f"{row['energy_per_token_uj']:.4g}")  # 4 significant digits, thousands separated (README)
            energy = f"{e:,.0f}" if e >= 1000 else f"{e:.4g}"
            print(f"| {arch} | {name} | {row['ttft_ms']:.3g} | {row['tpot_ms']:.3g} | {energy} | {note} |")


def substrate_fidelity() -> None:
    """Ours (physical and llmforge conventions) against our reading of the release's pipeline, SmolLM2-135M 256/256."""
    from backends.systolic.reference import SUBSTRATES as READ, release_reading

    g = load_genome(data_dir() / "archs" / "smollm2-135m.yaml")
    print("\n| substrate | physical TTFT / TPOT ms | llmforge TTFT / TPOT ms | release reading TTFT / TPOT ms "
          "| llmforge ÷ reading |\n| --- | ---: | ---: | ---: | ---: |")
    for name in (n for n in SUBSTRATES if n in READ):
        wl = resolve_workload(DEFAULT_WL, build_backend(name))
        p, lf = (build_backend(name, conventions=c).evaluate([g], wl).row(0) for c in ("physical", "llmforge"))
        ref = release_reading(name, g, DEFAULT_WL["prefill"], DEFAULT_WL["decode"])
        print(f"| {name} | {p['ttft_ms']:.1f} / {p['tpot_ms']:.2f} | {lf['ttft_ms']:.1f} / {lf['tpot_ms']:.2f} | "
              f"{ref['ttft_ms']:.1f} / {ref['tpot_ms']:.2f} | {lf['ttft_ms'] / ref['ttft_ms']:.3f} / "
              f"{lf['tpot_ms'] / ref['tpot_ms']:.3f} |")


def table4_calibration() -> None:
    """Fit the roofline's per-layer overhead to the one published measurement (LLMForge Table 4, hardware.md:
    SmolLM2-360M on A100-SXM4-40GB, eager PyTorch, 256/256 bf16: TTFT 28.72 ms, TPOT 24.18 ms)."""
    from backends.gpu.calibrate import calibrate

    g = load_genome(data_dir() / "archs" / "smollm2-360m.yaml")
    b = build_backend("roofline")
    wl = resolve_workload(DEFAULT_WL, b)
    before = b.evaluate([g], wl).row(0)
    cfg = calibrate([(g, 28.72, 24.18)], base=b.config(), workload=wl, fit=("layer_us",))
    after = build_backend({k: v for k, v in cfg.items() if k != "calibration"}).evaluate([g], wl).row(0)
    cal = cfg["calibration"]
    print(f"\nTable 4 calibration (smollm2-360m, A100-40GB eager, measured 28.72 / 24.18 ms): default roofline "
          f"{before['ttft_ms']:.2f} / {before['tpot_ms']:.2f} ms (RMS rel. error {cal['rms_rel_error_before']:.1%}); "
          f"fitted layer_us = {cfg['layer_us']:.0f} µs → {after['ttft_ms']:.2f} / {after['tpot_ms']:.2f} ms "
          f"({cal['rms_rel_error_after']:.1%})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args()
    print(f"cpu cores visible: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    if not a.table_only:
        bench_roofline(a.n)
        for name in SUBSTRATES:
            bench_systolic(name)
    table()
    substrate_fidelity()
    table4_calibration()


if __name__ == "__main__":
    main()
