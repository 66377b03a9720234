"""Issue 52 §4: the stopping rule's setting chosen by nested cross-validation on the committed curves.

    .venv/bin/python bench/bench_curves_cv.py      # -> bench/results/curves/cv.json (RESULTS "Issue 52: cross-validated")

`bench_curves.py replay` picks the front rule's threshold on the same 67 curves it reports (its curve models are
cross-fit, the threshold is not). Here the setting itself is fit out of sample: for each of the 5 folds (the
replay's own folds), every candidate setting is replayed on the *other* four folds only (6 arrival orders, curve
models inner-cross-fit within them) and the one saving most compute with zero wrong stops there (against those
genomes' own full front) is kept; each genome is then decided with the setting chosen without its fold and the
curve model fit without its fold, all 67 replayed together (seeds 0-2) exactly as `bench_curves.py replay` does.

Candidate settings, per family (`settings`): one threshold for every rung (the shipped rule); no decision at
rung 1 and one threshold after (rung-1 skip); one for rungs 1-2 and one for rung 3; a threshold per rung (0 = no
decision at that rung); and each of those with a conformal interval (P(enter) from
the empirical leave-one-out residuals of the fold's curve model, (1 + #{m + e < y*}) / (n + 1), instead of the
Gaussian with their RMS). Curve models: `last` and `prior` (the rung loss plus the surrogate's prior).
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np

from forge.disk.io import atomic_write_json
from forge.fidelity.stopping import _features, _inliers, _ols_loo, fit_curve_model

HERE = Path(__file__).resolve().parent / "results" / "curves"
GRID = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
SEEDS = (0, 1, 2)         # the outer replay's arrival orders (bench_curves.py replay's)
INNER_SEEDS = tuple(range(10, 16))  # the orders a setting is chosen on (more than 3: a wrong stop is a rare event)
FOLDS = 5


def _load():
    d = json.loads((HERE / "curves.json").read_text())["genomes"]
    return ([r["id"] for r in d], np.array([r["curve"] for r in d]), np.array(d[0]["tokens"]),
            np.array([r["costs"] for r in d]), np.array([r["prior"] for r in d]))


def _folds(n: int, seed: int = 52) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n) % FOLDS  # seed 52: bench_curves.py's folds


def _fit(L, prior, idx, kind):
    """The fold's curve model and, per rung, its leave-one-out residuals on the curves it kept (conformal)."""
    pr = prior[idx] if kind == "prior" else None
    m = fit_curve_model(L[idx], kind, pr)
    res = []
    for r in range(L.shape[1] - 1):
        X = np.array([_features(kind, L[i], r, None if pr is None else prior[i]) for i in idx])
        keep = _inliers(X, L[idx, -1])
        res.append(np.sort(_ols_loo(X[keep], L[idx][keep, -1])[1]))
    return m, res


def project(L, prior, fit_of: dict, kind: str) -> dict:
    """{genome: (means[r], sds[r], covered[r], residuals[r])} from the model fit on `fit_of[genome]` (an index set)."""
    cache, out = {}, {}
    for i, idx in fit_of.items():
        key = tuple(idx)
        if key not in cache:
            cache[key] = _fit(L, prior, np.array(idx), kind)
        m, res = cache[key]
        ms = [m.predict(r, L[i], prior[i] if kind == "prior" else None) for r in range(L.shape[1] - 1)]
        out[i] = ([a for a, _ in ms], [b for _, b in ms], [m.covers(r, L[i]) for r in range(L.shape[1] - 1)], res)
    return out


def _p(mean, sd, res, best, conformal):
    if conformal:
        return (1 + int(np.searchsorted(res, best - mean, side="left"))) / (len(res) + 1)
    return 0.5 * math.erfc(-(best - mean) / (sd * math.sqrt(2)))


def tables(L, proj, D, conf: bool) -> dict:
    """Per genome: the genomes that could dominate it (costs all <= its own), best final first, and P(enter) at each
    rung if that one holds the best loss among the finished ones: a replay then only looks values up."""
    out = {}
    for i, (means, sds, cov, res) in proj.items():
        cand = [int(j) for j in np.flatnonzero(D[:, i]) if j != i]
        cand.sort(key=lambda j: L[j, -1])
        P = [[_p(means[r], sds[r], res[r], float(L[j, -1]), conf) if cov[r] else 1.0 for j in cand]
             for r in range(L.shape[1] - 1)]
        out[i] = (cand, P)
    return out


