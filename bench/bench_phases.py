"""Figures: RESULTS.md "Issue 45: the search without torch" (where the default main job's CPU goes now).

Runs the default main job (`forge-search progress=false`, in a fresh process per run) with process-CPU
timers around its phases: the imports before the job, Hydra's composition (both of them: `hydra.main` composes
once to read the run mode and once to run), the build, the encoder, the forests, the backend, pymoo's mating
and survival, the end screen; `glue` is the search loop minus the timed parts inside it. Medians over `--runs`:

    nice -n 10 .venv/bin/python bench/bench_phases.py --runs 3

Writes bench/results/phases.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRIVER = r'''
import functools, json, sys, time
T0 = time.process_time()
acc = {}
def wrap(owner, name, key):
    f = getattr(owner, name)
    @functools.wraps(f)
    def timed(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            acc[key] = acc.get(key, 0.0) + time.process_time() - t
    setattr(owner, name, timed)
sys.argv = ["bench-phases", "hydra.run.dir=" + sys.argv[1], "progress=false"]
import search.cli as cli
acc["imports"] = time.process_time() - T0
import hydra._internal.hydra as hh, pymoo.core.algorithm as al, surrogate.predictor as pr, search.problem as pb
import search.runner as rn
wrap(hh.Hydra, "compose_config", "hydra_compose")
wrap(cli, "build_search", "build")
wrap(rn.Search, "run", "search_loop")
wrap(pr.ForgeFormerPredictor, "encoder_predict", "encoder")
wrap(pr, "forests_predict", "forests")
wrap(pb.ForgeProblem, "_cost_metrics", "backend")
wrap(al.Algorithm, "infill", "pymoo_mating")
wrap(al.Algorithm, "advance", "pymoo_survival")
wrap(cli, "end_screen", "end_screen")
try:
    cli.search_main()
finally:
    acc["total_in_process"] = time.process_time()
    print("PHASES " + json.dumps(acc), file=sys.stderr)
'''
INSIDE = ("encoder", "forests", "backend", "pymoo_mating", "pymoo_survival")


def one_run() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, "-c", DRIVER, d], capture_output=True, text=True, cwd=ROOT, timeout=600)
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("PHASES ")][-1]
        evals = json.loads((Path(d) / "summary.json").read_text())["evaluations"]
    acc = json.loads(line[len("PHASES "):])
    acc["glue"] = acc["search_loop"] - sum(acc.get(k, 0.0) for k in INSIDE)
    acc["glue_ms_per_evaluation"] = 1e3 * acc["glue"] / evals
    return acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "phases.json"))
    a = ap.parse_args()
    runs = [one_run() for _ in range(a.runs)]
    med = {k: round(statistics.median(r.get(k, 0.0) for r in runs), 3) for k in runs[0]}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_phases.py " + " ".join(sys.argv[1:]),
           "median_cpu_s": med, "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(med, indent=2))


if __name__ == "__main__":
    main()
