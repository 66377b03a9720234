"""The analysis half of bench/bench_supernet.py (issue 38): rank statistics of the supernet scores against the
real labels, the window twins, and the supernet score as a stacked input of the tiny Forge-Former in grouped CV.

`ff_cv` fits conf/surrogate/forgeformer.yaml (field set paper+window) in each of 5 `group_folds` folds, exactly as
bench_window_surrogate.py's `cv` does (same folds, carve and seeds), and keeps its predictions of the test fold
and of the fold's validation carve (rows that model never trained on). `report` then fits, per fold, least
squares heads on the carve: y ~ ff (a recalibration, no new input) and y ~ ff + supernet score; scored on the
test folds pooled.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from bench_window_surrogate import labels, twins, windowed

ROOT = Path(__file__).resolve().parent.parent
NPZ = ROOT / "bench" / "results" / "supernet_ff_cv.npz"
WINDOW_JSON = ROOT / "bench" / "results" / "window_surrogate.json"


def ff_fold(f: int, folds: int, epochs: int, seed: int) -> tuple:
    from bench_window_surrogate import recipe
    from surrogate.dataset import group_folds, split_ids
    from surrogate.fit import train_forgeformer

    data = labels()
    fold = group_folds(data.ids, folds, seed)
    rest_i = np.flatnonzero(fold != f)
    rest = data.take(rest_i)
    tr, va = split_ids(rest.ids, 0.1, seed + 7919 + f)
    p = train_forgeformer(rest.take(tr), rest.take(va), recipe("paper+window", epochs, seed + f), "iha-tiny-swa", 12)
    test = data.take(np.flatnonzero(fold == f))
    return f, p.predict(test.genomes)[0], rest_i[np.asarray(va)], p.predict(rest.take(va).genomes)[0]


def ff_cv(folds: int, epochs: int, seed: int, workers: int) -> dict:
    from forge.runtime.parallel import map_spawned
    from surrogate.dataset import group_folds

    data = labels()
    fold = group_folds(data.ids, folds, seed)
    oof, carve = np.zeros(len(data)), {}
    t0 = time.perf_counter()
    for f, mu, va_rows, va_mu in map_spawned(ff_fold, [(f, folds, epochs, seed) for f in range(folds)], workers):
        oof[fold == f] = mu
        carve[f"rows{f}"], carve[f"mu{f}"] = va_rows, va_mu
    np.savez(NPZ, oof=oof, fold=fold, **carve)
    return {"folds": folds, "epochs": epochs, "wall_s": round(time.perf_counter() - t0, 1), "npz": str(NPZ.name)}


def _boot(y, a, b, ids, reps: int = 1000, seed: int = 0) -> dict:
    """Spearman and Kendall of a (minus those of b) with 95 % CIs, resampling architectures."""
    from scipy import stats

    _, g = np.unique(np.asarray(ids), return_inverse=True)
    groups = [np.flatnonzero(g == j) for j in range(g.max() + 1)]
    rng, out = np.random.default_rng(seed), []

    def both(idx):
        r = [stats.spearmanr(y[idx], a[idx]).statistic, stats.kendalltau(y[idx], a[idx]).statistic]
        if b is not None:
            r = [r[0] - stats.spearmanr(y[idx], b[idx]).statistic, r[1] - stats.kendalltau(y[idx], b[idx]).statistic]
        return r

    for _ in range(reps):
        out.append(both(np.concatenate([groups[j] for j in rng.integers(0, len(groups), len(groups))])))
    lo, hi = np.percentile(np.array(out), [2.5, 97.5], axis=0)
    point = both(np.arange(len(y)))
    return {"spearman": round(float(point[0]), 4), "spearman_ci95": [round(float(lo[0]), 4), round(float(hi[0]), 4)],
            "kendall": round(float(point[1]), 4), "kendall_ci95": [round(float(lo[1]), 4), round(float(hi[1]), 4)],
            "n": len(y)}


def _mae5(y, p) -> float:
    from surrogate.metrics import top_rows

    t = top_rows(y, 5)
    return round(float(np.abs(y[t] - p[t]).mean()), 4)


def stacked(y, s, npz) -> dict[str, np.ndarray]:
    """Per fold, least squares on the fold's carve: y ~ ff and y ~ ff + score; predictions of the test fold."""
    fold, oof = npz["fold"], npz["oof"]
    line, stack = np.zeros(len(y)), np.zeros(len(y))
    for f in range(int(fold.max()) + 1):
        rows, mu = npz[f"rows{f}"], npz[f"mu{f}"]
        te = fold == f
        for cols, out in (([mu], line), ([mu, s[rows]], stack)):
            X = np.column_stack([*cols, np.ones(len(rows))])
            w = np.linalg.lstsq(X, y[rows], rcond=None)[0]
            Xt = np.column_stack([oof[te], *([s[te]] if len(cols) == 2 else []), np.ones(te.sum())])
            out[te] = Xt @ w
    return {"forgeformer (CV)": oof, "forgeformer + line on carve": line, "forgeformer + supernet score": stack}


