"""Figures: RESULTS.md "Issue 26: attention window" (tiny surrogate): does a Forge-Former that sees the window
gene rank windowed tiny genomes better than the window-blind ones?

Labels: the 340 shipped `iha-tiny` cpu-proxy labels plus the `iha-tiny-swa` ones (data/labels/). Two views:

- `cv` (default): five folds of sklearn's GroupKFold over canonical genome ids (surrogate.dataset.group_folds),
  so a test fold holds only architectures its models never saw. In every fold the conf/surrogate/forgeformer.yaml
  recipe is fitted twice on the other four folds, with field set `paper+window` and `paper` (window-blind, same
  rows, same seed); the shipped window-blind `forgeformer-iha-tiny` (trained on iha-tiny labels only, so every
  windowed genome is unseen) predicts the same rows. Metrics on the windowed out-of-fold rows (a genome with at
  least one active attention layer whose window is > 0).
- `twins --write FILE`: a genome file for `forge-label genomes=FILE`: 12 labelled iha-tiny genomes (seeded pick,
  at least two active attention layers) with every attention layer's window set to 32. Same parameters, same
  initialisation and data order (the protocol's fixed seed), so label(twin) − label(original) is what the windows
  cost in measured loss; `cv` compares it with each twin's out-of-fold predicted cost.
- `shipped`: the shipped `forgeformer-iha-tiny-swa` on the windowed rows of its own held-out split (re-made from
  its sidecar), against `forgeformer-iha-tiny` on the same rows.

Each: Spearman with a 95 % bootstrap CI (architectures resampled), Kendall, MAE, MAE@5 % and MAE@10 % (the true
lowest-loss rows), and the paired CI of Spearman(window-aware) − Spearman(blind); plus how far the window-aware
model moves its prediction when a windowed genome's windows are all set to 0 (full attention).

    .venv/bin/python bench/bench_window_surrogate.py [cv|shipped] [--folds 5 --epochs 100 --workers 2]
    .venv/bin/python bench/bench_window_surrogate.py twins --write twins.jsonl
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "window_surrogate.json"
FILES = ("iha-tiny-cpu-proxy.jsonl", "iha-tiny-swa-cpu-proxy.jsonl")
TWIN_WINDOW, N_TWINS = 32, 12


def labels():
    from forge.runtime.config import data_dir
    from surrogate.dataset import load_labelset

    return load_labelset([data_dir() / "labels" / f for f in FILES])


def windowed(genomes) -> np.ndarray:
    """True where some active attention layer has a window (> 0): the rows a window-blind model cannot tell apart."""
    return np.array([any(x.active and x.attn and int(x.window) > 0 for x in g.layers) for g in genomes])


def unwindowed(genomes) -> list:
    return [g.with_layers(x.replace(window=0) for x in g.layers) for g in genomes]


def twins(n: int = N_TWINS, seed: int = 0) -> list[tuple[object, object]]:
    """(full-attention original, windowed twin) for n seeded picks of the shipped iha-tiny labels."""
    from forge.runtime.config import data_dir
    from surrogate.dataset import load_labelset

    tiny = load_labelset(data_dir() / "labels" / FILES[0]).genomes
    ok = [i for i, g in enumerate(tiny) if sum(x.active and x.attn for x in g.layers) >= 2]
    pick = sorted(np.random.default_rng(seed).choice(ok, n, replace=False).tolist())
    return [(tiny[i], tiny[i].with_layers(x.replace(window=TWIN_WINDOW if x.attn else 0) for x in tiny[i].layers))
            for i in pick]


def twin_cost(data, pred: np.ndarray, full_pred: np.ndarray) -> dict:
    """Measured (label) vs out-of-fold predicted loss cost of the windows, on the twins that were labelled."""
    row = {i: k for k, i in enumerate(data.ids)}
    pairs = [(row[g.id], row[t.id]) for g, t in twins() if t.id in row and g.id in row]
    if not pairs:
        return {"n": 0}
    orig, tw = np.array([i for i, _ in pairs]), np.array([k for _, k in pairs])
    measured, predicted = data.y[tw] - data.y[orig], pred[tw] - full_pred[tw]
    return {"n": len(pairs), "window": TWIN_WINDOW, "measured": np.round(measured, 4).tolist(),
            "predicted": np.round(predicted, 4).tolist(), "measured_mean": round(float(measured.mean()), 4),
            "predicted_mean": round(float(predicted.mean()), 4),
            "corr": round(float(np.corrcoef(measured, predicted)[0, 1]), 3) if len(pairs) > 2 else None}


def recipe(field_set: str, epochs: int, seed: int):
    """conf/surrogate/forgeformer.yaml (the recipe `forge-surrogate mode=train` uses) with a field set."""
    from omegaconf import OmegaConf

    from forge.runtime.config import conf_dir
    from surrogate.training import Recipe

    cfg = OmegaConf.to_container(OmegaConf.load(conf_dir() / "surrogate" / "forgeformer.yaml"))
    cfg = {k: v for k, v in cfg.items() if k in Recipe.__dataclass_fields__}
    return replace(Recipe(**cfg), field_set=field_set, epochs=epochs, seed=seed, workers=1)


def metrics(y, p, ids, reps: int = 1000, seed: int = 0) -> dict:
    """The repo's metrics (surrogate.metrics.evaluate) plus MAE@10 % and a bootstrap CI of Spearman."""
    from surrogate.metrics import evaluate, top_rows

    m = {k: round(v, 4) for k, v in evaluate(y, p).items()}
    top = top_rows(y, 10)
    m["mae_at_10"] = round(float(np.abs(y[top] - p[top]).mean()), 4)
    m["spearman_ci95"] = [round(float(v), 4) for v in boot(y, p, None, ids, reps, seed)]
    m["n"] = len(y)
    return m


