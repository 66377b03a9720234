"""Surrogate speed: predict (48 genomes × 10 MC passes) and paper-recipe training time.

    .venv/bin/python bench/bench_surrogate.py predict [--ckpt forgeformer-iha-paper] [--threads 2]
    .venv/bin/python bench/bench_surrogate.py train --epochs 200 [--threads 2]
    .venv/bin/python bench/bench_surrogate.py budgets --recipe forgeformer --epochs 100 --out X.json

`budgets` is the epoch-budget / ensemble-size study on the compare splits: with a constant learning
rate a run of E epochs contains every shorter run as a prefix, so the best-validation epoch within a
budget b is exactly what a b-epoch run selects (checked: b=40 reproduces the compare run). Each
member's test predictions are stored so ensembles of any size are scored afterwards (mean of members).

Training uses the first ~1,400 rows of a seeded 80/20 split of the shared LLMForge CSV (the issue's
"200 epochs on about 1,400 rows") with the exact paper recipe (raw targets, lr 1e-4, batch 32).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def bench_predict(ckpt: str, n: int, n_mc: int, reps: int) -> dict:
    from forge.space import load_space
    from surrogate.predictor import load_predictor

    p = load_predictor(ckpt)
    genomes = load_space(p.space["name"]).sample(n, np.random.default_rng(0))
    p.predict(genomes, n_mc=n_mc)  # warm-up
    times = {}
    for mc in (0, n_mc):
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            p.predict(genomes, n_mc=mc)
            ts.append((time.perf_counter() - t) * 1e3)
        times[f"n_mc={mc}"] = {"median_ms": round(statistics.median(ts), 2), "min_ms": round(min(ts), 2)}
    return {"ckpt": ckpt, "members": len(p.members), "n_genomes": n, **times}


def bench_train(epochs: int, seed: int) -> dict:
    from forge.io import shared_data_dir
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.fit import train_forgeformer
    from surrogate.metrics import evaluate
    from surrogate.training import Recipe

    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    train, val, test = train_val_test(data, seed)
    t = time.perf_counter()
    p = train_forgeformer(train, val, Recipe(epochs=epochs, seed=seed))
    wall = time.perf_counter() - t
    m = evaluate(test.y, p.predict(test.genomes)[0])
    return {"epochs": epochs, "n_train": len(train), "n_val": len(val), "wall_s": round(wall, 1),
            "s_per_epoch": round(wall / epochs, 2), "best_epoch": p.meta["members"][0]["best_epoch"],
            "test": {k: round(v, 4) for k, v in m.items()}}


def _member(cfg, recipe, tr, va, seed, y_std):
    from surrogate.forgeformer import FFModule
    from surrogate.training import BucketBatches, _tensors, _trainer

    class Snap(FFModule):
        def validation_step(self, batch, idx):
            prev = self.best_epoch
            super().validation_step(batch, idx)
            if self.best_epoch != prev:
                self.snaps = getattr(self, "snaps", []) + [(self.best_epoch, copy.deepcopy(self.best_state))]

    torch.manual_seed(seed)
    module = Snap(cfg, recipe.lr, recipe.weight_decay, recipe.rank_weight, y_std)
    tl = DataLoader(TensorDataset(*_tensors(*tr)), batch_sampler=BucketBatches(tr[1].sum(axis=1), recipe.batch, seed))
    vl = DataLoader(TensorDataset(*_tensors(*va)), batch_size=len(va[2]))
    _trainer(recipe.epochs, True).fit(module, tl, vl)
    return module


def bench_budgets(recipe_name: str, epochs: int, budgets: list[int], members: list[int], splits: list[int], out: Path,
        ship_dir: Path | None) -> None:
    from forge.io import atomic_write_json, shared_data_dir
    from surrogate.compare import model_config
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.features import MinMax, featurize, field_names
    from surrogate.fit import _arrays
    from surrogate.forgeformer import FFConfig, ForgeFormer
    from surrogate.predictor import ForgeFormerPredictor, _space_of
    from surrogate.training import Recipe

    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    conf = {k: v for k, v in dict(model_config(recipe_name)).items() if k != "_target_"}
    res = json.loads(out.read_text()) if out.is_file() else {"recipe": recipe_name, "epochs": epochs, "runs": []}
    for k in members:
        for s in splits:
            train, val, test = train_val_test(data, s, 0.2)
            recipe = Recipe(**{**conf, "epochs": epochs, "seed": s, "n_members": 1})
            cfg = FFConfig(n_fields=len(field_names(recipe.field_set)))
            norm = MinMax.fit(featurize(train.genomes, recipe.field_set, 40))
            ym, ys = (float(train.y.mean()), float(train.y.std())) if recipe.standardize else (0.0, 1.0)
            args = (norm, recipe.field_set, 40, ym, ys)
            tr, va, te = (_arrays(None, d, *args) for d in (train, val, test))
            t0 = time.perf_counter()
            mod = _member(cfg, recipe, tr, va, s + k, ys)
            row = {"split": s, "member": k, "fit_s": round(time.perf_counter() - t0, 1), "y_test": test.y.tolist(),
                   "val_curve": [round(v, 5) for v in mod.history], "by_budget": {}}
            for b in budgets:
                ep, state = [x for x in mod.snaps if x[0] < b][-1]
                m = ForgeFormer(cfg)
                m.load_state_dict(state)
                m.eval()
                p = ForgeFormerPredictor([m], norm, recipe.field_set, _space_of(train, "iha-paper", 40), ym, ys, {})
                row["by_budget"][str(b)] = {"best_epoch": ep, "pred": p.predict(test.genomes)[0].tolist()}
                if ship_dir is not None and s == 0:
                    torch.save(state, ship_dir / f"{recipe_name}-b{b}-m{k}.pt")
            res["runs"].append(row)
            atomic_write_json(out, res)
            print(recipe_name, "split", s, "member", k, row["fit_s"], "s", flush=True)

def budgets_table(files: list[Path], member_sets: list[list[int]]) -> list[dict]:
    """Score ensembles (mean of member predictions) per epoch budget over the splits that have every member."""
    from surrogate.metrics import evaluate, summarize

    runs = [r for f in files if f.is_file() for r in json.loads(f.read_text())["runs"]]
    by = {(r["split"], r["member"]): r for r in runs}
    budgets = sorted({int(b) for r in runs for b in r["by_budget"]})
    rows = []
    for ms in member_sets:
        for b in budgets:
            splits = sorted({s for s, _ in by if all((s, m) in by for m in ms)})
            if not splits:
                continue
            res = [evaluate(np.asarray(by[(s, ms[0])]["y_test"]),
                            np.mean([by[(s, m)]["by_budget"][str(b)]["pred"] for m in ms], axis=0)) for s in splits]
            eps = [by[(s, m)]["by_budget"][str(b)]["best_epoch"] for s in splits for m in ms]
            rows.append({"members": ms, "budget": b, "splits": splits, "best_epochs": eps, "summary": summarize(res)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["predict", "train", "budgets", "budgets-table"])
    ap.add_argument("--ckpt", default="forgeformer-iha-paper")
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--n-mc", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--recipe", default="forgeformer")
    ap.add_argument("--budgets", default="40,60,80,100")
    ap.add_argument("--members", default="0")
    ap.add_argument("--splits", default="0,1,2,3,4")
    ap.add_argument("--out", default="")
    ap.add_argument("--ship-dir", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.what == "budgets-table":  # --out a.json,b.json --members "0;0,1,2;0,1,2,3,4"
        sets = [[int(x) for x in s.split(",")] for s in a.members.split(";")]
        print(json.dumps(budgets_table([Path(f) for f in a.out.split(",")], sets), indent=1))
        return
    if a.what == "budgets":
        ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
        sd = Path(a.ship_dir) if a.ship_dir else None
        if sd:
            sd.mkdir(parents=True, exist_ok=True)
        bench_budgets(a.recipe, a.epochs, ints(a.budgets), ints(a.members), ints(a.splits), Path(a.out), sd)
        return
    res = bench_predict(a.ckpt, a.n, a.n_mc, a.reps) if a.what == "predict" else bench_train(a.epochs, a.seed)
    print(json.dumps({"threads": a.threads, **res}, indent=1))


if __name__ == "__main__":
    main()
