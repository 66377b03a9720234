"""Figures: RESULTS.md "Issue 45: the search without torch" (scale: CPU per evaluation up to 3,200 offspring).

The default main job's recipe (iha-paper, the shipped Forge-Former, roofline, NSGA-II) at offspring λ per
generation and population λ/2 (the default's ratio, 24/48), each λ run for G1 and G2 generations as the installed
`forge-search` in a fresh process. The marginal CPU per evaluation is (cpu(G2) − cpu(G1)) / ((G2 − G1)·λ): process
start, imports, set-up and the end screen cancel out. From the default shape's fixed cost and per-evaluation cost,
the largest job that fits in one CPU-minute (`one_cpu_minute`):

    nice -n 10 .venv/bin/python bench/bench_scale.py [--offspring 48,200,800,3200] [--gens 4,16]

Writes bench/results/scale.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "forge-search"


def job_cpu(offspring: int, gens: int) -> tuple[float, int]:
    """(process CPU s, evaluations) of one `forge-search` at this shape."""
    with tempfile.TemporaryDirectory() as d:
        args = [str(EXE), f"hydra.run.dir={d}", "progress=false", "quiet=true", f"search.offspring={offspring}",
                f"search.pop_size={max(2, offspring // 2)}", f"search.generations={gens}"]
        proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status):
            raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), args)
        evals = json.loads((Path(d) / "summary.json").read_text())["evaluations"]
    return usage.ru_utime + usage.ru_stime, int(evals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--offspring", default="48,200,800,3200")
    ap.add_argument("--gens", default="4,16", help="G1,G2: the two generation counts per shape")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale.json"))
    a = ap.parse_args()
    g1, g2 = (int(x) for x in a.gens.split(","))
    rows = []
    for lam in (int(x) for x in a.offspring.split(",")):
        (c1, e1), (c2, e2) = job_cpu(lam, g1), job_cpu(lam, g2)
        per_eval = (c2 - c1) / max(e2 - e1, 1)
        rows.append({"offspring": lam, "pop_size": max(2, lam // 2), "cpu_s": {g1: round(c1, 2), g2: round(c2, 2)},
                     "evaluations": {g1: e1, g2: e2}, "ms_per_evaluation": round(1e3 * per_eval, 3),
                     "fixed_cpu_s": round(c1 - per_eval * e1, 2)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    base = rows[0]
    budget = (60.0 - base["fixed_cpu_s"]) / (base["ms_per_evaluation"] / 1e3)  # evaluations in one CPU-minute
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_scale.py " + " ".join(sys.argv[1:]), "rows": rows,
           "linear_ratio_largest_to_smallest": round(rows[-1]["ms_per_evaluation"] / base["ms_per_evaluation"], 2),
           "one_cpu_minute": {"evaluations": int(budget), "at_offspring": base["offspring"],
                              "generations": int((budget - base["pop_size"]) / base["offspring"])}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("linear_ratio_largest_to_smallest", "one_cpu_minute")}, indent=2))


if __name__ == "__main__":
    main()
