"""Figure: RESULTS.md "Issue 37 §1: --help answers in about a second" (CPU seconds of `forge-* --help`).

    nice -n 10 .venv/bin/python bench/bench_help.py

For each command, the CPU time (user + system, summed over the child process; wall time on a shared box says
more about the load than about the command) of `--help` through the light entry (forge/entry.py, what the
installed scripts run) and through the command's own module (what they ran before issue 37), in fresh
interpreters, each once; the ratio is old / new.
"""
from __future__ import annotations

import resource
import subprocess
import sys

from forge.entry import ENTRIES


def cpu_s(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    print(f"{'command':16} {'light entry s':>14} {'own module s':>13} {'ratio':>6}")
    for app, target in ENTRIES.items():
        mod, fn = target.split(":")
        argv = f"import sys; sys.argv = [{app!r}, '--help']; "
        new = cpu_s(argv + f"from forge.entry import {app.replace('-', '_')} as m; m()")
        old = cpu_s(argv + f"from {mod} import {fn} as m; m()")
        print(f"{app:16} {new:14.2f} {old:13.2f} {old / new:6.1f}")


if __name__ == "__main__":
    main()
