"""Issue 35 §5: where co-evolution spends its labels, and a pessimistic loss objective, on the tiny closed loop.

    nice -n 10 .venv/bin/python bench/bench_closed_loop_acquire.py --seeds 0 1 2 --n 24   # then --table-only

The forge arm of bench_closed_loop.py (iha-tiny, cpu-proxy labels on the stdlib corpus, NSGA-II pop 40 steering
on the host-cpu roofline's TPOT, co-evolution of the shipped tiny surrogate 8 labels every 2 generations, then the
forge-verify front picks topped up so the arm spends exactly N new labels), in three variants:
  paper    today's co-evolution: half lowest μ on the front, half highest σ off it (search.coevolve.acquire=paper)
  widest   every co-evolution label on the front member with the widest calibrated interval (acquire=widest)
  upper    today's co-evolution, loss objective = the interval's upper bound loss_hi (evaluator.select=upper)
  paper-mc, upper-mc   the same two with evaluator.n_mc=10 during the search: the shipped tiny checkpoint's
           interval is then conformal-sigma (a width per genome) instead of conformal-residual (a width per μ bin)
All three use the shipped surrogate, fitted on the 340 shipped cpu-proxy labels: total real labels = 340 + N
(the store is pre-seeded with them, so a prior genome costs nothing). Scored as bench_closed_loop.py: the real
front of the arm's N labels in (real loss, TPOT measured by cpu-measured), its HV (anchor-normalized, ref 2.0)
and best real loss, per 8 labels; plus the final front's coverage: of its members with a real label, the share
whose real loss lies inside the [loss_lo, loss_hi] the search printed for them. Checkpointed per arm and seed in
bench/results/closed_loop_acquire.json.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench_closed_loop import CO_BATCH, CO_EVERY, K, OUT, ROOT, Bench, Counted, _done, _ms, base_cfg
from forge.disk.io import atomic_write_text

ARMS = {"paper": ({}, {}), "widest": ({"acquire": "widest"}, {}), "upper": ({}, {"select": "upper"}),
        "paper-mc": ({}, {"n_mc": 10}), "upper-mc": ({}, {"select": "upper", "n_mc": 10})}
PRIORS = "labels/iha-tiny-cpu-proxy.jsonl"


class Acquire(Bench):
    def __init__(self, work: Path, n: int):
        from forge.runtime.config import data_dir

        super().__init__(work, [n])
        self.store.import_jsonl(data_dir() / PRIORS)  # idempotent: the priors cost nothing

    arms = ARMS

    def parts(self, counted: Any, seed: int, co_kw: dict[str, Any]) -> dict[str, Any]:
        """The search's injected components: today's co-evolution of the shipped tiny Forge-Former."""
        from search.coevolution import CoEvolution, replay_labels
        from surrogate.fit import finetune
        from surrogate.loading import load_predictor

        return {"coevolution": CoEvolution(CO_EVERY, counted, finetune, "forgeformer-iha-tiny",
                                           replay_labels(PRIORS, "iha-tiny"), batch=CO_BATCH, n_mc=10, seed=seed,
                                           load=load_predictor, **co_kw)}

    def arm(self, name: str, seed: int, hv: Any) -> dict[str, Any]:
        from forge.genomes.genome import genome_from_dict
        from search.cli import run
        from search.state import read_jsonl

        co_kw, ev_kw = self.arms[name]
        counted, run_dir = Counted(self.trainer), self._fresh(f"{name}-{seed}")
        cfg = base_cfg("iha-tiny", seed, self.work)
        cfg.update(out_dir=str(run_dir), evaluator={**cfg["evaluator"], **ev_kw},
                   search={"algorithm": "nsga", "pop_size": 40, "offspring": 40,
                           "generations": CO_EVERY * (self.nmax - K) // CO_BATCH})
        _done(run(cfg, self.parts(counted, seed, co_kw)))
        co_ids = [i for e in read_jsonl(run_dir / "coevolution.jsonl") for i in e["picked"]]
        picks = self._picks(run_dir, set(co_ids), cfg["objectives"], self.nmax - len(co_ids))
        counted.train([genome_from_dict(r["genome"]) for r in picks])
        ids = list(dict.fromkeys(co_ids + [r["id"] for r in picks]))
        curve = [self.score(counted.labels, ids[:m], hv) for m in range(CO_BATCH, len(ids) + 1, CO_BATCH)]
        return {"curve": curve, "points": {str(self.nmax): self.score(counted.labels, ids, hv)},
                "coverage": coverage(read_jsonl(run_dir / "pareto.jsonl"), counted.labels)}


def coverage(front: list[dict[str, Any]], labels: dict[str, Any]) -> dict[str, Any]:
    """Of the final front's members with a finite real label and a finite interval: how many lie inside it."""
    rows = [(float(r["metrics"]["loss_lo"]), labels[r["id"]].label, float(r["metrics"]["loss_hi"]))
            for r in front if r["id"] in labels and labels[r["id"]].finite
            and np.isfinite([float(r["metrics"].get("loss_lo", "nan")), float(r["metrics"].get("loss_hi", "nan"))]).all()]
    inside = sum(lo <= y <= hi for lo, y, hi in rows)
    above = sum(y > hi for lo, y, hi in rows)
    return {"front": len(front), "labelled": len(rows), "inside": inside, "above": above}