def boot(y, a, b, ids, reps: int, seed: int) -> np.ndarray:
    """2.5/97.5 percentiles of Spearman(a) (or Spearman(a) − Spearman(b)), resampling architectures."""
    from scipy import stats

    _, g = np.unique(np.asarray(ids), return_inverse=True)
    groups = [np.flatnonzero(g == j) for j in range(g.max() + 1)]
    rng, out = np.random.default_rng(seed), []
    for _ in range(reps):
        pick = np.concatenate([groups[j] for j in rng.integers(0, len(groups), len(groups))])
        r = stats.spearmanr(y[pick], a[pick]).statistic
        out.append(r - (stats.spearmanr(y[pick], b[pick]).statistic if b is not None else 0.0))
    return np.percentile(out, [2.5, 97.5])


def compare(y, preds: dict, ids, aware: str, blind: list[str]) -> dict:
    from scipy import stats

    res = {k: metrics(y, v, ids) for k, v in preds.items()}
    for b in blind:
        d = stats.spearmanr(y, preds[aware]).statistic - stats.spearmanr(y, preds[b]).statistic
        ci = boot(y, preds[aware], preds[b], ids, 1000, 1)
        res[f"spearman_{aware}_minus_{b}"] = {"diff": round(float(d), 4), "ci95": [round(float(v), 4) for v in ci]}
    return res


def fold_job(field_set: str, f: int, folds: int, epochs: int, seed: int) -> tuple:
    """One fit on the rows outside fold f; its predictions of fold f, with and without their windows."""
    from surrogate.dataset import group_folds, split_ids
    from surrogate.fit import train_forgeformer

    data = labels()
    fold = group_folds(data.ids, folds, seed)
    rest, test = data.take(np.flatnonzero(fold != f)), data.take(np.flatnonzero(fold == f))
    tr, va = split_ids(rest.ids, 0.1, seed + 7919 + f)
    p = train_forgeformer(rest.take(tr), rest.take(va), recipe(field_set, epochs, seed + f), "iha-tiny-swa", 12)
    return field_set, f, p.predict(test.genomes)[0], p.predict(unwindowed(test.genomes))[0]