def twin_table(data, s) -> dict:
    row = {i: k for k, i in enumerate(data.ids)}
    pairs = [(row[g.id], row[t.id]) for g, t in twins() if t.id in row and g.id in row]
    o, t = np.array([i for i, _ in pairs]), np.array([k for _, k in pairs])
    measured, sn = data.y[t] - data.y[o], s[t] - s[o]
    ff = json.loads(WINDOW_JSON.read_text())["cv"]["twins"]
    ffp = np.array(ff["predicted"])
    sign = lambda p: round(float(np.mean(np.sign(p) == np.sign(measured))), 3)  # noqa: E731
    return {"n": len(pairs), "measured": np.round(measured, 4).tolist(), "supernet": np.round(sn, 4).tolist(),
            "supernet_corr": round(float(np.corrcoef(measured, sn)[0, 1]), 3), "supernet_sign_agree": sign(sn),
            "forgeformer_window_aware_corr": ff["corr"], "forgeformer_sign_agree": sign(ffp),
            "supernet_mean": round(float(sn.mean()), 4), "measured_mean": round(float(measured.mean()), 4)}


def size_table(data, s) -> dict:
    """Spearman of the labels and of the scores with size (params, active layers, attention layers): what each
    rewards."""
    from scipy import stats

    from forge.lm.workload import analyze

    cols = {"params": [analyze(g)["params"] for g in data.genomes],
            "n_active": [g.n_active for g in data.genomes],
            "n_attn": [sum(x.active and x.attn for x in g.layers) for g in data.genomes]}
    return {k: {"label": round(float(stats.spearmanr(data.y, v).statistic), 3),
                "supernet": round(float(stats.spearmanr(s, v).statistic), 3)} for k, v in cols.items()}


def report(score_res: dict, folds: int, epochs: int, seed: int, workers: int) -> dict:
    data = labels()
    rows = score_res["rows"]
    assert rows["ids"] == list(data.ids), "scores were made for other label rows"
    y, s, ids = data.y, np.array(rows["score"]), np.asarray(data.ids)
    w = windowed(data.genomes)
    res = {"supernet_score": {"all": _boot(y, s, None, ids), "windowed": _boot(y[w], s[w], None, ids[w])}}
    res["twins"] = twin_table(data, s)
    res["size_correlation"] = size_table(data, s)
    if not NPZ.is_file():
        res["ff_cv"] = ff_cv(folds, epochs, seed, workers)
    npz = np.load(NPZ)
    preds = stacked(y, s, npz)
    base = preds["forgeformer (CV)"]
    for name, p in preds.items():
        res[name] = {"all": {**_boot(y, p, None, ids, 500), "mae_at_5": _mae5(y, p)},
                     "windowed": {**_boot(y[w], p[w], None, ids[w], 500), "mae_at_5": _mae5(y[w], p[w])}}
    stack = preds["forgeformer + supernet score"]
    res["stack_minus_forgeformer"] = {"all": _boot(y, stack, base, ids, 1000, 1),
                                      "mae_at_5": round(_mae5(y, stack) - _mae5(y, base), 4)}
    res["stack_minus_line"] = {"all": _boot(y, stack, preds["forgeformer + line on carve"], ids, 1000, 2)}
    return res


def markdown(res: dict) -> str:
    """The RESULTS.md table rows of a report."""
    def row(name, m, mae=None):
        ci = lambda k: f"[{m[k + '_ci95'][0]:.3f}, {m[k + '_ci95'][1]:.3f}]"  # noqa: E731
        return (f"| {name} | {m['n']} | {m['spearman']:.3f} {ci('spearman')} | {m['kendall']:.3f} {ci('kendall')} | "
                f"{'' if mae is None else f'{mae:.4f}'} |")

    out = ["| source, rows | n | Spearman [95 % CI] | Kendall τ [95 % CI] | MAE@5 % |", "| --- | --- | --- | --- | --- |"]
    for rows in ("all", "windowed"):
        out.append(row(f"supernet score, {rows}", res["supernet_score"][rows]))
        for k in ("forgeformer (CV)", "forgeformer + line on carve", "forgeformer + supernet score"):
            out.append(row(f"{k}, {rows}", res[k][rows], res[k][rows]["mae_at_5"]))
    return "\n".join(out)
