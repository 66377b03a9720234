"""Issue 27 §4: the closed loop with every real label counted (priors, warm start, seed spread, K targets).

    nice -n 15 .venv/bin/python bench/bench_closed_loop_priors.py   # store in ../loop-store; then --table-only

The shipped tiny surrogate was fitted on the 340 cpu-proxy labels of data/labels/iha-tiny-cpu-proxy.jsonl, so
a user without them pays 340 labels before Forge's first search. Here every arm's x is TOTAL real labels:
  forge (bench_closed_loop.py runs, re-used)   340 + N; its best loss with the priors added (closed_loop_report.py)
  warm   NSGA-II on real training whose initial population (16) is the best of the 340 priors by non-dominated
         rank on (real loss, steering TPOT), read from the shipped file at no cost, then 8 offspring a generation
         really trained: 340 + N
  random, nsga-real (cold)                     N (they use no prior)
Tasks (each checkpointed in bench/results/closed_loop_priors.json, so a kill loses nothing):
  spread   8 prior genomes (4 best, 4 drawn) retrained with protocol seeds 1 and 2 (16 labels): per-label std
  warm/<s>@<N>   the warm arm, seed s, up to N new labels (resumed generation by generation)
  multi-forge/<s>, multi-warm/<s>   K = 4 targets (closed_loop_targets.py), N_TARGET new labels per target per arm; forge: NSGA-II on the fixed
         tiny surrogate, then its verify front picks; warm: as above, N_TARGET offspring; one shared
         store: the same genome is paid once across targets; total = 340 + distinct new genomes over targets.
One store (--work/labels.db) pre-seeded with the 340 priors; one training worker; TPOT measured as
bench_closed_loop.py (cpu-measured, 1 thread, median of 3).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench_closed_loop import OUT, WORKLOAD, Bench, base_cfg
from closed_loop_targets import TARGETS, Target
from forge.disk.io import atomic_write_text

PRIORS = "labels/iha-tiny-cpu-proxy.jsonl"
POP, OFF = 16, 8  # warm arm: 16 priors, 8 offspring a generation
N_TARGET = 4      # multi-target: new labels per target per arm
SPREAD_SEEDS = (1, 2)
HOST = "host-cpu-measured"  # the single-target experiment's target
ROOT_STORE = Path(__file__).resolve().parent.parent.parent / "loop-store"  # outside git


class Loop(Bench):
    """Bench plus the priors: the store is pre-seeded with them and every score may include them."""

    def __init__(self, work: Path):
        from forge.runtime.config import data_dir
        from forge.genomes.labels import read_labels

        super().__init__(work, [OFF])
        path = data_dir() / PRIORS
        self.store.import_jsonl(path)  # (new, present): idempotent
        self.priors = [lab for lab in read_labels(path) if lab.finite]
        self.prior_ids = {lab.genome_id for lab in self.priors}
        self.targets = {name: Target(name, spec, self) for name, spec in TARGETS.items()}

    def labels_of(self, genomes: list) -> dict[str, Any]:
        """Labels of genomes already trained (a store hit costs nothing); seed-0 protocol."""
        return {lab.genome_id: lab for lab in self.trainer.train(genomes)}

    # ------------------------------------------------------------ per-label seed spread
    def spread(self) -> dict[str, Any]:
        from search.components import build_trainer

        best = sorted(self.priors, key=lambda lab: lab.label)[:4]
        rest = [lab for lab in self.priors if lab not in best]
        drawn = [rest[i] for i in np.random.default_rng(0).choice(len(rest), 4, replace=False)]
        rows = {lab.genome_id: [float(lab.label)] for lab in best + drawn}
        for s in SPREAD_SEEDS:
            cfg = base_cfg("iha-tiny", 0, self.work)
            cfg["protocol"] = {**cfg["protocol"], "seed": s}
            trainer = build_trainer(cfg, None, self.work / "labels.db")
            for lab in trainer.train([lab.genome for lab in best + drawn]):
                rows[lab.genome_id].append(float(lab.label))
        std = {i: float(np.std(v, ddof=1)) for i, v in rows.items()}
        return {"labels": rows, "std": std, "mean_std": float(np.mean(list(std.values()))),
                "pooled_std": float(np.sqrt(np.mean(np.square(list(std.values()))))),
                "best4": [lab.genome_id for lab in best]}

    # ------------------------------------------------------------ warm-started NSGA-II on real training
    def warm_pop(self, target: Target) -> list:
        """The POP best priors by non-dominated rank on (real loss, steering cost), ties by loss."""
        from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

        F = np.column_stack([[lab.label for lab in self.priors], target.steer([lab.genome for lab in self.priors])])
        rank = np.empty(len(F), int)
        for r, front in enumerate(NonDominatedSorting().do(F)):
            rank[front] = r
        order = np.lexsort((F[:, 0], rank))[:POP]
        return [self.priors[i].genome for i in order]

    def warm(self, seed: int, target: Target, n_new: int, off: int = OFF) -> list[str]:
        """Run (or resume) the warm arm to n_new new labels, `off` offspring a generation; the new genome ids in the
        order they were trained (the first n_new: a generation may train more, then the rest are not counted)."""
        from search.evaluators import TrainEvaluator
        from search.build import build_search
        from search.runner import CHECKPOINT
        from search.state import read_jsonl

        run_dir = self.work / "runs" / (f"warm-{target.name}-{seed}" + (f"-off{off}" if off != OFF else ""))
        c = {**base_cfg("iha-tiny", seed, self.work), **target.search_cfg(), "evaluator": {"kind": "train"},
             "search": {"algorithm": "nsga", "pop_size": POP, "offspring": off, "generations": 400 // off}}
        space, backend = target.space, target.backend
        s = build_search(c, run_dir, {"space": space, "evaluator": TrainEvaluator(self.trainer), "backend": backend,
                                      "workload": target.workload, "coevolution": None})
        if (run_dir / CHECKPOINT).exists():
            s.load()
        else:
            run_dir.mkdir(parents=True, exist_ok=True)
            s.algo.initialization.sampling = space.encode(self.warm_pop(target))
        gens = -(-n_new // off)
        if s.gen < gens:
            from bench_closed_loop import _done

            _done(s.run(stop_after=gens))
        rows = read_jsonl(run_dir / "archive.jsonl")
        new = [r["id"] for r in rows if r["generation"] >= 1 and r["id"] not in self.prior_ids]
        return list(dict.fromkeys(new))[:n_new]

    # ------------------------------------------------------------ multi-target
    def forge_picks(self, seed: int, target: Target) -> list[str]:
        """Forge on one target with the fixed tiny surrogate (no co-evolution): N_TARGET verify picks, trained."""
        from bench_closed_loop import _done
        from forge.genomes.genome import genome_from_dict
        from search.cli import run

        run_dir = self._fresh(f"multi-forge-{target.name}-{seed}")
        cfg = {**base_cfg("iha-tiny", seed, self.work), **target.search_cfg(), "out_dir": str(run_dir),
               "search": {"algorithm": "nsga", "pop_size": 40, "offspring": 40, "generations": 20}}
        _done(run(cfg, {"coevolution": None}))
        picks = self._picks(run_dir, set(), cfg["objectives"], N_TARGET)[:N_TARGET]
        genomes = [genome_from_dict(r["genome"]) for r in picks]
        self.trainer.train(genomes)
        return [g.id for g in genomes]

    def multi(self, seed: int, arm: str) -> dict[str, Any]:
        """Every target searched by one arm; each target scored on priors + everything this seed bought."""
        bought: dict[str, list[str]] = {}
        for t in self.targets.values():
            # warm on host-cpu: the first N_TARGET offspring of the single-target warm run (8 a generation)
            off = OFF if t.name == HOST else N_TARGET
            bought[t.name] = self.forge_picks(seed, t) if arm == "forge" else self.warm(seed, t, N_TARGET, off)
        new = list(dict.fromkeys(i for ids in bought.values() for i in ids if i not in self.prior_ids))
        genomes = self.genomes_of(new)
        labs = list(self.priors) + [lab for lab in self.labels_of(genomes).values()]
        return {"bought": bought, "new": len(new), "total": len(self.priors) + len(new),
                "per_target_new": {k: len([i for i in v if i not in self.prior_ids]) for k, v in bought.items()},
                "scores": {t.name: t.score(labs) for t in self.targets.values()}}

    def genomes_of(self, ids: list[str]) -> list:
        """Genomes by id from the store (any run's label of them)."""
        found = {lab.genome_id: lab.genome for lab in self.store.labels() if lab.genome_id in set(ids)}
        return [found[i] for i in ids]


def run_tasks(loop: Loop, tasks: list[str], res: dict[str, Any], out: Path) -> None:
    """Each task once (its key in res['runs'] means done); the file is rewritten atomically after each."""
    host = loop.targets[HOST]
    for task in tasks:
        if task in res["runs"]:
            continue
        t0, n0 = time.perf_counter(), len(loop.store)
        if task == "spread":
            r = loop.spread()
        elif task.startswith("warm/"):
            seed, n = map(int, task.split("/")[1].split("@"))
            ids = loop.warm(seed, host, n)
            labs = loop.labels_of(loop.genomes_of(ids))
            own = [labs[i] for i in ids]
            r = {"new_ids": ids, "total": len(loop.priors) + len(ids), "paid": host.score(loop.priors + own),
                 "own": host.score(own)}
        else:
            arm, seed = task.split("/")
            r = loop.multi(int(seed), arm.removeprefix("multi-"))
        r |= {"wall_s": round(time.perf_counter() - t0, 1), "store_new": len(loop.store) - n0}
        res["runs"][task] = r
        atomic_write_text(out, json.dumps(res, indent=1))
        print(task, r.get("total"), r["wall_s"], "s", r["store_new"], "new labels in store", flush=True)


def default_tasks(seeds: list[int], budgets: list[int]) -> list[str]:
    """Cheapest certain figures first: spread, warm at the first budget, multi-target, then the warm curve."""
    first = [f"warm/{s}@{budgets[0]}" for s in seeds]
    multi = [f"multi-{a}/{s}" for s in seeds for a in ("forge", "warm")]
    rest = [f"warm/{s}@{n}" for n in budgets[1:] for s in seeds]
    return ["spread", *first, *multi, *rest]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 16, 24, 32, 48])
    ap.add_argument("--tasks", nargs="+", help="default: spread, warm, multi-target, then the warm curve")
    ap.add_argument("--work", type=Path, default=ROOT_STORE)
    ap.add_argument("--out", type=Path, default=OUT / "closed_loop_priors.json")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args()
    res = json.loads(a.out.read_text()) if a.out.is_file() else {"runs": {}}
    if not a.table_only:
        import torch

        torch.set_num_threads(1)
        loop = Loop(a.work)
        res.update(workload=WORKLOAD, pop=POP, offspring=OFF, n_target=N_TARGET, targets=TARGETS)
        res["anchor_cost"] = {t.name: t.anchor_cost for t in loop.targets.values()}  # this session's
        res["prior_front"] = {t.name: t.score(loop.priors) for t in loop.targets.values()}
        atomic_write_text(a.out, json.dumps(res, indent=1))
        run_tasks(loop, a.tasks or default_tasks(a.seeds, a.budgets), res, a.out)
    from closed_loop_report import report

    print(report(res, json.loads((OUT / "closed_loop.json").read_text()), a.out.with_suffix(".png")))

if __name__ == "__main__":
    main()