def cv(folds: int, epochs: int, seed: int, workers: int) -> dict:
    from forge.runtime.parallel import map_spawned
    from surrogate.dataset import group_folds
    from surrogate.loading import load_predictor

    data = labels()
    fold = group_folds(data.ids, folds, seed)
    pred = {"paper+window": np.zeros(len(data)), "paper": np.zeros(len(data))}
    moved = np.zeros(len(data))
    t0 = time.perf_counter()
    jobs = [(fs, f, folds, epochs, seed) for f in range(folds) for fs in pred]
    for fs, f, mu, mu_full in map_spawned(fold_job, jobs, workers):
        pred[fs][fold == f] = mu
        if fs == "paper+window":
            moved[fold == f] = mu - mu_full
    w = windowed(data.genomes)
    shipped = load_predictor("forgeformer-iha-tiny").predict([g for g, k in zip(data.genomes, w) if k])[0]
    preds = {"forgeformer-paper+window (CV)": pred["paper+window"][w], "forgeformer-paper (CV, window-blind)":
             pred["paper"][w], "forgeformer-iha-tiny (shipped, window-blind)": shipped}
    ids = np.asarray(data.ids)[w]
    res = compare(data.y[w], preds, ids, "forgeformer-paper+window (CV)",
                  ["forgeformer-paper (CV, window-blind)", "forgeformer-iha-tiny (shipped, window-blind)"])
    res["all_rows"] = {k: metrics(data.y, v, np.asarray(data.ids), 200) for k, v in pred.items()}
    res["rows"] = {"all": len(data), "windowed": int(w.sum()), "folds": folds, "epochs": epochs}
    res["window_effect_predicted"] = _moved(moved[w])
    res["twins"] = twin_cost(data, pred["paper+window"], pred["paper+window"] - moved)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    return res


def _moved(d: np.ndarray) -> dict:
    """Predicted loss with the genome's windows minus with full attention (> 0: the windows cost loss)."""
    return {"mean": round(float(d.mean()), 4), "median": round(float(np.median(d)), 4),
            "share_positive": round(float((d > 0).mean()), 3), "abs_max": round(float(np.abs(d).max()), 4)}


def shipped() -> dict:
    """The shipped window-aware checkpoint on the windowed rows of its own held-out split."""
    from surrogate.dataset import train_val_test
    from surrogate.loading import load_predictor

    swa = load_predictor("forgeformer-iha-tiny-swa")
    t = swa.meta["test"]
    _, _, test = train_val_test(labels(), int(t["seed"]), float(t["test_frac"]))
    w = windowed(test.genomes)
    g = [x for x, k in zip(test.genomes, w) if k]
    preds = {"forgeformer-iha-tiny-swa": swa.predict(g)[0],
             "forgeformer-iha-tiny (window-blind)": load_predictor("forgeformer-iha-tiny").predict(g)[0]}
    res = compare(test.y[w], preds, np.asarray(test.ids)[w], "forgeformer-iha-tiny-swa",
                  ["forgeformer-iha-tiny (window-blind)"])
    res["rows"] = {"test": len(test), "windowed": int(w.sum())}
    res["window_effect_predicted"] = _moved(preds["forgeformer-iha-tiny-swa"] - swa.predict(unwindowed(g))[0])
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("view", nargs="?", choices=("cv", "shipped", "twins"), default="cv")
    ap.add_argument("--write", type=Path, help="twins: the genome file to write")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="cv: folds fitted in this many spawned processes")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if a.view == "twins":
        a.write.write_text("".join(json.dumps({"genome": t.to_dict()}) + "\n" for _, t in twins()))
        return
    res = cv(a.folds, a.epochs, a.seed, a.workers) if a.view == "cv" else shipped()
    print(json.dumps(res, indent=1))
    OUT.parent.mkdir(exist_ok=True)
    old = json.loads(OUT.read_text()) if OUT.is_file() else {}
    OUT.write_text(json.dumps(old | {a.view: res | {"settings": vars(a)}}, indent=1) + "\n")


if __name__ == "__main__":
    main()
