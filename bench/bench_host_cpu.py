"""Roofline `hardware=host-cpu` vs `backend=cpu-measured` on iha-tiny genomes (issue 21 §3 accuracy).

    nice .venv/bin/python bench/bench_host_cpu.py [--n-cal 24] [--n-eval 30] [--threads 1]

1. Calibrate the host preset exactly as `forge-hw mode=calibrate hardware=host-cpu` does (micro-benchmark,
   then the roofline's efficiencies and overheads fitted to cpu-measured timings) on `--n-cal` CALIBRATION
   genomes (seed 100).
2. Measure `--n-eval` DIFFERENT evaluation genomes (seed 0) with cpu-measured, twice (two independent
   passes: how far the machine agrees with itself is the ceiling any model can reach here).
3. Predict them with the fitted roofline, and with roofline.yaml's GPU defaults on the same measured peaks
   (the baseline: what `hardware=host-cpu` would give without fitted overheads).
4. Out of the calibration's range: `--big` baselines (data/archs, DRAM-bound weights) at prefill 64 / decode 16.
Prints Spearman and the median predicted/measured ratio of TPOT and TTFT; paste into bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import spearmanr

from backends.gpu.roofline import RooflineBackend
from backends.host import CpuMeasuredBackend, calibrate_host, roofline_backend, write_preset
from backends.interface import Workload
from forge.runtime.config import data_dir, group_yaml
from forge.genomes.importers import load_genome
from forge.spaces.space import load_space


def compare(name: str, pred: object, meas: object) -> None:
    for k in ("tpot_ms", "ttft_ms"):
        p, m = getattr(pred, k), getattr(meas, k)
        r = p / m
        print(f"  {name:28s} {k}: Spearman {spearmanr(p, m)[0]:.3f}, median pred/meas {np.median(r):.3f}, "
              f"median |rel err| {np.median(np.abs(r - 1)):.1%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-cal", type=int, default=24)
    ap.add_argument("--n-eval", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--big", nargs="*", default=["smollm2-135m"])
    ap.add_argument("--out", default="outputs/host-cpu-bench.yaml")
    a = ap.parse_args()
    wl = Workload(prefill=a.prefill, decode=a.decode, weight_bits=32, act_bits=32, kv_bits=32)
    space = load_space("iha-tiny")
    cal = space.sample(a.n_cal, np.random.default_rng(100))
    ids = {g.id for g in cal}
    ev = [g for g in space.sample(a.n_eval + 10, np.random.default_rng(0)) if g.id not in ids][:a.n_eval]
    t0 = time.perf_counter()
    preset = calibrate_host(CpuMeasuredBackend(threads=a.threads, repeats=a.repeats), cal, wl,
                            base=group_yaml("hardware", "host-cpu") or {})
    write_preset(preset, a.out)
    t1 = time.perf_counter()
    meas = [CpuMeasuredBackend(threads=a.threads, repeats=a.repeats).evaluate(ev, wl) for _ in range(2)]
    t2 = time.perf_counter()
    hw = {k: v for k, v in preset.items() if k not in ("roofline", "calibration")}
    fitted = roofline_backend(preset).evaluate(ev, wl)
    default = RooflineBackend(hardware=hw, precision={"weight_bits": 32}).evaluate(ev, wl)
    c = preset["calibration"]
    print(f"host {c['cpu']}, {a.threads} thread(s): fp32 matmul {c['fp32_gflops']} GFLOP/s, GEMV {c['gemv_gbs']} GB/s; "
          f"workload prefill {a.prefill} / decode {a.decode}, fp32, batch 1")
    print(f"calibration on {c['n_genomes']} genomes ({t1 - t0:.0f} s): {preset['roofline']}, "
          f"RMS rel err {c['rms_rel_error_before']:.1%} -> {c['rms_rel_error_after']:.1%}")
    print(f"evaluation on {len(ev)} other genomes, measured twice ({t2 - t1:.0f} s):")
    compare("fitted roofline vs pass 1", fitted, meas[0])
    compare("fitted roofline vs pass 2", fitted, meas[1])
    compare("GPU-default overheads vs 1", default, meas[0])
    compare("pass 2 vs pass 1 (noise)", meas[1], meas[0])
    spread = np.median([e["tpot_spread_ms"] / m for e, m in zip(meas[0].extras, meas[0].tpot_ms)])
    print(f"  median TPOT spread (max-min over {a.repeats} repeats) / median: {spread:.1%}")
    big(a.big, preset, a.threads)


def big(names: list[str], preset: dict, threads: int) -> None:
    """Larger models than the calibration saw: their weights stream from DRAM instead of sitting in cache."""
    wl = Workload(prefill=64, decode=16, weight_bits=32, act_bits=32, kv_bits=32)
    for name in names:
        g = load_genome(data_dir() / "archs" / f"{name}.yaml")
        m = CpuMeasuredBackend(threads=threads, repeats=3).evaluate([g], wl)
        p = roofline_backend(preset).evaluate([g], wl)
        print(f"  {name} (prefill 64 / decode 16): TTFT measured {m.ttft_ms[0]:.1f} ms, predicted {p.ttft_ms[0]:.1f} "
              f"({p.ttft_ms[0] / m.ttft_ms[0]:.2f}x); TPOT measured {m.tpot_ms[0]:.2f} ms, predicted "
              f"{p.tpot_ms[0]:.2f} ({p.tpot_ms[0] / m.tpot_ms[0]:.2f}x)")


if __name__ == "__main__":
    main()