def table(res: dict[str, Any], arms: Any = ARMS) -> str:
    n = res["n"]
    lines = ["| arm | seeds | labels (new; +340 priors) | real HV at 8 / 16 / N | best real loss at 8 / 16 / N | "
             "front labelled / inside interval / above it |", "|---|---|---|---|---|---|"]
    for arm in arms:
        runs = [r for k, r in res["runs"].items() if k.split("/")[0] == arm]
        if not runs:
            continue
        hv_at = [_ms([r["curve"][j]["hv"] for r in runs if len(r["curve"]) > j]) for j in (0, 1)]
        best_at = [_ms([r["curve"][j]["best_loss"] for r in runs if len(r["curve"]) > j]) for j in (0, 1)]
        pts = [r["points"][str(n)] for r in runs]
        cov = {k: sum(r["coverage"][k] for r in runs) for k in ("labelled", "inside", "above")}
        lines.append(f"| {arm} | {len(runs)} | {n} | {hv_at[0]} / {hv_at[1]} / {_ms([p['hv'] for p in pts])} | "
                     f"{best_at[0]} / {best_at[1]} / {_ms([p['best_loss'] for p in pts])} | {cov['labelled']} / {cov['inside']} / {cov['above']} |")
    return "\n".join(lines)


def main(cls: Any = None, name: str = "closed_loop_acquire", doc: str = __doc__) -> None:
    """Run (resumably) and tabulate the arms of `cls` (an Acquire subclass); checkpointed per arm and seed."""
    cls = cls or Acquire
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n", type=int, default=24, help="new real labels per arm (co-evolution + verify picks)")
    ap.add_argument("--arms", nargs="+", default=list(cls.arms))
    ap.add_argument("--work", type=Path, default=ROOT / "multirun" / f"bench-{name.replace('_', '-')}")
    ap.add_argument("--out", type=Path, default=OUT / f"{name}.json")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args()
    res = json.loads(a.out.read_text()) if a.out.is_file() else {"runs": {}, "n": a.n}
    if not a.table_only:
        import torch

        from search.archive import Hypervolume

        torch.set_num_threads(1)
        b = cls(a.work, res["n"])
        res.setdefault("anchor", b.anchor())
        hv = Hypervolume(res["anchor"], 2.0)
        for seed in a.seeds:
            for arm in a.arms:
                key = f"{arm}/{seed}"
                if key in res["runs"]:
                    continue
                t0 = time.perf_counter()
                res["runs"][key] = b.arm(arm, seed, hv) | {"wall_s": round(time.perf_counter() - t0, 1)}
                atomic_write_text(a.out, json.dumps(res, indent=1))
                r = res["runs"][key]
                print(key, r["points"], r["coverage"], r["wall_s"], "s", flush=True)
    print(table(res, cls.arms))


if __name__ == "__main__":
    main()
