"""Study (issue 51 §4): do the front's statements hold on labels the model never saw, and what should `k` train?

Rows: the 1,753 finite shared labels, predicted out of fold by the shipped blend (bench/results/grouped_cv_oof.npz,
5 GroupKFold folds over canonical genome ids), stretched with the low-end stretch fit on the other four folds.
Every figure is grouped CV: the pairwise odds (surrogate.pairwise) are fit on the pairs of four folds and
everything is counted on the fifth.

1. Calibration: per Δμ bin, predicted P(lower μ trains better) vs the observed share, per held-out fold.
   The μ level as a second input (an isotonic curve per level tercile) is scored by held-out log-loss.
2. Held-out fronts: each fold's rows (and 40 seeded 70 % subsamples of them) priced on the default roofline
   (A100, the main job's workload and objectives), their Pareto front over (μ, TTFT, TPOT, energy) by pymoo's
   non-dominated sort. On each front, with the odds fit on the other folds:
   - `p_best` statements: predicted P(the best-predicted member trains better) vs how often it did;
   - group 1 (members the best-predicted does not beat at p >= 0.9): the true-loss difference between its
     cheapest member (lowest TTFT) and its best-predicted one;
   - regret of each pick rule for k = 1..6 against the front's true best: top-k by μ (the new default,
     `search.picks.best_picks`) and the spread rule (`search.picks.front_picks`, issue 21's default).

    nice -n 10 .venv/bin/python bench/studies/pairwise_study.py      # writes bench/results/pairwise_study.json
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from surrogate.calibration import LowEndStretch  # noqa: E402
from surrogate.crossconf import oof_rows  # noqa: E402
from surrogate.pairwise import BAND, RULE_OUT, PairwiseOdds, _isotonic, bin_table, pairs  # noqa: E402

SRC = ROOT / "bench" / "results" / "grouped_cv_oof.npz"
OUT = ROOT / "bench" / "results" / "pairwise_study.json"
OBJ = ("ttft_ms", "tpot_ms", "energy_per_token_uj")  # the main job's cost objectives
SUBSAMPLES, FRAC, KS = 40, 0.7, range(1, 7)


def nested_mu(y, pred, fold) -> np.ndarray:
    mu = np.zeros(len(y))
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        mu[t] = LowEndStretch.fit(pred[r], y[r]).apply(pred[t], np.zeros(t.sum()))[0]
    return mu


def log_loss(p, w) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(w * np.log(p) + (1 - w) * np.log(1 - p)))


def calibration(mu, y, ids, fold) -> dict:
    """Per held-out fold: the bins of the Δμ-only curve, and held-out log-loss with and without the μ level."""
    out = []
    for f in np.unique(fold):
        r, t = fold != f, fold == f
        d, w = pairs(mu[r], y[r], ids[r], fold[r])
        x, p = _isotonic(d, w)
        dt, wt = pairs(mu[t], y[t], ids[t], fold[t])
        pt = np.interp(dt, x, p)
        lv, lvt = (_levels(m, i, g) for m, i, g in ((mu[r], ids[r], fold[r]), (mu[t], ids[t], fold[t])))
        cuts = np.quantile(lv, [1 / 3, 2 / 3])
        b, bt, pl = np.searchsorted(cuts, lv), np.searchsorted(cuts, lvt), np.zeros(len(dt))
        for k in range(3):
            xk, pk = _isotonic(d[b == k], w[b == k])
            pl[bt == k] = np.interp(dt[bt == k], xk, pk)
        out.append({"fold": int(f), "bins": bin_table(dt, wt, pt), "log_loss_dmu": round(log_loss(pt, wt), 4),
                    "log_loss_dmu_level": round(log_loss(pl, wt), 4)})
    return {"folds": out, "max_error": max(abs(b["predicted"] - b["observed"]) for o in out for b in o["bins"]
                                           if b["n"] >= 100)}


def _levels(mu, ids, model) -> np.ndarray:
    """The lower μ of each pair, in `pairs`' order (same loops, same filters)."""
    lv = []
    for m in np.unique(model):
        idx = np.flatnonzero(model == m)
        idx = idx[mu[idx] <= mu[idx].min() + BAND]
        i, j = np.triu_indices(len(idx), 1)
        keep = ids[idx[i]] != ids[idx[j]]
        lv.append(np.minimum(mu[idx[i]], mu[idx[j]])[keep])
    return np.concatenate(lv)


def costs(genomes) -> np.ndarray:
    """(n, 3) the main job's cost objectives on the default roofline."""
    import forge

    df = forge.cost(genomes, backend="roofline")
    return df[list(OBJ)].to_numpy(float)


def front_of(mu, C, idx) -> np.ndarray:
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    F = np.column_stack([mu[idx], C[idx]])
    return idx[NonDominatedSorting().do(F, only_non_dominated_front=True)]


def rows_of(mu, C, ids, idx) -> list[dict]:
    return [{"id": f"{ids[i]}#{i}", "metrics": {"val_loss": float(mu[i]), "mu": float(mu[i]),
                                               **{o: float(C[i, k]) for k, o in enumerate(OBJ)}}} for i in idx]


