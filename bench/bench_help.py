"""Figure: RESULTS.md "Issue 37 §1: --help answers in about a second" (CPU seconds of `forge-* --help`).

    nice -n 10 .venv/bin/python bench/bench_help.py

For each command, the CPU time (user + system, summed over the child process; wall time on a shared box says
more about the load than about the command) of `--help` through the light entry (forge/runtime/entry.py or the package's entry.py, what the
installed scripts run) and through the command's own module (what they ran before issue 37), in fresh
interpreters, each once; the ratio is old / new.
"""
from __future__ import annotations

import resource
import subprocess
import sys

import tomllib
from pathlib import Path

# app: its light entry "module:function" (forge/runtime/entry.py, or the package's own entry.py)
SCRIPTS = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["scripts"]


def cpu_s(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    print(f"{'command':16} {'light entry s':>14} {'own module s':>13} {'ratio':>6}")
    for app, script in SCRIPTS.items():
        light, name = script.split(":")
        mod, fn = getattr(__import__(light, fromlist=[name]), name).target.split(":")
        argv = f"import sys; sys.argv = [{app!r}, '--help']; "
        new = cpu_s(argv + f"from {light} import {name} as m; m()")
        old = cpu_s(argv + f"from {mod} import {fn} as m; m()")
        print(f"{app:16} {new:14.2f} {old:13.2f} {old / new:6.1f}")


if __name__ == "__main__":
    main()
