"""Kill campaign of forge-search: SIGKILL real CLI runs at random times, resume them, compare with an uninterrupted run.

    python bench/bench_kill_search.py --trials 20 --seed 0 --out bench/results/kill_search.json

One uninterrupted reference run first (same command, its own folder). Then each trial starts the same
command in a fresh folder, SIGKILLs it at a uniformly random time within the reference's wall time (redrawn, shorter, when the run
ended first, so that every trial is killed at least once),
and resumes it (`forge-search resume=DIR`); each resume is itself killed again with probability
`--rekill` (double and triple kills), up to `--max-kills`, and the last resume runs to completion.
Every trial ends in one of:
- identical: archive.jsonl, pareto.jsonl and history.jsonl byte-identical to the reference, status complete;
- refused: a resume exited 2 with one line (e.g. killed before config.yaml existed: "no search state"),
  and the original command then completed the run in the same folder, identical to the reference;
- lost: anything else (different files, a traceback, another exit code).
Seeded: --seed picks the kill times. Figures go to bench/RESULTS.md with this command line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("archive.jsonl", "pareto.jsonl", "history.jsonl")
GENERATIONS = 40
ARGS = ["space=iha-tiny", "evaluator.predictor=forgeformer-iha-tiny", "search.pop_size=24", "search.offspring=48",
        f"search.generations={GENERATIONS}", "progress=false", "threads=1"]  # Table 6 sizes on the tiny space


def forge_search(args: list[str]) -> list[str]:
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'forge-search'; from search.cli import search_main; "
            "search_main()", *args]


def start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(forge_search(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)


def checkpoint_gen(d: Path) -> int | None:
    try:
        return int(json.loads((d / "state" / "checkpoint.json").read_text())["generation"])
    except (OSError, ValueError, KeyError):
        return None


def run_killed(args: list[str], d: Path, at: float) -> dict:
    """Start, SIGKILL after `at` seconds (or let it end first); what happened."""
    t0 = time.perf_counter()
    p = start(args)
    try:
        rc = p.wait(timeout=at)
        return {"killed": False, "rc": rc, "stderr": p.stderr.read()[-400:], "wall_s": time.perf_counter() - t0}
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        return {"killed": True, "at_s": round(at, 2), "generation_at_kill": checkpoint_gen(d),
                "has_config": (d / "config.yaml").is_file()}


def finish(args: list[str]) -> dict:
    p = subprocess.run(forge_search(args), capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return {"rc": p.returncode, "stderr": p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else []}


def trial(k: int, base: Path, ref: Path, t_ref: float, rng: random.Random, rekill: float, max_kills: int) -> dict:
    d = base / f"t{k:02d}"
    fresh = [*ARGS, f"hydra.run.dir={d}"]
    horizon = t_ref
    while True:  # every trial is killed at least once: a run that ended first is redone with a shorter horizon
        events = [run_killed(fresh, d, rng.uniform(0.3, horizon))]
        if events[0]["killed"]:
            break
        horizon = min(horizon, events[0]["wall_s"])
        shutil.rmtree(d)
    refused = False
    while True:
        kills = sum(e.get("killed", False) for e in events)
        if kills < max_kills and rng.random() < rekill:
            events.append(run_killed([f"resume={d}"], d, rng.uniform(0.3, horizon)))
            continue
        res = finish([f"resume={d}"])
        events.append({"resume": True, **res})
        if res["rc"] == 2:  # e.g. killed before config.yaml: start the same command afresh in that folder
            refused = True
            res = finish(fresh)
            events.append({"restart": True, **res})
        break
    same = all((d / f).is_file() and (d / f).read_bytes() == (ref / f).read_bytes() for f in FILES)
    status = json.loads((d / "summary.json").read_text()).get("status") if (d / "summary.json").is_file() else None
    ok = same and status == "complete" and events[-1]["rc"] == 0
    outcome = ("refused" if refused else "identical") if ok else "lost"
    leftovers = sorted(p.name for p in [*d.glob(".*.tmp"), *(d / "state").glob(".*.tmp")])
    return {"trial": k, "outcome": outcome, "kills": sum(e.get("killed", False) for e in events),
            "events": events, "status": status, "stale_tmp_left": leftovers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rekill", type=float, default=0.35, help="probability that a resume is killed again")
    ap.add_argument("--max-kills", type=int, default=3)
    ap.add_argument("--out", default="bench/results/kill_search.json")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    base = Path(tempfile.mkdtemp(prefix="forge-kill-"))
    t0 = time.perf_counter()
    res = finish([*ARGS, f"hydra.run.dir={base / 'ref'}"])
    t_ref = time.perf_counter() - t0
    assert res["rc"] == 0, res
    trials = []
    for k in range(a.trials):
        trials.append(trial(k, base, base / "ref", t_ref, rng, a.rekill, a.max_kills))
        print(json.dumps({key: trials[-1][key] for key in ("trial", "outcome", "kills")}), flush=True)
    counts = {o: sum(t["outcome"] == o for t in trials) for o in ("identical", "refused", "lost")}
    kills = [e for t in trials for e in t["events"] if e.get("killed")]
    gens = [e.get("generation_at_kill") for e in kills]
    phases = {"starting (no config.yaml yet)": sum(not e["has_config"] for e in kills),
              "before the first checkpoint": sum(e["has_config"] and e["generation_at_kill"] is None for e in kills),
              "mid-search": sum(e["generation_at_kill"] is not None and e["generation_at_kill"] < GENERATIONS for e in kills),
              "after the last checkpoint": sum(e["generation_at_kill"] == GENERATIONS for e in kills)}
    summary = {"command": " ".join(sys.argv), "forge_search_args": ARGS, "reference_wall_s": round(t_ref, 1),
               "trials": a.trials, "kills": sum(t["kills"] for t in trials),
               "multi_kill_trials": sum(t["kills"] > 1 for t in trials), "outcomes": counts,
               "kills_by_phase": phases,
               "generation_at_kill": sorted(g for g in gens if g is not None),
               "stale_tmp_left": sum(bool(t["stale_tmp_left"]) for t in trials), "detail": trials}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "detail"}, indent=1))


if __name__ == "__main__":
    main()