def score_front(mu, y, C, ids, idx, odds) -> dict:
    from search.odds import loss_groups, p_best
    from search.picks import best_picks, front_picks

    rows = rows_of(mu, C, ids, idx)
    yy = y[idx]
    p1, g = p_best(rows, odds), loss_groups(rows, odds)
    best = int(np.argmin(mu[idx]))
    won = (yy[best] < yy).astype(float)
    g1 = np.flatnonzero(g == 1)
    cheap = g1[np.argmin(C[idx][g1, 0])]
    pos = {r["id"]: j for j, r in enumerate(rows)}

    def regret(picks) -> float:
        return float(min(yy[pos[r["id"]]] for _, r in picks) - yy.min())

    return {"n": len(idx), "g1": len(g1), "p": p1[np.arange(len(idx)) != best].tolist(),
            "won": won[np.arange(len(idx)) != best].tolist(), "cheap_minus_best": float(yy[cheap] - yy[best]),
            "regret_top": [regret(best_picks(rows, k)) for k in KS],
            "regret_spread": [regret(front_picks(rows, ["val_loss", *OBJ], k)) for k in KS]}


def fronts(mu, y, C, ids, fold) -> dict:
    rng = np.random.default_rng(0)
    res = []
    for f in np.unique(fold):
        r = fold != f
        odds = PairwiseOdds(*map(tuple, _isotonic(*pairs(mu[r], y[r], ids[r], fold[r]))))
        rows_f = np.flatnonzero(fold == f)
        samples = [rows_f] + [np.sort(rng.choice(rows_f, int(FRAC * len(rows_f)), replace=False))
                              for _ in range(SUBSAMPLES)]
        res += [score_front(mu, y, C, ids, front_of(mu, C, s), odds) for s in samples]
    p, won = np.concatenate([r["p"] for r in res]), np.concatenate([r["won"] for r in res])
    table = _p_table(p, won)
    cm = np.array([r["cheap_minus_best"] for r in res])
    return {"fronts": len(res), "front_size_median": float(np.median([r["n"] for r in res])),
            "group1_size_median": float(np.median([r["g1"] for r in res])), "p_best": table,
            "cheap_minus_best": {"mean": round(float(cm.mean()), 4), "median": round(float(np.median(cm)), 4),
                                 "share_worse_by_2sigma": round(float((cm > 0.028).mean()), 3)},
            "regret": {rule: {f"k={k}": {"mean": round(float(np.mean([r[key][i] for r in res])), 4),
                                         "p90": round(float(np.quantile([r[key][i] for r in res], 0.9)), 4)}
                              for i, k in enumerate(KS)}
                       for rule, key in (("top-k by mu (default pick=best)", "regret_top"),
                                         ("spread (pick=spread)", "regret_spread"))}}


def pooled_fronts(mu, y, C, ids, fold) -> dict:
    """Fronts over all folds' out-of-fold rows (the full set and 40 seeded 70 % subsamples): each statement about
    member j against the front's best-predicted b is read off odds fit on the folds holding neither."""
    folds = [int(f) for f in np.unique(fold)]
    odds = {}
    for a in folds:
        for b in folds:
            r = (fold != a) & (fold != b)
            odds[a, b] = PairwiseOdds(*map(tuple, _isotonic(*pairs(mu[r], y[r], ids[r], fold[r]))))
    rng, allrows = np.random.default_rng(1), np.arange(len(y))
    p_all, won_all, sizes = [], [], []
    for s in [allrows] + [np.sort(rng.choice(allrows, int(FRAC * len(y)), replace=False)) for _ in range(SUBSAMPLES)]:
        idx = front_of(mu, C, s)
        b = idx[np.argmin(mu[idx])]
        rest = idx[idx != b]
        p_all += [float(odds[int(fold[b]), int(fold[j])].prob(mu[j] - mu[b])) for j in rest]
        won_all += (y[b] < y[rest]).astype(float).tolist()
        sizes.append(len(idx))
    p, won = np.array(p_all), np.array(won_all)
    return {"fronts": len(sizes), "front_size_median": float(np.median(sizes)), "p_best": _p_table(p, won)}


def _p_table(p, won) -> list:
    table = []
    for lo, hi in ((0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)):
        s = (p >= lo) & (p < hi)
        if s.any():
            table.append({"p": [lo, min(hi, 1.0)], "n": int(s.sum()), "predicted": round(float(p[s].mean()), 3),
                          "observed": round(float(won[s].mean()), 3)})
    return table


def main() -> None:
    from forge.disk.io import shared_data_dir
    from surrogate.dataset import load_labelset

    t0 = time.perf_counter()
    y, pred, fold, ids = oof_rows(SRC)
    mu = np.round(nested_mu(y, pred, fold), 6)  # as a search rounds μ
    data = load_labelset(shared_data_dir() / "llmforge_iha_200M.csv")
    C = costs(list(data.genomes))
    out = {"rows": len(y), "rule_out": RULE_OUT, "band": BAND, "calibration": calibration(mu, y, ids, fold),
           "held_out_fronts": fronts(mu, y, C, ids, fold), "pooled_fronts": pooled_fronts(mu, y, C, ids, fold)}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["held_out_fronts"]), "\n", json.dumps(out["pooled_fronts"]))
    print("calibration max error", out["calibration"]["max_error"], "log-loss",
          [(o["log_loss_dmu"], o["log_loss_dmu_level"]) for o in out["calibration"]["folds"]], "wall", out["wall_s"])


if __name__ == "__main__":
    main()
