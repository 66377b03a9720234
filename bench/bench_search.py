"""Figures: README "Searching" (main-job wall time, the Figure 7 ablation table) and RESULTS.md Issue 7.

Forge-DSE figures: the main job's wall time and the Figure 7 search-recipe ablation.

    nice -n 10 .venv/bin/python bench/bench_search.py main              # `forge-search` with no arguments
    nice -n 10 .venv/bin/python bench/bench_search.py ablation --seeds 5 # NSGA+IHA, Random+IHA, NSGA+GQA

`main` times the console script as a user runs it (process start, imports, surrogate load included).
`ablation` runs the three recipes in-process with the shipped surrogate and the roofline backend (Table 6
budget: 24 + 40 × 48 evaluations each), writes bench/results/search_ablation.json and the HV curves (mean ± std)
under bench/results/search_ablation/; the runs and the full report stay in multirun/bench-search-ablation/. Torch runs with 1 thread (forge-search's `threads: 1` default).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "multirun" / "bench-search-ablation" / "runs"
ARMS = {"NSGA+IHA": ["search=nsga", "space=iha-paper"], "Random+IHA": ["search=random", "space=iha-paper"],
        "NSGA+GQA": ["search=nsga", "space=gqa-paper"]}
PAPER = {"NSGA+IHA": 1.05, "Random+IHA": 0.97, "NSGA+GQA": 1.02}  # LLMForge §4.2, Figure 7


def _time_cli(*overrides: str) -> tuple[float, dict]:
    exe = Path(sys.executable).parent / "forge-search"
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([str(exe), f"hydra.run.dir={d}", "progress=false", *overrides], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        s = json.loads((Path(d) / "summary.json").read_text())
    keep = ("wall_s", "evaluations", "archive_size", "hypervolume", "phase_s")
    return wall, {k: s[k] for k in keep}


def bench_main(runs: int) -> dict:
    """`forge-search` as shipped (threads=1), and the same with torch's default threads as the baseline."""
    default = [_time_cli() for _ in range(runs)]
    base = [_time_cli("threads=null") for _ in range(max(1, runs // 2))]
    mean = lambda xs: sum(x[0] for x in xs) / len(xs)  # noqa: E731
    return {"command": "forge-search", "process_wall_s": [w for w, _ in default], "search": [s for _, s in default],
            "baseline_threads_default": {"process_wall_s": [w for w, _ in base], "search": [s for _, s in base]},
            "speedup_vs_default_threads": mean(base) / mean(default)}


def bench_ablation(seeds: int, generations: int, out: Path, extra: list[str]) -> dict:
    import numpy as np
    from hydra import compose, initialize_config_module

    from search.cli import run
    from search.report import make_report

    shutil.rmtree(RUNS, ignore_errors=True)
    res: dict = {}
    for arm, over in ARMS.items():
        for seed in range(seeds):
            d = RUNS / f"{arm.replace('+', '_')}-{seed}"
            with initialize_config_module(config_module="forge_conf", version_base="1.3"):
                cfg = compose("forge-search", overrides=[*over, f"seed={seed}", f"search.generations={generations}",
                                                         "progress=false", f"out_dir={d}", *extra])
            s = run(cfg)
            res.setdefault(arm, []).append({k: s[k] for k in ("hypervolume", "hypervolume_loss_params",
                                                               "archive_size", "evaluations", "wall_s")})
            print(arm, seed, round(s["hypervolume"], 4), round(s["hypervolume_loss_params"], 4), flush=True)
    table = {}
    for arm, rows in res.items():
        hv, hv2 = np.array([r["hypervolume"] for r in rows]), np.array([r["hypervolume_loss_params"] for r in rows])
        table[arm] = {"hv_mean": hv.mean(), "hv_std": hv.std(), "hv_loss_params_mean": hv2.mean(),
                      "hv_loss_params_std": hv2.std(), "paper": PAPER[arm]}
    base, base2 = table["NSGA+IHA"]["hv_mean"], table["NSGA+IHA"]["hv_loss_params_mean"]
    for t in table.values():
        t["hv_ratio_to_nsga_iha"], t["hv_loss_params_ratio_to_nsga_iha"] = t["hv_mean"] / base, t["hv_loss_params_mean"] / base2
        t["paper_ratio_to_nsga_iha"] = t["paper"] / PAPER["NSGA+IHA"]
    rep = make_report([RUNS], RUNS.parent / "report")
    out.mkdir(parents=True, exist_ok=True)
    for p in rep["plots"][:2]:  # the Figure 7 curves (the run folders stay in multirun/, ignored by git)
        shutil.copy(p, out / Path(p).name)
    return {"seeds": seeds, "generations": generations, "arms": table, "runs": res}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["main", "ablation"])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("overrides", nargs="*", help="extra forge-search overrides, e.g. evaluator.predictor=PATH")
    a = ap.parse_intermixed_args()
    out = ROOT / "bench" / "results"
    if a.what == "main":
        r = bench_main(a.runs)
        name = "search_main.json"
    else:
        r = bench_ablation(a.seeds, a.generations, out / "search_ablation", a.overrides)
        name = "search_ablation.json"
    from forge.disk.io import atomic_write_json
    from forge.numeric import round_floats

    if a.what == "ablation":  # the seeds' HVs are portable (issue 33); their means and ratios are written at fixed digits
        r = round_floats(r)
    atomic_write_json(out / name, r)
    print(json.dumps(r if a.what == "main" else r["arms"], indent=1, default=float))


if __name__ == "__main__":
    main()
