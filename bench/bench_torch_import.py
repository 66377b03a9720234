"""Figures: RESULTS.md "Issue 45: the search without torch" (the import time the search no longer pays).

CPU of `import torch` in a fresh interpreter that already imported numpy, scipy.spatial and pymoo (what the
search imports anyway), against the same process without it, interleaved over `--runs`:

    nice -n 10 .venv/bin/python bench/bench_torch_import.py --runs 7

Writes bench/results/torch_import.json (median CPU s of each arm and their difference).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "import numpy, scipy.spatial, pymoo.algorithms.moo.nsga2, hydra, safetensors"
ARMS = {"search imports": BASE, "+ torch": BASE + "; import torch", "+ torch, lightning": BASE + "; import torch, lightning"}


def cpu_of(code: str) -> float:
    proc = subprocess.Popen([sys.executable, "-c", code])
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise subprocess.CalledProcessError(os.waitstatus_to_exitcode(status), code)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "torch_import.json"))
    a = ap.parse_args()
    runs: dict[str, list[float]] = {k: [] for k in ARMS}
    for _ in range(a.runs):
        for k, code in ARMS.items():
            runs[k].append(round(cpu_of(code), 3))
    med = {k: statistics.median(v) for k, v in runs.items()}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_torch_import.py " + " ".join(sys.argv[1:]),
           "median_cpu_s": med, "torch_import_cpu_s": round(med["+ torch"] - med["search imports"], 3),
           "torch_lightning_import_cpu_s": round(med["+ torch, lightning"] - med["search imports"], 3), "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
