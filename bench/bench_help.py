"""Figure: RESULTS.md "Issue 37 §1: --help answers in about a second" (CPU seconds of `forge-* --help`).

    nice -n 10 .venv/bin/python bench/bench_help.py

For each command, the CPU time (user + system, summed over the child process; wall time on a shared box says
more about the load than about the command) of `--help` through the light entry (forge/shell/entry.py or the package's entry.py, what the
installed scripts run) and through the command's own module (what they ran before issue 37), in fresh
interpreters, each once; the ratio is old / new.

Then the wall and CPU seconds of what tests/forge/shell/test_entry.py runs (`--help` and `--version` of every command in
one interpreter, 20 answers) with the load average beside them: the test asserts only that nothing heavy is
imported, since its wall time on a shared box measures the load (134 s at load 20-30, issue 56), not the command.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import tomllib
from pathlib import Path

# app: its light entry "module:function" (forge/shell/entry.py, or the package's own entry.py)
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
    answers = "".join(f"m = getattr(importlib.import_module({s.split(':')[0]!r}), {s.split(':')[1]!r})\n"
                      f"for f in ('--help', '--version'):\n    sys.argv = [{app!r}, f]\n"
                      "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
                      "        m()\n" for app, s in SCRIPTS.items())
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    cpu = cpu_s("import contextlib, importlib, io, sys\n" + answers)
    print(f"all {2 * len(SCRIPTS)} answers in one interpreter (tests/forge/shell/test_entry.py): "
          f"{time.perf_counter() - t0:.2f} s wall, {cpu:.2f} CPU-s, load average {load:.1f} before")


if __name__ == "__main__":
    main()
