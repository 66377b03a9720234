"""Serving benchmarks (bench/RESULTS.md, "Serving"): wall time of the forge-serve commands, the AFD simulator
against the closed form, and memory-centric vs random initialization of the pool search over several seeds.

    .venv/bin/python bench/bench_serve.py cli              # wall time of each forge-serve command (subprocess)
    .venv/bin/python bench/bench_serve.py init --seeds 5   # init comparison, reduced (brute force) and full space
    .venv/bin/python bench/bench_serve.py init --seeds 5 --spaces llmshare --pop 24 --gens 20   # larger budget
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLI = [
    ["afd", "serve/afd=table2"],
    ["afd", "arch=smollm2-135m", "backend=roofline"],
    ["afd", "arch=smollm2-135m", "backend=gemmini"],
    ["pools", "arch=llama-2-7b", "trace=synthetic"],
    ["pools", "arch=llama-2-7b", "serve/trace=azure-burst"],
]


def bench_cli() -> None:
    for args in CLI:
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            subprocess.run([str(ROOT / ".venv/bin/forge-serve"), *args, f"hydra.run.dir={d}", "quiet=true"], check=True)
            wall = time.perf_counter() - t
            s = json.loads((Path(d) / "summary.json").read_text())
        if s["command"] == "afd":
            extra = f"r* {s['r_star']:.3f}, sim max |gap| {s['sim_max_rel_gap']:.1%}, comm hidden {s['comm_hidden']}"
        else:
            extra = "; ".join(f"{n}: HV {r['hv']:.3f} ADRS {r.get('adrs', float('nan')):.4f}" for n, r in s["runs"].items())
            extra += f"; {s['simulations']} simulated systems, brute force {s.get('brute_force', {}).get('seconds', 0):.1f} s"
        print(f"| `forge-serve {' '.join(args)}` | {wall:.1f} | {s['seconds']:.1f} | {extra} |", flush=True)


def bench_init(seeds: int, spaces: tuple[str, ...] = ("reduced", "llmshare"), budget: tuple[int, int] = (16, 10)) -> None:
    """Reduced space: HV with the run's own reference and ADRS against brute force. Full Table I space: HV
    with the fixed reference (2, 2) x baseline (the region that competes with the baseline)."""
    from hydra import compose, initialize_config_module
    from omegaconf import open_dict

    from search.serving.cli import run

    for space in spaces:
        hv = {"memory": [], "random": []}
        adrs = {"memory": [], "random": []}
        hv0 = {"memory": [], "random": []}
        for seed in range(seeds):
            with initialize_config_module(config_module="forge_conf", version_base="1.3"):
                c = compose(config_name="forge-serve", overrides=["command=pools", "arch=llama-2-7b", f"serve/space={space}",
                                                                  "serve/trace=azure-burst", f"seed={seed}",
                                                                  f"serve.pools.pop_size={budget[0]}", f"serve.pools.generations={budget[1]}",
                                                                  *(["serve.pools.hv_ref=[2,2]"] if space == "llmshare" else [])])
            with tempfile.TemporaryDirectory() as d, open_dict(c):
                c.out_dir, c.quiet = d, True
                s = run(c)
            for n, r in s["runs"].items():
                hv[n].append(r["hv"]), hv0[n].append(r["hv_per_generation"][0]), adrs[n].append(r.get("adrs", np.nan))
        wins = int(np.sum(np.array(hv["memory"]) > np.array(hv["random"])))
        for n in hv:  # HV shares one reference point per run (per seed), so compare paired
            print(f"| {space} | {n} | {np.mean(hv0[n]):.3f} ± {np.std(hv0[n]):.3f} | {np.mean(hv[n]):.3f} ± {np.std(hv[n]):.3f} "
                  f"| {np.nanmean(adrs[n]) if space == 'reduced' else float('nan'):.4f} | memory > random in {wins}/{seeds} seeds |",
                  flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["cli", "init"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--spaces", default="reduced,llmshare")
    ap.add_argument("--pop", type=int, default=16)
    ap.add_argument("--gens", type=int, default=10)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    bench_cli() if a.what == "cli" else bench_init(a.seeds, tuple(a.spaces.split(",")), (a.pop, a.gens))
