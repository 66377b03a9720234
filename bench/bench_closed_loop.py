"""Issue 21 §4: does Forge's search beat real-training search at an equal budget of real labels?

    nice -n 10 .venv/bin/python bench/bench_closed_loop.py --seeds 0 1 2        # then --table-only

iha-tiny, cpu-proxy labels (stdlib corpus, the shipped protocol unchanged), host-CPU cost. Arms, each
spending N real labels (N = 48 and 96; the 96 run reports its 48-label point):
  forge      NSGA-II (pop 40) + the shipped tiny surrogate + co-evolution (8 labels every 2 generations), then
             the forge-verify front picks (search.picks, k = 8, among front members not yet labelled), topped
             up by the lowest predicted loss where co-evolution found fewer than 8 new genomes an event, so
             N = co-evolution labels + picks exactly
  random     N random genomes, really trained: drawn (seeded) from the shipped pool of 340 random iha-tiny
             genomes labelled under the same protocol and corpus hash (data/labels), so they cost no CPU here
  nsga-real  NSGA-II with every candidate really trained (pop 16, 16 offspring a generation, 5 generations)
  forge-gqa  forge on gqa-tiny (conf/space/gqa-tiny.yaml)
Searches steer on the host-cpu roofline's predicted TPOT (cheap); every arm is scored on what it really
labelled: the non-dominated set in (real loss, TPOT measured by backend=cpu-measured) and its hypervolume,
normalized as the searches do (each objective divided by the GPT-2-style anchor genome's real value, reference
point 2.0), plus the best real loss. One label store is shared by all arms (same genome = same label).
Results (checkpointed after every arm and seed) go to bench/results/closed_loop.json and closed_loop.png.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from forge.disk.io import atomic_write_text

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results"
K, CO_BATCH, CO_EVERY = 8, 8, 2
# issue 53: the forge arm with other operators (`forge` runs the shipped default: SBX + the paper's mutation)
OPS = {"stock": {"crossover": "sbx", "mutation": "pm"},  # pymoo's integer recipe
       "paper": {"crossover": "layer", "mutation": "llmforge"}}  # LLMForge's (the default before issue 53)
MEASURE = {"_target_": "backends.host.CpuMeasuredBackend", "name": "cpu-measured", "threads": 1, "warmup": 1,
           "repeats": 3}
WORKLOAD = {"prefill": 64, "decode": 32, "weight_bits": 32, "act_bits": 32, "kv_bits": 32}


class Counted:
    """Wraps the shared trainer: the distinct genomes this arm asked for, in order (= labels spent)."""

    def __init__(self, inner: Any):
        self.inner, self.ids, self.labels = inner, [], {}

    def train(self, genomes):
        labs = self.inner.train(genomes)
        for g, lab in zip(genomes, labs):
            if g.id not in self.labels:
                self.ids.append(g.id)
                self.labels[g.id] = lab
        return labs


def base_cfg(space: str, seed: int, work: Path) -> dict[str, Any]:
    from forge.runtime.config import group_yaml
    from search.suggest import allow_blind

    blind = allow_blind(space, "forgeformer-iha-tiny")  # gqa-tiny's 128-wide heads (issue 43 §5): blind
    return {"seed": seed, "space": space, "objectives": ["val_loss", "tpot_ms"], "constraints": ["val_loss < 10"],
            "backend": {"_target_": "backends.gpu.roofline.RooflineBackend", "name": "roofline", "hardware": "host-cpu"},
            "workload": dict(WORKLOAD), "protocol": group_yaml("protocol", "cpu-proxy"),
            "corpus": group_yaml("corpus", "stdlib"), "dispatch": {**group_yaml("dispatch", "local"), "workers": 1},
            "evaluator": {"kind": "surrogate", "predictor": "forgeformer-iha-tiny", "allow_blind": blind},
            "progress": False,
            "threads": 1, "hv": {"anchor": "auto"}}


class Bench:
    def __init__(self, work: Path, budgets: list[int]):
        from forge.labelling.store import LabelStore
        from search.components import backend_of, build_trainer

        self.work, self.budgets, self.nmax = work, budgets, max(budgets)
        work.mkdir(parents=True, exist_ok=True)
        self.trainer = build_trainer(base_cfg("iha-tiny", 0, work), None, work / "labels.db")
        self.store = LabelStore(work / "labels.db")
        self.meter = backend_of({"backend": MEASURE})
        self.cache_path = work / "measured.json"
        self.tpot = json.loads(self.cache_path.read_text()) if self.cache_path.is_file() else {}
        self.genomes: dict[str, Any] = {}

    # ------------------------------------------------------------ scoring
    def measured(self, genomes: list) -> np.ndarray:
        from backends.interface import Workload

        todo = [g for g in {g.id: g for g in genomes}.values() if g.id not in self.tpot]
        if todo:
            t = self.meter.evaluate(todo, Workload(**WORKLOAD))
            self.tpot.update({g.id: float(v) for g, v in zip(todo, t.tpot_ms)})
            self.cache_path.write_text(json.dumps(self.tpot))
        return np.array([self.tpot[g.id] for g in genomes])

    def anchor(self) -> list[float]:
        from forge.spaces.space import load_space
        from search.archive import default_anchor

        g = default_anchor(load_space("iha-tiny"))
        return [float(self.trainer.train([g])[0].label), float(self.measured([g])[0])]

    def score(self, labels: dict[str, Any], ids: list[str], hv: Any) -> dict[str, Any]:
        """Real front of the genomes `ids` in (real loss, measured TPOT): HV and best real loss."""
        labs = [labels[i] for i in ids if labels[i].finite]
        if not labs:
            return {"labels": len(ids), "hv": 0.0, "best_loss": None, "front": []}
        F = np.column_stack([[lab.label for lab in labs], self.measured([lab.genome for lab in labs])])
        from search.archive import non_dominated

        front = non_dominated(F)
        return {"labels": len(ids), "hv": hv(F), "best_loss": float(F[:, 0].min()),
                "front": [[labs[i].genome_id, *map(float, F[i])] for i in front]}

    # ------------------------------------------------------------ arms
    def random(self, seed: int, hv: Any) -> dict[str, Any]:
        from forge.runtime.config import data_dir
        from forge.genomes.labels import read_labels

        pool = list(read_labels(data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl"))
        idx = np.random.default_rng(seed).choice(len(pool), self.nmax, replace=False)
        labels = {pool[i].genome_id: pool[i] for i in idx}
        ids = [pool[i].genome_id for i in idx]
        curve = [self.score(labels, ids[:n], hv) for n in range(8, self.nmax + 1, 8)]
        return {"curve": curve, "points": {str(n): self.score(labels, ids[:n], hv) for n in self.budgets}}

    def nsga_real(self, seed: int, hv: Any) -> dict[str, Any]:
        from search.cli import run
        from search.evaluators import TrainEvaluator

        counted = Counted(self.trainer)
        gens = (self.nmax - 16) // 16
        cfg = {**base_cfg("iha-tiny", seed, self.work), "evaluator": {"kind": "train"},
               "search": {"algorithm": "nsga", "pop_size": 16, "offspring": 16, "generations": gens},
               "out_dir": str(self._fresh(f"nsga-real-{seed}"))}
        _done(run(cfg, {"evaluator": TrainEvaluator(counted), "coevolution": None}))
        ids = counted.ids
        curve = [self.score(counted.labels, ids[:n], hv) for n in range(16, len(ids) + 1, 16)]
        return {"curve": curve, "points": {str(n): self.score(counted.labels, ids[:n], hv) for n in self.budgets}}

    def forge(self, seed: int, hv: Any, space: str = "iha-tiny", ops: dict[str, Any] | None = None,
              name: str = "forge") -> dict[str, Any]:
        from search.cli import run
        from search.coevolution import CoEvolution, replay_labels
        from search.state import read_jsonl
        from surrogate.fit import finetune
        from surrogate.loading import load_predictor

        counted, run_dir = Counted(self.trainer), self._fresh(f"{name}-{space}-{seed}")
        gens = CO_EVERY * (self.nmax - K) // CO_BATCH
        cfg = {**base_cfg(space, seed, self.work), "out_dir": str(run_dir),
               "search": {"algorithm": "nsga", "pop_size": 40, "offspring": 40, "generations": gens, **(ops or {})}}

        def coevo():
            return CoEvolution(CO_EVERY, counted, finetune, "forgeformer-iha-tiny",
                               replay_labels("labels/iha-tiny-cpu-proxy.jsonl", "iha-tiny"), batch=CO_BATCH,
                               n_mc=10, seed=seed, load=load_predictor)

        points, curve, spent = {}, [], 0
        for n in sorted(self.budgets):
            stop = CO_EVERY * (n - K) // CO_BATCH
            resume = {"resume": str(run_dir)} if spent else {}
            _done(run({**cfg, "stop_after": stop, **resume}, {"coevolution": coevo()}))
            co_ids = [i for e in read_jsonl(run_dir / "coevolution.jsonl") for i in e["picked"]]
            picks = self._picks(run_dir, set(co_ids), cfg["objectives"], n - len(co_ids))
            from forge.genomes.genome import genome_from_dict

            counted.train([genome_from_dict(r["genome"]) for r in picks])
            curve += [self.score(counted.labels, co_ids[:m], hv) for m in range(spent + CO_BATCH, len(co_ids) + 1,
                                                                               CO_BATCH)]
            ids = list(dict.fromkeys(co_ids + [r["id"] for r in picks]))
            points[str(n)] = self.score(counted.labels, ids, hv) | {"verified_picks": len(picks)}
            spent = len(co_ids)
        return {"curve": curve, "points": points}

    @staticmethod
    def _picks(run_dir: Path, labelled: set[str], objectives: list[str], n: int) -> list[dict[str, Any]]:
        """n >= K verify picks: front_picks among the front members co-evolution has not labelled, topped up
        with the lowest predicted loss among the other evaluated feasible genomes (budget spent exactly)."""
        from search.picks import front_picks
        from search.state import read_jsonl

        front = [r for r in read_jsonl(run_dir / "pareto.jsonl") if r["id"] not in labelled]
        picks = [r for _, r in front_picks(front, objectives, K)] if front else []
        taken = labelled | {r["id"] for r in picks}
        rest = {r["id"]: r for r in read_jsonl(run_dir / "archive.jsonl") if r["feasible"] and r["id"] not in taken}
        fill = sorted(rest.values(), key=lambda r: float(r["metrics"]["val_loss"]))[:max(n, K) - len(picks)]
        return picks + fill

    def _fresh(self, name: str) -> Path:
        d = self.work / "runs" / name
        shutil.rmtree(d, ignore_errors=True)
        return d


def _done(summary: dict[str, Any]) -> None:
    """A search stopped by SIGTERM returns 'interrupted': stop here too, so no partial arm is recorded."""
    if summary["status"] == "interrupted":
        raise KeyboardInterrupt


def _ms(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    return f"{np.mean(xs):.4f} ± {np.std(xs):.4f}" if xs else "–"


def table(res: dict[str, Any]) -> str:
    """Markdown: per arm and budget, labels spent, real HV and best real loss (mean ± std over seeds)."""
    lines = ["| arm | N | seeds | labels spent | real HV (loss, measured TPOT) | best real loss |",
             "|---|---|---|---|---|---|"]
    arms = list(dict.fromkeys(k.split("/")[0] for k in res["runs"]))
    for arm in arms:
        for n in res.get("budgets", [48, 96]):
            pts = [r["points"][str(n)] for k, r in res["runs"].items() if k.split("/")[0] == arm and str(n) in r["points"]]
            if pts:
                lines.append(f"| {arm} | {n} | {len(pts)} | {np.mean([p['labels'] for p in pts]):.0f} | "
                             f"{_ms([p['hv'] for p in pts])} | {_ms([p['best_loss'] for p in pts])} |")
    return "\n".join(lines)


def _on_grid(run: dict[str, Any], grid: np.ndarray) -> np.ndarray:
    """A run's real HV at each labels count of `grid`: its last curve or budget point at or below it (the HV of a
    growing labelled set never falls)."""
    pts = sorted([(p["labels"], p["hv"]) for p in run["curve"] + list(run["points"].values())])
    return np.array([max([h for n, h in pts if n <= x], default=np.nan) for x in grid])


def plot(res: dict[str, Any], path: Path) -> None:
    """Real HV against labels spent: mean over seeds per arm on a common grid of 8 labels, ± std band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.arange(8, max(res.get("budgets", [96])) + 1, 8)
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in dict.fromkeys(k.split("/")[0] for k in res["runs"]):
        Y = np.array([_on_grid(r, grid) for k, r in res["runs"].items() if k.split("/")[0] == arm])
        m, sd = np.nanmean(Y, 0), np.nanstd(Y, 0)
        ax.plot(grid, m, marker="o", ms=3, label=f"{arm} ({len(Y)} seeds)")
        ax.fill_between(grid, m - sd, m + sd, alpha=0.2)
    ax.set_xlabel("real labels spent")
    ax.set_ylabel("real HV (real loss, measured TPOT)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budgets", type=int, nargs="+", default=[48, 96])
    ap.add_argument("--arms", nargs="+", default=["random", "forge", "nsga-real", "forge-gqa"])
    ap.add_argument("--work", type=Path, default=ROOT / "multirun" / "bench-closed-loop")
    ap.add_argument("--out", type=Path, default=OUT / "closed_loop.json")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args()
    res = json.loads(a.out.read_text()) if a.out.is_file() else {"runs": {}}
    if not a.table_only:
        import torch

        from search.archive import Hypervolume

        torch.set_num_threads(1)
        b = Bench(a.work, a.budgets)
        if "anchor" not in res:  # trains and measures the anchor genome: once
            res["anchor"] = b.anchor()
        hv = Hypervolume(res["anchor"], 2.0)
        res.update(budgets=a.budgets, measure=MEASURE, workload=WORKLOAD)
        arms = {"random": b.random, "forge": b.forge, "nsga-real": b.nsga_real,
                "forge-gqa": lambda s, h: b.forge(s, h, "gqa-tiny"),
                **{f"forge-{k}": (lambda s, h, k=k: b.forge(s, h, ops=OPS[k], name=f"forge-{k}")) for k in OPS}}
        for seed in a.seeds:
            for arm in a.arms:
                key = f"{arm}/{seed}"
                if key in res["runs"]:
                    continue
                t0 = time.perf_counter()
                res["runs"][key] = arms[arm](seed, hv) | {"wall_s": round(time.perf_counter() - t0, 1)}
                atomic_write_text(a.out, json.dumps(res, indent=1))
                print(key, {n: (p["labels"], round(p["hv"], 4), p["best_loss"]) for n, p in res["runs"][key]["points"].items()},
                      res["runs"][key]["wall_s"], "s", flush=True)
    print(table(res))
    plot(res, a.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
