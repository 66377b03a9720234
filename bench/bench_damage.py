"""Figures: RESULTS.md "Issue 42 §4: random damage to a crashed run's state" (what a resume makes of it).

A run is stopped at generation 4 of 6 with its durable checkpoint at generation 2 (a power loss between fsyncs,
as tests/search/run/test_ledger.py simulates it). Each trial copies it, damages one file at random (the newest
checkpoint, archive.jsonl, the loss cache or history.jsonl) in one of three ways (cut at a random byte, one bit
flipped, the tail zeroed from a random byte with the length kept), resumes it through `search.cli.run` (the
fakes as its parts, so a trial costs about a second) and sorts the outcome:
- rebuilt: the resume completes and pareto.jsonl, archive.jsonl and history.jsonl equal the uninterrupted run's;
- refused: a ForgeError in one line (nothing resumed);
- silent: the resume completes with other files (short, or different): the outcome that must never happen;
- crash: any other exception.

    .venv/bin/python bench/bench_damage.py --trials 60
    PYTHONPATH=<checkout of the base commit> .venv/bin/python bench/bench_damage.py --trials 60   # the baseline
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

FILES = ("state/checkpoint.json", "archive.jsonl", "state/loss_cache.jsonl", "history.jsonl")
DAMAGES = ("cut", "flip", "zero-tail")
COMPARED = ("pareto.jsonl", "archive.jsonl", "history.jsonl")
REFUSALS: list[str] = []  # each refusal's message, for the record


def _cfg(out: Path) -> dict:
    from tests.search.conftest import tiny_cfg

    return tiny_cfg(search={"generations": 6}, evaluator={"n_mc": 2}, out_dir=str(out), progress=False)


def _run(cfg: dict) -> dict:
    from search.cli import run
    from tests.search.run.test_resume import _components

    with contextlib.redirect_stdout(io.StringIO()):
        return run(cfg, _components())


def crashed_run(root: Path) -> tuple[Path, Path]:
    """(the uninterrupted run, the run stopped at generation 4 whose durable checkpoint is generation 2's)."""
    full, part = root / "full", root / "part"
    _run(_cfg(full))
    _run({**_cfg(part), "stop_after": 2})
    durable = part / "state/checkpoint.durable.json"
    gen2 = durable.read_bytes()
    _run({**_cfg(part), "resume": str(part), "stop_after": 4})
    durable.unlink()  # a hard link to the checkpoint: replaced, not written through
    durable.write_bytes(gen2)
    return full, part


def damage(path: Path, how: str, rng: np.random.Generator) -> None:
    data = path.read_bytes()
    at = int(rng.integers(1, len(data) - 1))
    new = {"cut": data[:at], "flip": data[:at] + bytes([data[at] ^ (1 << int(rng.integers(0, 8)))]) + data[at + 1:],
           "zero-tail": data[:at] + b"\0" * (len(data) - at)}[how]
    path.unlink()  # a new file: the durable copy is another inode
    path.write_bytes(new)


def trial(full: Path, part: Path, where: Path, name: str, how: str, rng: np.random.Generator) -> str:
    from forge.errors import ForgeError

    shutil.copytree(part, where)
    damage(where / name, how, rng)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _run({**_cfg(where), "resume": str(where), "stop_after": None})
    except ForgeError as e:
        REFUSALS.append(f"{name} {how}: {str(e)[:240]}")
        return "refused" if "\n" not in str(e) else "refused (several lines)"
    except Exception:  # noqa: BLE001  (what the trial counts)
        return "crash"
    same = all((full / f).read_bytes() == (where / f).read_bytes() for f in COMPARED)
    return "rebuilt" if same else "silent"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", default=None, help="write the counts as JSON here")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    counts: collections.Counter = collections.Counter()
    by: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory() as d:
        full, part = crashed_run(Path(d))
        for i in range(args.trials):
            name, how = FILES[int(rng.integers(len(FILES)))], DAMAGES[int(rng.integers(len(DAMAGES)))]
            outcome = trial(full, part, Path(d) / f"t{i}", name, how, rng)
            counts[outcome] += 1
            by[f"{name} {how}"][outcome] += 1
    out = {"trials": args.trials, "outcomes": dict(counts), "by_damage": {k: dict(v) for k, v in sorted(by.items())},
           "refusals": REFUSALS}
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
