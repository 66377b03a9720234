"""Figures: RESULTS.md "Issue 45, third round" (the BLAS pool and malloc settings, measured as environments).

Interleaved runs of the default main job (`forge-search progress=false`, a fresh process each) under several
environments, from a tree at a git ref (unpacked as bench_main_job.py does) or the working tree; process CPU
and peak RSS per arm. The BLAS and malloc settings that forge.shell.entry now makes in-process can be
reproduced on the tree before them as environment variables:

    nice -n 10 .venv/bin/python bench/bench_env_arms.py --runs 5 --tree 4011ead

Writes bench/results/env_arms.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_main_job import EXE, ROOT, unpack  # noqa: E402

ARMS = {
    "as is": {},
    "BLAS pools of one thread": {"OPENBLAS_NUM_THREADS": "1"},
    "malloc keeps freed memory": {"MALLOC_TRIM_THRESHOLD_": str(64 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)},
    "both": {"OPENBLAS_NUM_THREADS": "1", "MALLOC_TRIM_THRESHOLD_": str(64 << 20),
             "MALLOC_MMAP_THRESHOLD_": str(32 << 20)},
}


def one(tree: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(process CPU s, system CPU s, peak RSS MiB) of one default job from `tree` under `env`."""
    import subprocess

    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([str(EXE), f"hydra.run.dir={d}", "progress=false"], cwd=tree,
                                env={**os.environ, "PYTHONPATH": str(tree), **env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"forge-search failed under {env}")
    return ru.ru_utime + ru.ru_stime, ru.ru_stime, ru.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", default=None, help="git ref to unpack and run (default: the working tree)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "env_arms.json"))
    a = ap.parse_args()
    got: dict[str, list] = {k: [] for k in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) if a.tree else ROOT
        sha = unpack(a.tree, tree) if a.tree else "working tree"
        for _ in range(a.runs):  # interleaved: the machine's load hits every arm alike
            for name, env in ARMS.items():
                got[name].append(one(tree, env))
    med = {k: {"cpu_s": round(statistics.median(r[0] for r in v), 3), "sys_s": round(statistics.median(r[1] for r in v), 3),
               "peak_rss_mib": round(statistics.median(r[2] for r in v), 1)} for k, v in got.items()}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_env_arms.py " + " ".join(sys.argv[1:]), "tree": sha,
           "median": med, "cpu_ratio_to_as_is": {k: round(v["cpu_s"] / med["as is"]["cpu_s"], 3) for k, v in med.items()},
           "runs": {k: [[round(x, 3) for x in r] for r in v] for k, v in got.items()}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("tree", "median", "cpu_ratio_to_as_is")}, indent=2))


if __name__ == "__main__":
    main()
