"""Figures: RESULTS.md "Issue 45: the search without torch" (what the interpreter's teardown costs now).

The default main job from this tree, interleaved: ending through `forge.entry.fast_exit` (atexit functions,
flushed streams, `os._exit`) and with `FORGE_SLOW_EXIT=1` (the interpreter's own teardown after the same atexit
functions). Process CPU and wall per arm, medians over `--runs`:

    nice -n 10 .venv/bin/python bench/bench_exit.py --runs 5

Writes bench/results/exit.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_main_job import ROOT, time_job  # noqa: E402

ARMS = {"fast exit": None, "interpreter teardown": "1"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "exit.json"))
    a = ap.parse_args()
    runs: dict[str, list] = {k: [] for k in ARMS}
    for _ in range(a.runs):
        for arm, flag in ARMS.items():
            os.environ.pop("FORGE_SLOW_EXIT", None)
            if flag:
                os.environ["FORGE_SLOW_EXIT"] = flag
            wall, s = time_job(ROOT, [])
            runs[arm].append({"wall_s": round(wall, 2), "cpu_s": s["cpu_s"], "hypervolume": s["hypervolume"]})
    os.environ.pop("FORGE_SLOW_EXIT", None)
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_exit.py " + " ".join(sys.argv[1:]), "median": med,
           "teardown_cpu_s": round(med["interpreter teardown"]["cpu_s"] - med["fast exit"]["cpu_s"], 3),
           "pairs_cpu_s": [round(t["cpu_s"] - f["cpu_s"], 2) for f, t in zip(runs["fast exit"],
                                                                            runs["interpreter teardown"])],
           "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("median", "teardown_cpu_s", "pairs_cpu_s")}, indent=2))


if __name__ == "__main__":
    main()
