"""Figures: RESULTS.md "Issue 34 §2: the checkpoint's log ledger" (what the ledger costs the main job's loop).

The default main job (`forge-search` with no arguments: iha-paper, the shipped Forge-Former, roofline, 40
generations) runs in this one process, interleaved, in two arms:
- `ledger`: this tree: every checkpoint records rows, bytes and SHA-256 of each log it covers (search.ledger),
  every durable tick also fsyncs the loss cache and hard-links state/checkpoint.durable.json to the checkpoint;
- `no ledger`: the same code with the ledger switched off (what the loop did before issue 34).
Both the loop's CPU time (time.process_time around Search.run, robust to a loaded machine) and its wall time
are reported, with the `checkpoint` phase timer, as medians and ratios ledger / no ledger:

    nice -n 10 .venv/bin/python bench/bench_ledger.py --runs 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def ledger_off():
    """The loop as before issue 34: no ledger in the checkpoint, no durable copy, only archive.jsonl fsynced."""
    import search.runlog as runlog

    saved = (runlog.LogLedger.update, runlog.snapshot_durable, runlog.sync_files)
    runlog.LogLedger.update = lambda self: {}
    runlog.snapshot_durable = lambda run_dir: None
    runlog.sync_files = lambda paths: saved[2]([p for p in paths if Path(p).name != "loss_cache.jsonl"])
    try:
        yield
    finally:
        runlog.LogLedger.update, runlog.snapshot_durable, runlog.sync_files = saved


def one_run(arm: str) -> dict[str, float]:
    from hydra import compose, initialize_config_module

    import search.runner as runner
    from search.cli import run

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false"])
    real_run, spent = runner.Search.run, {}

    def timed(self, *a, **k):
        c0, w0 = time.process_time(), time.perf_counter()
        out = real_run(self, *a, **k)
        spent.update(cpu=time.process_time() - c0, wall=time.perf_counter() - w0,
                     checkpoint=self.timers["checkpoint"])
        return out

    runner.Search.run = timed
    try:
        with tempfile.TemporaryDirectory() as d:
            cfg.out_dir = d
            if arm == "ledger":
                summary = run(cfg)
            else:
                with ledger_off():
                    summary = run(cfg)
            spent["hv"] = summary["hypervolume"]
    finally:
        runner.Search.run = real_run
    return spent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "ledger.json"))
    args = ap.parse_args()
    one_run("ledger")  # warm: imports, the surrogate's first load
    arms: dict[str, list[dict[str, float]]] = {"no ledger": [], "ledger": []}
    for i in range(args.runs):
        for arm in arms:
            arms[arm].append(one_run(arm))
            print(f"run {i} {arm}: loop cpu {arms[arm][-1]['cpu']:.2f} s, wall {arms[arm][-1]['wall']:.2f} s", flush=True)
    med = {arm: {k: statistics.median(r[k] for r in rows) for k in ("cpu", "wall", "checkpoint")}
           for arm, rows in arms.items()}
    out = {"runs": arms, "median": med,
           "ratio_cpu_ledger_to_none": med["ledger"]["cpu"] / med["no ledger"]["cpu"],
           "ratio_wall_ledger_to_none": med["ledger"]["wall"] / med["no ledger"]["wall"],
           "same_hv": len({r["hv"] for rows in arms.values() for r in rows}) == 1}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