def replay(order, L, T, tab, thr_of) -> tuple[int, dict]:
    """One arrival order: tokens spent, {stopped genome: rung}. The front: every genome finished so far."""
    fin, last = [False] * len(L), len(T) - 1
    tokens, stops = 0, {}
    for i in order:
        thr = thr_of(i)
        cand, P = tab[i]
        k = next((q for q, j in enumerate(cand) if fin[j]), None)
        for r in range(last):
            if k is not None and thr[r] > 0 and P[r][k] < thr[r]:
                tokens += int(T[r])
                stops[i] = r + 1
                break
        else:
            tokens += int(T[-1])
            fin[i] = True
    return tokens, stops


def _front(L, C, idx) -> set:
    from search.archive import non_dominated

    return {idx[j] for j in non_dominated(np.column_stack([L[idx, -1], C[idx]]))}


FAMILIES = ("single", "skip1", "two", "per-rung")


def settings(family: str):
    """single: one threshold (the shipped rule); skip1: no decision at rung 1, one threshold after; two: one for
    rungs 1-2 and one (no lower) for rung 3; per-rung: any threshold at each rung (0: no decision there)."""
    if family == "single":
        return [((t, t, t),) for t in GRID if t > 0]
    if family == "skip1":
        return [((0.0, t, t),) for t in GRID if t > 0]
    if family == "two":
        return [((t, t, u),) for t in GRID for u in GRID if u >= t and u > 0]
    return [(t,) for t in itertools.product(GRID, repeat=3) if any(t)]


def score(idx, L, T, C, tab, thr, seeds=SEEDS):
    """Mean compute ratio and total wrong stops of one setting replayed on the genomes `idx` alone."""
    front, ratios, wrong = _front(L, C, idx), [], 0
    for s in seeds:
        order = [idx[j] for j in np.random.default_rng(s).permutation(len(idx))]
        tok, stops = replay(order, L, T, tab, lambda i: thr)
        ratios.append(len(idx) * int(T[-1]) / tok)
        wrong += len(set(stops) & front)
    return float(np.mean(ratios)), wrong


def choose(idx, L, T, C, prior, kind, family, conf, D):
    """The setting saving most compute with zero wrong stops on `idx` (models inner-cross-fit within idx)."""
    inner = _folds(len(idx), 1052)
    fit_of = {idx[j]: tuple(idx[q] for q in range(len(idx)) if inner[q] != inner[j]) for j in range(len(idx))}
    tab = tables(L, project(L, prior, fit_of, kind), D, conf)
    best = ((0.0, 0.0, 0.0), 1.0)
    for (thr,) in settings(family):
        ratio, wrong = score(idx, L, T, C, tab, thr, INNER_SEEDS)
        if wrong == 0 and ratio > best[1] + 1e-9:
            best = (thr, ratio)
    return best


def _hv_trace(order, L, C, stops, T):
    from bench.bench_curves import _hv

    F = np.column_stack([L[:, -1], C])
    lo, hi = F.min(0), F.max(0)
    done, tok, trace = [], 0, []
    for i in order:
        tok += int(T[stops[i] - 1]) if i in stops else int(T[-1])
        if i not in stops:
            done.append(i)
        trace.append((tok, _hv(F[done], lo, hi)))
    return trace


