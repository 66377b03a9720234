"""Figures: RESULTS.md "Issue 27: loss side": grouped-CV out-of-fold predictions of every surrogate part.

Five folds of sklearn's GroupKFold over canonical genome ids (surrogate.dataset.group_folds), so a test
fold holds only architectures its models never saw. In every fold, on the other four (validation carve
split off by architecture for the encoder's epoch choice): the hybrid's parts (the Forge-Former+ encoder,
the two rank random forests) and the extra-trees model on per-layer-position fields. Their test-fold
predictions are stored; `bench/grouped_cv_report.py` turns them into metrics, weights, intervals and CIs.

Sized for 2 cores shared by ~7 jobs (load 13-17): the encoder is ONE member of 12 cosine epochs (the shipped
hybrid recipe: 3 members, 60 epochs), 100 extra trees; all folds run at once, one torch thread each.

    .venv/bin/python bench/bench_grouped_cv.py --workers 5 --epochs 12 --et-trees 100
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "grouped_cv_oof.npz"
PARTS = ("encoder", "rf_agg", "rf_full", "et_full")


def encoder_recipe(epochs: int, members: int):
    """The shipped hybrid's encoder recipe (conf/surrogate/forgeformer-hybrid.yaml) without forests or stretch."""
    from omegaconf import OmegaConf

    from forge.runtime.config import conf_dir
    from surrogate.training import Recipe

    cfg = OmegaConf.to_container(OmegaConf.load(conf_dir() / "surrogate" / "forgeformer-hybrid.yaml"))
    cfg = {k: v for k, v in cfg.items() if k in Recipe.__dataclass_fields__}
    return replace(Recipe(**cfg), epochs=epochs, n_members=members, forests=False, calibrate=False, workers=1)


def fold_job(data, fold: np.ndarray, f: int, seed: int, epochs: int, members: int, et_trees: int) -> dict:
    """Every part fit on the rows outside fold f, predicting fold f."""
    from surrogate.dataset import split_ids
    from surrogate.fit import train_forgeformer
    from surrogate.trees import RankForest, fit_forests, forests_predict, tree_views

    t0 = time.perf_counter()
    train_all, test = data.take(np.flatnonzero(fold != f)), data.take(np.flatnonzero(fold == f))
    tr, va = split_ids(train_all.ids, 0.1, seed + 7919 + f)
    train, val = train_all.take(tr), train_all.take(va)
    enc = train_forgeformer(train, val, replace(encoder_recipe(epochs, members), seed=seed + f))
    t_enc = time.perf_counter() - t0
    rf = fit_forests(train, val, 100, seed + f, 40)
    X = tree_views(train_all.genomes, 40)
    et = RankForest.fit(train_all.genomes, train_all.y, "full", et_trees, seed + f + 2, 40, X["full"], kind="et")
    Xt = tree_views(test.genomes, 40)
    preds = {"encoder": enc.predict(test.genomes)[0],
             "rf_agg": forests_predict(rf[:1], test.genomes), "rf_full": forests_predict(rf[1:], test.genomes),
             "et_full": et.predict(test.genomes, Xt["full"])}
    res = {"fold": f, "rows": np.flatnonzero(fold == f), "preds": preds,
           "fit_s": {"encoder": round(t_enc, 1), "trees": round(time.perf_counter() - t0 - t_enc, 1)}}
    np.savez(OUT.with_name(f"grouped_cv_part{f}.npz"), rows=res["rows"], **preds)  # kept if a later fold dies
    return res


def main() -> None:
    from forge.disk.io import shared_data_dir
    from forge.runtime.parallel import map_spawned
    from surrogate.dataset import duplicate_groups, group_folds, load_labelset

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--members", type=int, default=1)
    ap.add_argument("--et-trees", type=int, default=100)
    ap.add_argument("--workers", type=int, default=5)
    a = ap.parse_args()
    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    fold = group_folds(data.ids, a.folds, a.seed)
    t0 = time.perf_counter()
    jobs = [(data, fold, f, a.seed, a.epochs, a.members, a.et_trees) for f in range(a.folds)]
    res = map_spawned(fold_job, jobs, a.workers)
    oof = {p: np.zeros(len(data)) for p in PARTS}
    for r in res:
        for p in PARTS:
            oof[p][r["rows"]] = r["preds"][p]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, ids=np.array(data.ids), fold=fold, **oof)  # no labels: they stay in ../shared (re-read by id)
    meta = {"command": f".venv/bin/python bench/bench_grouped_cv.py --workers {a.workers} --epochs "
                       f"{a.epochs} --members {a.members} --et-trees {a.et_trees} --folds {a.folds} --seed {a.seed}",
            "duplicates": duplicate_groups(data.ids), "dropped": data.dropped, "wall_s": round(time.perf_counter() - t0, 1),
            "fit_s": [r["fit_s"] for r in res], "sized_down": f"encoder: {a.members} member(s), {a.epochs} epochs "
                                                               "(shipped hybrid: 3 members, 60 epochs)"}
    OUT.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main()
