"""Figures: RESULTS.md "Issue 45: the search without torch" (what the interpreter's teardown costs now).

The default main job from this tree, interleaved, ended two ways: as the installed `forge-search` (the
interpreter's own teardown), and through a wrapper that runs the same entry, then the atexit functions, flushes
stdout and stderr and leaves with `os._exit` (no teardown). Process CPU and wall per arm, medians over `--runs`:

    nice -n 10 .venv/bin/python bench/bench_exit.py --runs 5

Writes bench/results/exit.json. (First measured at 970f8b0 with the os._exit path inside `forge.shell.entry`: no gain once
torch is not imported, so the project keeps the ordinary exit.)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "forge-search"
NO_TEARDOWN = ("import atexit, os, sys\nfrom search.entry import forge_search\ncode = 0\ntry:\n    forge_search()\n"
               "except SystemExit as e:\n    code = e.code or 0\natexit._run_exitfuncs()\nsys.stdout.flush()\n"
               "sys.stderr.flush()\nos._exit(code)\n")


def job(no_teardown: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        args = [f"hydra.run.dir={d}", "progress=false"]
        cmd = [sys.executable, "-c", NO_TEARDOWN, *args] if no_teardown else [str(EXE), *args]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status):
            raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), cmd)
        hv = json.loads((Path(d) / "summary.json").read_text())["hypervolume"]
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "hypervolume": hv}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "exit.json"))
    a = ap.parse_args()
    arms = {"os._exit": True, "interpreter teardown": False}
    runs: dict[str, list] = {k: [] for k in arms}
    for _ in range(a.runs):
        for arm, flag in arms.items():
            runs[arm].append(job(flag))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_exit.py " + " ".join(sys.argv[1:]), "median": med,
           "teardown_cpu_s": round(med["interpreter teardown"]["cpu_s"] - med["os._exit"]["cpu_s"], 3),
           "pairs_cpu_s": [round(t["cpu_s"] - f["cpu_s"], 2) for f, t in zip(runs["os._exit"],
                                                                            runs["interpreter teardown"])],
           "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("median", "teardown_cpu_s", "pairs_cpu_s")}, indent=2))


if __name__ == "__main__":
    main()