def outer(L, T, C, prior, ids, kind, family, conf, D, seeds=SEEDS) -> dict:
    f, n = _folds(len(L)), len(L)
    chosen = {k: choose([i for i in range(n) if f[i] != k], L, T, C, prior, kind, family, conf, D) for k in range(FOLDS)}
    tab = tables(L, project(L, prior, {i: tuple(j for j in range(n) if f[j] != f[i]) for i in range(n)}, kind), D, conf)
    front, per = _front(L, C, list(range(n))), []
    for s in seeds:
        order = list(np.random.default_rng(s).permutation(n))
        tok, stops = replay(order, L, T, tab, lambda i: chosen[int(f[i])][0])
        base, got = _hv_trace(order, L, C, {}, T), _hv_trace(order, L, C, stops, T)
        hv = got[-1][1]
        reach = next(t for t, h in base if h >= hv - 1e-12) / next(t for t, h in got if h >= hv - 1e-12)
        per.append({"seed": s, "compute_ratio": n * int(T[-1]) / tok, "ratio_same_hv": reach, "hv": hv / base[-1][1],
                    "stopped": len(stops), "wrong": sorted(ids[i] for i in set(stops) & front),
                    "rungs": [sum(1 for v in stops.values() if v == r) for r in (1, 2, 3)]})
    return {"kind": kind, "family": family, "conformal": conf,
            "chosen": {k: {"thresholds": list(v[0]), "inner_ratio": round(v[1], 3)} for k, v in chosen.items()},
            "compute_ratio": round(float(np.mean([p["compute_ratio"] for p in per])), 3),
            "ratio_same_hv": round(float(np.mean([p["ratio_same_hv"] for p in per])), 3),
            "hv_over_full": round(float(np.mean([p["hv"] for p in per])), 4),
            "stopped": round(float(np.mean([p["stopped"] for p in per])), 1),
            "wrong_per_100": round(100 * float(np.mean([len(p["wrong"]) for p in per])) / n, 2), "per_seed": per}


def in_sample(L, T, C, prior, kind, family, conf, D) -> dict:
    """The same family's best setting picked on all 67 (what `replay` reports): the optimistic reference."""
    f, n = _folds(len(L)), len(L)
    tab = tables(L, project(L, prior, {i: tuple(j for j in range(n) if f[j] != f[i]) for i in range(n)}, kind), D, conf)
    best = ((0.0, 0.0, 0.0), 1.0)
    for (thr,) in settings(family):
        ratio, wrong = score(list(range(n)), L, T, C, tab, thr)
        if wrong == 0 and ratio > best[1] + 1e-9:
            best = (thr, ratio)
    return {"thresholds": list(best[0]), "compute_ratio": round(best[1], 3)}


def main() -> None:
    ids, L, T, C, prior = _load()
    D = np.all(C[:, None, :] <= C[None, :, :], axis=2)  # D[j, i]: j costs no more than i on every target
    rows = []
    for kind, family, conf in itertools.product(("last", "prior"), FAMILIES, (False, True)):
        row = outer(L, T, C, prior, ids, kind, family, conf, D)
        row["in_sample"] = in_sample(L, T, C, prior, kind, family, conf, D)
        rows.append(row)
        print(f"{kind:5s} {family:8s} {'conformal' if conf else 'gauss':9s} CV x{row['compute_ratio']:.2f} "
              f"same-HV x{row['ratio_same_hv']:.2f} HV {row['hv_over_full']:.4f} wrong/100 {row['wrong_per_100']:.2f} "
              f"| in-sample x{row['in_sample']['compute_ratio']:.2f} {row['in_sample']['thresholds']} "
              f"| chosen {[v['thresholds'] for v in row['chosen'].values()]}", flush=True)
    robust = []  # the best families again over 20 arrival orders: a wrong stop is rare, 3 orders see few chances
    for kind, family, conf in (("last", "single", False), ("prior", "two", False), ("prior", "two", True)):
        row = outer(L, T, C, prior, ids, kind, family, conf, D, tuple(range(20)))
        robust.append({k: v for k, v in row.items() if k != "per_seed"})
        print(f"20 orders: {kind} {family} {'conformal' if conf else 'gauss'} CV x{row['compute_ratio']:.2f} "
              f"same-HV x{row['ratio_same_hv']:.2f} HV {row['hv_over_full']:.4f} wrong/100 {row['wrong_per_100']:.2f}",
              flush=True)
    atomic_write_json(HERE / "cv.json", {"grid": list(GRID), "seeds": list(SEEDS), "inner_seeds": list(INNER_SEEDS),
                                         "folds": FOLDS, "rows": rows, "robust_20_orders": robust})


if __name__ == "__main__":
    main()
