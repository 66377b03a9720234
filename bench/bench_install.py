"""Figures: RESULTS.md "Issue 45: the search without torch" (install time and size, with and without torch).

A search-only user needs the inference stack; torch (CPU wheel) and Lightning are for training, labelling and
export. Each arm installs its dependency set into a fresh temporary venv with pip, from what pip is configured to
read (here the machine's local index and wheel folder: no network time), interleaved over `--runs`:

    nice -n 10 .venv/bin/python bench/bench_install.py --runs 2

- `search-only`: pyproject's dependencies without torch and Lightning;
- `with torch`: the same plus torch==2.13.0 (CPU) and Lightning, as `pip install forge-nas[train]`.
Reports pip's wall and CPU time (children included) and the venv's size on disk. Writes bench/results/install.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH = re.compile(r"^(torch|lightning)\b")


def dependency_sets() -> dict[str, list[str]]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(proj["dependencies"]) + list(proj.get("optional-dependencies", {}).get("train", []))
    base = [d for d in deps if not TORCH.match(d)]
    return {"search-only": base, "with torch": base + sorted({d for d in deps if TORCH.match(d)})}


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def install(reqs: list[str]) -> dict[str, float]:
    """pip install `reqs` into a fresh venv: wall s, CPU s of pip and its children, venv MiB (pip itself excluded)."""
    with tempfile.TemporaryDirectory() as d:
        venv = Path(d) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        empty = du(venv)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *reqs], check=True,
                       env={**os.environ, "PIP_NO_CACHE_DIR": "1"})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "mib": round((du(venv) - empty) / 2**20)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "install.json"))
    a = ap.parse_args()
    sets = dependency_sets()
    runs: dict[str, list] = {k: [] for k in sets}
    for i in range(a.runs):
        for name, reqs in sets.items():
            runs[name].append(install(reqs))
            print(f"run {i} {name}: {runs[name][-1]}", file=sys.stderr)
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s", "mib")} for k, v in runs.items()}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_install.py " + " ".join(sys.argv[1:]),
           "sets": sets, "median": med, "runs": runs,
           "ratio_search_only_to_torch": {m: round(med["search-only"][m] / med["with torch"][m], 2)
                                          for m in ("wall_s", "cpu_s", "mib")}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("median", "ratio_search_only_to_torch")}, indent=2))


if __name__ == "__main__":
    main()
