"""Re-pin the default main job's front (tests/search/run/test_main_job_pin.py) after a change that moves it on purpose.

    python bench/repin_main_job.py            # run the job, print the front (members, HV, machine)
    python bench/repin_main_job.py --write    # ... and rewrite FRONT_IDS, HV and MACHINE in the pin test

The front is the same on every machine (issue 33: rounded metrics, float64 surrogate inference), so a pin made
here holds everywhere; record the printed line in bench/RESULTS.md with the change that moved it.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_module

from search.cli import run
from search.state import read_jsonl

PIN = Path(__file__).resolve().parents[1] / "tests" / "search" / "run" / "test_main_job_pin.py"
# what the pin test composes, by the suffix of its variables: FRONT_IDS/HV and FRONT_IDS_DEFAULT/HV_DEFAULT
PINS = {"": ["evaluator.predictor=forgeformer-iha-paper", "progress=false"], "_DEFAULT": ["progress=false"]}


def machine() -> str:
    """CPU model and core count, e.g. 'AMD EPYC, 2 cores' (lscpu's model name when available)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def main_job_front(overrides: list[str]) -> tuple[list[str], float]:
    """(sorted Pareto ids, hypervolume) of the main job under `overrides`."""
    with tempfile.TemporaryDirectory() as tmp, initialize_config_module(config_module="forge_conf", version_base="1.3"):
        summary = run(compose("forge-search", overrides=[*overrides, f"out_dir={tmp}"]))
        ids = sorted(r["id"] for r in read_jsonl(Path(tmp) / "pareto.jsonl"))
    return ids, float(summary["hypervolume"])


def rewrite(text: str, ids: list[str], hv: float, where: str, suffix: str = "") -> str:
    """The pin test's source with new FRONT_IDS{suffix}, HV{suffix} and MACHINE."""
    rows = [", ".join(repr(i) for i in ids[k:k + 6]) for k in range(0, len(ids), 6)]
    block = f"FRONT_IDS{suffix} = [\n" + "".join(f"    {r},\n" for r in rows) + "]"
    text = re.sub(rf"^FRONT_IDS{suffix} = \[\n.*?\n\]", lambda _: block, text, count=1, flags=re.S | re.M)
    text = re.sub(rf"^HV{suffix} = .*$", f"HV{suffix} = {hv!r}", text, count=1, flags=re.M)
    return re.sub(r"^MACHINE = .*$", f"MACHINE = {where!r}", text, count=1, flags=re.M)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the pin test with the new front")
    args = ap.parse_args(argv)
    where = machine()
    for suffix, overrides in PINS.items():
        ids, hv = main_job_front(overrides)
        print(f"main job {' '.join(overrides)}: {len(ids)} Pareto members, HV {hv!r} ({where})")
        if args.write:
            PIN.write_text(rewrite(PIN.read_text(), ids, hv, where, suffix))
    if args.write:
        print(f"rewrote {PIN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
