"""Figures: RESULTS.md "Issue 33 §3: the README's test command" (wall time of each stage of the CI command).

Runs the README's test command (the fenced block under "Install and run the tests", which `.ci/run` runs
verbatim) one `&&` stage at a time in a checkout, and records each stage's wall and CPU seconds (user + system
of the stage's process tree), with the machine it ran on (CPU model, cores, load average before and after), so
the next change sees what each stage costs:

    nice -n 10 .venv/bin/python bench/bench_tests.py                    # a fresh clone of HEAD, every stage
    .venv/bin/python bench/bench_tests.py --reuse-venv --skip 1 2       # only the test stages, in this checkout's venv
    .venv/bin/python bench/bench_tests.py --reuse-venv --only 6 --serial   # stage 6 with xdist off, for a ratio

`--reuse-venv` runs the stages in this checkout with its `.venv` instead of a fresh clone (the install stage
then says how long pip takes when everything is already there). `--serial` adds `-p no:xdist` to every pytest
stage (and drops `-n`), so one run can measure the parallel and the serial suite on the same loaded machine.
Prints a Markdown table for RESULTS.md and writes the same figures as JSON (`--out`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_command(readme: Path) -> str:
    """The README's test command: the bash block that follows the "Install and run the tests" paragraph."""
    text = readme.read_text(encoding="utf-8")
    tail = text[text.index("Install and run the tests"):]
    block = re.search(r"```bash\n(.*?)\n```", tail, re.S)
    assert block, "README.md: no bash block after 'Install and run the tests'"
    return block.group(1).strip()


def stages(command: str, serial: bool) -> list[str]:
    """The command's `&&` stages; with `serial`, the pytest stages run without xdist."""
    out = [s.strip() for s in command.split("&&")]
    if serial:
        out = [re.sub(r"\s-n\s+\S+|\s--dist[ =]\S+", "", s) + " -p no:xdist" if "pytest" in s else s for s in out]
    return out


def machine() -> dict:
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version()}


def run_stage(cmd: str, cwd: Path, log: Path) -> dict:
    """One stage in bash: wall s, CPU s of its process tree, load average before and after, exit status."""
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("a") as f:
        f.write(f"\n$ {cmd}\n")
        f.flush()
        rc = subprocess.run(["bash", "-c", cmd], cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"stage": cmd, "rc": rc, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


def checkout(rev: str, reuse: bool) -> Path:
    """Where the stages run: this checkout (`--reuse-venv`), or a fresh clone of `rev` (nothing built yet)."""
    if reuse:
        return ROOT
    dest = Path(tempfile.mkdtemp(prefix="forge-bench-tests-")) / "forge"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "checkout", "-q", rev], cwd=dest, check=True)
    return dest


def table(rows: list[dict], info: dict) -> str:
    lines = [f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}; rev {info['rev']}.", "",
             "| # | stage | wall s | CPU s | load before → after | exit |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        short = r["stage"] if len(r["stage"]) < 70 else r["stage"][:67] + "..."
        lines.append(f"| {r['n']} | `{short}` | {r['wall_s']} | {r['cpu_s']} | "
                     f"{r['load_before']} → {r['load_after']} | {r['rc']} |")
    total = sum(r["wall_s"] for r in rows)
    lines.append(f"| | **total** | **{total:.1f}** ({total / 60:.1f} min) | {sum(r['cpu_s'] for r in rows):.1f} | | |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="the commit to clone (ignored with --reuse-venv)")
    ap.add_argument("--reuse-venv", action="store_true", help="run in this checkout with its .venv")
    ap.add_argument("--skip", type=int, nargs="*", default=[], help="stage numbers (from 1) not to run")
    ap.add_argument("--only", type=int, nargs="*", default=None, help="run only these stage numbers")
    ap.add_argument("--serial", action="store_true", help="pytest stages without xdist (-p no:xdist)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/tests_stages.json")
    args = ap.parse_args()
    where = checkout(args.rev, args.reuse_venv)
    cmds = stages(readme_command(where / "README.md"), args.serial)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True).stdout
    info = {**machine(), "rev": rev.strip(), "serial": args.serial, "command": " && ".join(cmds)}
    log = Path(tempfile.mkstemp(prefix="bench-tests-", suffix=".log")[1])
    print(f"# {info['cpu']}, {info['cores']} cores; log: {log}", file=sys.stderr)
    rows = []
    for n, cmd in enumerate(cmds, 1):
        if n in args.skip or (args.only is not None and n not in args.only):
            continue
        row = {"n": n, **run_stage(cmd, where, log)}
        rows.append(row)
        print(f"# stage {n}: {row['wall_s']} s wall, {row['cpu_s']} s CPU, rc {row['rc']}: {shlex.quote(cmd)[:90]}",
              file=sys.stderr)
        if row["rc"]:
            break
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": info, "stages": rows}, indent=1) + "\n")
    print(table(rows, info))
    return max((r["rc"] for r in rows), default=0)


if __name__ == "__main__":
    sys.exit(main())
