"""Issue 53 §3: peak memory of `forge-search` against its length, with the front it finds.

Each size runs in a fresh process (`search.cli.run` on the composed default config, `search.generations` set so the
budget is about 2,000, 20,000 and 200,000 evaluations; the default job's 40 generations, 1,944 evaluations, is the
baseline; `--overrides` default `search.crossover=0.6`, the paper's layer crossover, which the code before the
change reads too), which reports its peak RSS (`ru_maxrss`), the front's ids (a hash of pareto.jsonl's ids in order) and
the hypervolume. `--code DIR` runs another checkout's packages (the code before the change: `git archive <commit>`
unpacked there, conf/ and data/ linked as forge_conf/ and forge_data/), so fronts can be compared size by size.

    nice -n 10 .venv/bin/python bench/bench_memory.py --generations 40,41,416,4166
    nice -n 10 .venv/bin/python bench/bench_memory.py --generations 40,41,416 --code /tmp/before
    nice -n 10 .venv/bin/python bench/bench_memory.py --generations 40 --overrides ''   # the default job as shipped
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
import hashlib, json, resource, sys, tempfile, time
from pathlib import Path
from hydra import compose, initialize_config_module
from search.cli import run
G, extra = int(sys.argv[1]), sys.argv[2:]
with tempfile.TemporaryDirectory() as d:
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false", f"search.generations={G}", f"out_dir={d}/run", *extra])
    t0 = time.process_time()
    s = run(cfg)
    cpu = time.process_time() - t0
    ids = [json.loads(x)["id"] for x in (Path(d) / "run" / "pareto.jsonl").read_text().splitlines() if x.strip()]
    csv_rows = sum(1 for _ in open(Path(d) / "run" / "archive.csv")) - 1
print(json.dumps({"generations": G, "evaluations": s["evaluations"], "hv": s["hypervolume"], "front": len(ids),
                  "front_sha": hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16], "archive_csv_rows": csv_rows,
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "cpu_s": round(cpu, 1)}))
"""


def measure(generations: int, code: Path | None, overrides: list[str]) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if code is not None:
        env["PYTHONPATH"] = str(code)
    out = subprocess.run([sys.executable, "-c", CHILD, str(generations), *overrides], cwd=code or ROOT, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generations", default="40,41,416,4166")
    ap.add_argument("--code", type=Path, default=None, help="another checkout's packages (the code before)")
    ap.add_argument("--overrides", default="search.crossover=0.6",
                    help="comma-separated; the default: the paper's layer crossover, the form the code before reads too")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "memory.jsonl")
    a = ap.parse_args()
    for g in map(int, a.generations.split(",")):
        over = [o for o in a.overrides.split(",") if o]
        row = {"code": str(a.code or "this checkout"), "overrides": over, **measure(g, a.code, over)}
        with a.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
