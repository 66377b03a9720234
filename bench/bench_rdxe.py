"""rDXE backend: co-search throughput, default (physical) vs conventions=llmforge on every baseline, public points.

    .venv/bin/python bench/bench_rdxe.py [--n 400] [--seed 0] [--out bench/results/rdxe.json]

Throughput: a fresh backend (cold caches) costs n random iha-paper genomes through the full 45-config
grid at the search workload (prefill 512 / decode 256, int8), in one process and split over two
worker processes (2 cores); the baseline in the same run is the literal integer bisection of
Algorithm 1 (pack_method=integer). A warm re-evaluation shows the per-genome cache. Single-threaded
numpy (OMP/OPENBLAS threads = 1); the machine may be shared, so CPU time is reported beside wall time.
Tables (prefill 256 / decode 256, int8, default grid): every baseline in data/archs under the default
physical model (with its TPOT floor and ceiling, ring.decode_bounds) against conventions=llmforge; the
physical model with the release's envelope (100-2,500 mm², 5 mW-2 W); llmforge against the three public
reference outputs (backends/rdxe/calibrate.py).
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
from backends.rdxe.calibrate import PUBLIC, fit_prompt_scale, prompt_candidates  # noqa: E402
from backends.rdxe.ring import decode_bounds  # noqa: E402
from forge.runtime.config import data_dir  # noqa: E402
from forge.genomes.importers import load_genome  # noqa: E402
from forge.disk.io import atomic_write_json  # noqa: E402
from forge.spaces.space import load_space  # noqa: E402

SEARCH = Workload(prefill=512, decode=256, weight_bits=8, act_bits=8, kv_bits=8)
REPORT = Workload(prefill=256, decode=256, weight_bits=8, act_bits=8, kv_bits=8)
BASELINES = tuple(sorted(p.stem for p in (data_dir() / "archs").glob("*.yaml")))


def _timed(fn, *args):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - w, time.process_time() - c


def _worker(args):
    genomes, method = args
    return float(RDXEBackend(pack_method=method).evaluate(genomes, SEARCH).feasible.mean())


def _bounds(b: RDXEBackend, genome, r: dict) -> tuple[float, float]:
    """TPOT floor and ceiling (ms) of the physical pick (ring.decode_bounds)."""
    from backends.rdxe.profile import profile_population
    from forge.spaces.arrays import PopArrays
    from forge.lm.workload import Precision

    prof = profile_population(PopArrays.from_genomes([genome]), REPORT.prefill, REPORT.decode, Precision(1.0, 1.0, 1.0), b.k)[0]
    c = r["chip"]
    lo, hi = decode_bounds(prof, np.array([c["n_mac"]]), np.array([c["cores"]]), np.array([c["n_chips"]]),
                           REPORT.prefill, REPORT.decode, b.k)
    return float(lo[0]), float(hi[0])


def throughput(n: int, seed: int) -> dict:
    genomes = load_space("iha-paper").sample(n, np.random.default_rng(seed))
    out = {"n": n, "seed": seed, "mean_active_layers": float(np.mean([g.n_active for g in genomes]))}
    b = RDXEBackend(conventions="llmforge")
    _, wall, cpu = _timed(b.evaluate, genomes, SEARCH)
    out["llmforge"] = {"genomes_per_s_wall": n / wall, "genomes_per_s_cpu": n / cpu}
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
    b = RDXEBackend(**kw)
    genomes = [load_genome(data_dir() / "archs" / f"{n}.yaml") for n in BASELINES]
    ct = b.evaluate(genomes, REPORT)
    rows = []
    for i, name in enumerate(BASELINES):
        r = ct.row(i)
        row = {"model": name, "feasible": r["feasible"], "reason": r["reason"]}
        if r["feasible"]:
            row.update({k: r[k] for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj", "area_mm2", "mac_utilization",
                                          "power_mw", "n_chips", "chip", "n_pareto")})
            if b.conventions == "physical":
                row["tpot_floor_ms"], row["tpot_ceiling_ms"] = _bounds(b, genomes[i], r)
        rows.append(row)
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


def _cell(r: dict) -> str:
    if not r["feasible"]:
        return "infeasible | | | |"
    c = r["chip"]
    return (f"{r['ttft_ms']:.3f} | {r['tpot_ms']:.4f} | {r['energy_per_token_uj']:.1f} | "
            f"{c['n_chips']}×{c['cores']}c×{c['n_mac']}M/{c['w_core_kb']}KB |")


def compare_markdown(phys: list[dict], llm: list[dict]) -> str:
    """Default (physical) against llmforge, with the physical pick's TPOT floor and ceiling."""
    lines = ["| model | TTFT ms | TPOT ms | E µJ | chips×cores×n_MAC/w_core | TPOT floor ms | TPOT ceiling ms "
             "| llmforge TTFT | TPOT | E | chips×cores×n_MAC/w_core |", "|" + " --- |" * 12]
    for p, q in zip(phys, llm):
        fl = f"{p['tpot_floor_ms']:.4f} | {p['tpot_ceiling_ms']:.4f} |" if p["feasible"] else "| |"
        lines.append(f"| {p['model']} | {_cell(p)} {fl} {_cell(q)}")
    return "\n".join(lines)


