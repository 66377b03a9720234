"""rDXE backend: co-search throughput on iha-paper genomes and the table of the paper's four baselines.

    .venv/bin/python bench/bench_rdxe.py [--n 400] [--seed 0] [--out bench/results/rdxe.json]

Throughput: a fresh backend (cold caches) costs n random iha-paper genomes through the full 45-config
grid at the search workload (prefill 512 / decode 256, int8), in one process and split over two
worker processes (2 cores); the baseline in the same run is the literal integer bisection of
Algorithm 1 (pack_method=integer). A warm re-evaluation shows the per-genome cache. Single-threaded
numpy (OMP/OPENBLAS threads = 1); the machine may be shared, so CPU time is reported beside wall time.
Table: smollm2-135m, pythia-160m, smollm2-360m, qwen2.5-0.5b at prefill 256 / decode 256, int8,
default grid, without and with the release's envelope (100-2,500 mm², 5 mW-2 W).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

from backends.interface import Workload  # noqa: E402
from backends.rdxe import RDXEBackend  # noqa: E402
from forge.config import data_dir  # noqa: E402
from forge.importers import load_genome  # noqa: E402
from forge.io import atomic_write_json  # noqa: E402
from forge.space import load_space  # noqa: E402

SEARCH = Workload(prefill=512, decode=256, weight_bits=8, act_bits=8, kv_bits=8)
REPORT = Workload(prefill=256, decode=256, weight_bits=8, act_bits=8, kv_bits=8)
BASELINES = ("smollm2-135m", "pythia-160m", "smollm2-360m", "qwen2.5-0.5b")


def _timed(fn, *args):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w, time.process_time() - c


def _worker(args):
    genomes, method = args
    return float(RDXEBackend(pack_method=method).evaluate(genomes, SEARCH).feasible.mean())


def throughput(n: int, seed: int) -> dict:
    genomes = load_space("iha-paper").sample(n, np.random.default_rng(seed))
    out = {"n": n, "seed": seed, "mean_active_layers": float(np.mean([g.n_active for g in genomes]))}
    for method in ("integer", "candidates"):
        b = RDXEBackend(pack_method=method)
        ct, wall, cpu = _timed(b.evaluate, genomes, SEARCH)
        out[method] = {"genomes_per_s_wall": n / wall, "genomes_per_s_cpu": n / cpu, "feasible": float(ct.feasible.mean())}
        if method == "candidates":
            _, wall2, _ = _timed(b.evaluate, genomes, SEARCH)
            out["cached_genomes_per_s"] = n / wall2
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_worker, [(genomes[:2], "candidates")] * 2))  # start and import in both workers
        halves = [(genomes[: n // 2], "candidates"), (genomes[n // 2:], "candidates")]
        _, wall, _ = _timed(lambda: list(pool.map(_worker, halves)))
    out["two_process_genomes_per_s_wall"] = n / wall
    out["speedup_candidates_vs_integer_cpu"] = out["candidates"]["genomes_per_s_cpu"] / out["integer"]["genomes_per_s_cpu"]
    return out


def baseline_table(**kw) -> list[dict]:
    ct = RDXEBackend(**kw).evaluate([load_genome(data_dir() / "archs" / f"{n}.yaml") for n in BASELINES], REPORT)
    rows = []
    for i, name in enumerate(BASELINES):
        r = ct.row(i)
        rows.append({"model": name, "feasible": r["feasible"], "reason": r["reason"],
                     **({k: r[k] for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj", "area_mm2", "mac_utilization",
                                           "power_mw", "n_chips", "chip", "n_pareto")} if r["feasible"] else {})})
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("| model | TTFT ms | TPOT ms | E/token µJ | ring area mm² | power mW | MAC util | n_MAC | w_core KB "
            "| tiles×cores | chips | Pareto size |\n|" + " --- |" * 12)
    lines = [head]
    for r in rows:
        if not r["feasible"]:
            lines.append(f"| {r['model']} | infeasible: {r['reason']} |" + " |" * 10)
            continue
        c = r["chip"]
        lines.append(f"| {r['model']} | {r['ttft_ms']:.3f} | {r['tpot_ms']:.4f} | {r['energy_per_token_uj']:.1f} | "
                     f"{r['area_mm2']:.0f} | {r['power_mw']:.0f} | {r['mac_utilization']:.2f} | {c['n_mac']} | "
                     f"{c['w_core_kb']} | {c['tiles_x_cores']} | {c['n_chips']} | {r['n_pareto']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/rdxe.json")
    a = ap.parse_args()
    tp = throughput(a.n, a.seed)
    plain = baseline_table()
    env = baseline_table(area_envelope_mm2=[100, 2500], power_envelope_mw=[5, 2000])
    atomic_write_json(a.out, {"throughput": tp, "baselines_256_256": plain, "baselines_256_256_envelope": env})
    print(f"throughput (n={a.n}, seed={a.seed}, mean active layers {tp['mean_active_layers']:.1f}):")
    for m in ("integer", "candidates"):
        t = tp[m]
        print(f"  {m:10s} 1 process: {t['genomes_per_s_wall']:.0f} genomes/s wall, {t['genomes_per_s_cpu']:.0f} /s CPU")
    print(f"  candidates 2 processes: {tp['two_process_genomes_per_s_wall']:.0f} genomes/s wall; cached re-evaluation "
          f"{tp['cached_genomes_per_s']:.0f} /s; speed-up vs integer bisection (CPU) {tp['speedup_candidates_vs_integer_cpu']:.2f}x")
    print("\nbaselines, prefill 256 / decode 256, int8, default grid:\n" + markdown(plain))
    print("\nsame, with the release's envelope (100-2,500 mm², 5 mW-2 W):\n" + markdown(env))


if __name__ == "__main__":
    main()
