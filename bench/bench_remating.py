"""Issue 53 §2: what pymoo's re-mating for duplicates costs the default job.

pymoo's `InfillCriterion.do` mates, repairs and drops duplicates (here by genome id, `search.duplicates`) until it
has the λ = 48 offspring it wants, asking each further mating only for the shortfall. This bench counts, per run of
the composed default job (`search.cli.run`, `search.generations` as given): the matings (`Mating._do` calls), the
rows mated, the rows dropped as duplicates, and the process CPU spent in the whole infill (selection, crossover,
mutation, repair, duplicate keys: the loop's "mating" timer) against the run's process CPU.

    nice -n 10 .venv/bin/python bench/bench_remating.py --seeds 0,1,2,3,4
    nice -n 10 .venv/bin/python bench/bench_remating.py --seeds 0,1,2 --overrides search.crossover=layer

Rows go to bench/results/remating.jsonl.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import json, sys, tempfile, time
from hydra import compose, initialize_config_module
from pymoo.core.infill import InfillCriterion
from pymoo.core.mating import Mating
import search.runner as R
from search.cli import run
G, seed, extra = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
n = {"matings": 0, "rows": 0, "kept": 0, "infill_cpu": 0.0, "generations": 0}
mate, fill = Mating._do, InfillCriterion.do
def _do(self, *a, **k):
    off = mate(self, *a, **k)
    n["matings"] += 1
    n["rows"] += len(off)
    return off
def do(self, *a, **k):
    t0 = time.process_time()
    off = fill(self, *a, **k)
    n["infill_cpu"] += time.process_time() - t0
    n["kept"] += len(off)
    n["generations"] += 1
    return off
Mating._do, InfillCriterion.do = _do, do
with tempfile.TemporaryDirectory() as d:
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false", f"seed={seed}", f"search.generations={G}",
                                                 f"out_dir={d}/run", *extra])
    t0 = time.process_time()
    s = run(cfg)
    cpu = time.process_time() - t0
print(json.dumps({"seed": seed, "generations": G, "evaluations": s["evaluations"], "hv": s["hypervolume"],
                  "matings": n["matings"], "infills": n["generations"], "rows_mated": n["rows"],
                  "rows_kept": n["kept"], "infill_cpu_s": round(n["infill_cpu"], 3), "run_cpu_s": round(cpu, 3)}))
"""


def measure(generations: int, seed: int, overrides: list[str]) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(generations), str(seed), *overrides], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--overrides", default="", help="comma-separated Hydra overrides (default: the shipped job)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "remating.jsonl")
    a = ap.parse_args()
    over = [o for o in a.overrides.split(",") if o]
    for seed in map(int, a.seeds.split(",")):
        row = {"overrides": over, **measure(a.generations, seed, over)}
        with a.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