def public_markdown() -> tuple[str, dict]:
    scale, got = fit_prompt_scale()
    lines = [f"prompt_scale (least squares, the one fitted constant) = {scale:.4f}",
             "| model | TTFT ms ours / pub (ratio) | TPOT ms | E µJ/token | chips |", "|" + " --- |" * 5]
    for i, (name, ref) in enumerate(PUBLIC.items()):
        cells = [f"{got[m][i]:.{d}f} / {ref[j]} ({got[m][i] / ref[j]:.3f})"
                 for j, (m, d) in enumerate((("ttft", 3), ("tpot", 4), ("energy", 1), ("chips", 0)))]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines), {"prompt_scale": scale, **{k: v.tolist() for k, v in got.items()}}


def candidates_markdown() -> tuple[str, dict]:
    """The constant each public point needs under each constant-free prompt-term candidate (calibrate.py)."""
    cand = prompt_candidates()
    lines = ["| prompt term (stage) | " + " | ".join(PUBLIC) + " | max / min |", "|" + " --- |" * (len(PUBLIC) + 2)]
    for form, need in cand.items():
        v = list(need.values())
        lines.append(f"| {form} | " + " | ".join(f"{x:.3f}" for x in v) + f" | {max(v) / min(v):.3f} |")
    return "\n".join(lines), cand


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/results/rdxe.json")
    a = ap.parse_args()
    tp = throughput(a.n, a.seed)
    plain, llm = baseline_table(), baseline_table(conventions="llmforge")
    env = baseline_table(area_envelope_mm2=[100, 2500], power_envelope_mw=[5, 2000])
    pub_md, pub = public_markdown()
    cand_md, cand = candidates_markdown()
    atomic_write_json(a.out, {"throughput": tp, "baselines_256_256": plain, "baselines_256_256_llmforge": llm,
                              "baselines_256_256_envelope": env, "public_llmforge": pub, "prompt_candidates": cand})
    print(f"throughput (n={a.n}, seed={a.seed}, mean active layers {tp['mean_active_layers']:.1f}):")
    for m in ("integer", "candidates", "llmforge"):
        t = tp[m]
        print(f"  {m:10s} 1 process: {t['genomes_per_s_wall']:.0f} genomes/s wall, {t['genomes_per_s_cpu']:.0f} /s CPU")
    print(f"  candidates 2 processes: {tp['two_process_genomes_per_s_wall']:.0f} genomes/s wall; cached re-evaluation "
          f"{tp['cached_genomes_per_s']:.0f} /s; speed-up vs integer bisection (CPU) {tp['speedup_candidates_vs_integer_cpu']:.2f}x")
    print("\nbaselines, prefill 256 / decode 256, int8, default grid, physical:\n" + markdown(plain))
    print("\nphysical (default) vs conventions=llmforge:\n" + compare_markdown(plain, llm))
    print("\nphysical with the release's envelope (100-2,500 mm², 5 mW-2 W):\n" + markdown(env))
    print("\nconventions=llmforge vs the public reference outputs:\n" + pub_md)
    print("\nTTFT prompt term: the constant each public point needs under each constant-free candidate "
          "(1.0 everywhere = no free constant):\n" + cand_md)


if __name__ == "__main__":
    main()
