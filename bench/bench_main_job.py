"""Figures: RESULTS.md "Calibrated loss intervals and the end of the main job" (main-job wall time).

Does the default main job keep its speed now that every prediction carries a calibrated interval and the
run ends with the front table? Both arms run in this one process, interleaved, as a user runs them
(`forge-search` with no arguments: process start, imports, surrogate load, 40 generations):

    nice -n 10 .venv/bin/python bench/bench_main_job.py --runs 3 [--before 0c49453]

- `before`: the tree at `--before` (the commit before the interval work), unpacked with `git archive`
  into a temporary folder and run from there (PYTHONPATH first, so its own code and shipped files load);
- `now`: this tree, ending with the front table;
- `now --json`: this tree, ending with the JSON summary (separates the table's cost).
Writes bench/results/main_job.json: per-arm walls, peak RSS, medians, the ratio now / before, and whether every
run has the same front ids and HV. Issue 28 (imports) measured with `--before 37be8c6 --out
bench/results/main_job_imports.json`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "forge-search"


def unpack(ref: str, dest: Path, bytecode: bool = True) -> str:
    """The tree at `ref` (read from git, nothing in the work tree touched); returns its full commit id."""
    sha = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    blob = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    for pkg, folder in (("forge_conf", "conf"), ("forge_data", "data")):  # the installed names of conf/ and data/
        (dest / pkg).symlink_to(folder)
    # byte-compiled, as an install is (pip compiles; an editable install writes __pycache__ on its first run): with
    # PYTHONDONTWRITEBYTECODE set, as on the shared machine, every run would otherwise compile the project's source
    packages = [str(dest / p) for p in ("forge", "search", "surrogate", "backends") if (dest / p).is_dir()]
    if bytecode:
        subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, stdout=subprocess.DEVNULL)
    return sha


def time_job(tree: Path, extra: list[str]) -> tuple[float, dict]:
    """One `forge-search` run from `tree`; (process wall s, summary fields + the process's peak RSS)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(EXE), f"hydra.run.dir={d}", "progress=false", *extra], cwd=tree, env=env,
                                stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: ru_maxrss in KiB on Linux
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, proc.args)
        s = json.loads((Path(d) / "summary.json").read_text())
        front = (Path(d) / "pareto.jsonl").read_text()
        out.seek(0)
        lines = len(out.read().splitlines())
    keep = {k: s.get(k) for k in ("wall_s", "evaluations", "archive_size", "hypervolume", "loss_interval")}
    cpu = usage.ru_utime + usage.ru_stime  # robust to other load on a shared machine, unlike the wall
    return wall, {**keep, "last_screen_lines": lines, "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
                  "cpu_s": round(cpu, 2),
                  "front_ids": sorted(json.loads(ln)["id"] for ln in front.splitlines() if ln.strip())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default="0c49453", help="git ref of the tree before the interval work")
    ap.add_argument("--after", default=None, help="git ref for the `now` arms (default: the working tree)")
    ap.add_argument("--json-arm", action=argparse.BooleanOptionalAction, default=True,
                    help="also time `now --json` (the front table's cost)")
    ap.add_argument("--bytecode", action=argparse.BooleanOptionalAction, default=True,
                    help="byte-compile the unpacked trees first (as installed); --no-bytecode: every run compiles "
                         "the project's source where PYTHONDONTWRITEBYTECODE is set (issue 45's first figures)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "main_job.json"))
    a = ap.parse_args()
    arms: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp2:
        sha = unpack(a.before, Path(tmp), a.bytecode)
        now = ROOT if a.after is None else Path(tmp2)
        after = unpack(a.after, now, a.bytecode) if a.after else "working tree"
        trees = {"before": (Path(tmp), []), "now": (now, [])} | ({"now --json": (now, ["--json"])} if a.json_arm else {})
        arms = {k: [] for k in trees}
        for i in range(a.runs):  # interleaved, so machine load hits every arm alike
            for name, (tree, extra) in trees.items():
                arms[name].append(time_job(tree, extra))
                print(f"run {i} {name}: {arms[name][-1][0]:.1f} s", file=sys.stderr)
    med = {k: statistics.median(w for w, _ in v) for k, v in arms.items()}
    cpu = {k: statistics.median(s["cpu_s"] for _, s in v) for k, v in arms.items()}
    res = {"command": "nice -n 10 .venv/bin/python bench/bench_main_job.py " + " ".join(sys.argv[1:]),
           "before_commit": sha, "after": after, "median_process_wall_s": med, "median_process_cpu_s": cpu,
           "ratio_now_to_before": med["now"] / med["before"], "cpu_ratio_now_to_before": cpu["now"] / cpu["before"],
           "ratio_json_to_before": med.get("now --json", float("nan")) / med["before"],
           "median_peak_rss_mib": {k: statistics.median(s["peak_rss_mib"] for _, s in v) for k, v in arms.items()},
           "same_front_and_hv": len({(json.dumps(s["front_ids"]), s["hypervolume"]) for v in arms.values()
                                     for _, s in v}) == 1,
           "runs": {k: [{"process_wall_s": w, **s} for w, s in v] for k, v in arms.items()}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("median_process_wall_s", "median_process_cpu_s", "ratio_now_to_before",
                                          "cpu_ratio_now_to_before", "ratio_json_to_before",
                                          "median_peak_rss_mib", "same_front_and_hv")},
                     indent=2))


if __name__ == "__main__":
    main()
