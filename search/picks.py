"""Which genomes `forge-verify` really trains: k members of the front, and a random control of k.

Best picks (the default, issue 51 §3): the k best-predicted members, lowest μ first (ties by id). The calibrated
pairwise odds (search.odds) are monotone in Δμ, so these are the members most likely to hold the true best: on
unseen labels the top 4 by μ found the best with regret 0 where the spread rule had 0.028 (RESULTS "Issue 51").
Two or more also cover the ~1 in 20 member that trains more than 0.3 worse than predicted.

Spread picks (`pick=spread`, for probing the loss-cost trade-off; issue 21 §2): the knee first (closest to the ideal point after min-max normalization, as
`forge-export select=knee`), then each objective's extreme, then the rest spread evenly along cost (the
members sorted by their summed normalized cost objectives, taken at evenly spaced ranks). The control is
k random genomes of the same space that satisfy the run's constraints under the run's own evaluator and
backend (the same feasibility rule the search applied), drawn from one seeded generator.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from forge.errors import UserError
from forge.disk.io import as_float
from forge.numeric import order_by_id
from search.export import select
from search.objectives import LOSS

CONTROL_STREAM = 21  # the control's generator is seeded by (seed, 21): independent of the search's draws


def _norm(rows: Sequence[dict[str, Any]], objectives: Sequence[str]) -> np.ndarray:
    F = np.array([[float(r["metrics"].get(o, np.inf)) for o in objectives] for r in rows], float)
    F = F.reshape(len(rows), len(objectives))
    lo, hi = F.min(0), F.max(0)
    return (F - lo) / np.where(hi > lo, hi - lo, 1.0)


PICKS = ("best", "spread")  # forge-verify's pick=


def best_picks(rows: Sequence[dict[str, Any]], k: int) -> list[tuple[str, dict]]:
    """[("best:<rank>", row)]: the k rows of lowest predicted loss μ, lowest first (ties by id)."""
    from search.odds import by_mu

    if k < 1:
        raise UserError(f"k = {k} is invalid; allowed: a positive number of front picks")
    return [(f"best:{n}", rows[j]) for n, j in enumerate(by_mu(rows)[:k], start=1)]


def choose_picks(rows: Sequence[dict[str, Any]], objectives: Sequence[str], k: int,
                 pick: str = "best") -> list[tuple[str, dict]]:
    """`pick=best` (best_picks) or `pick=spread` (front_picks); anything else is refused in one line."""
    if pick not in PICKS:
        raise UserError(f"pick={pick!r} is unknown; allowed: {' | '.join(PICKS)} (best: the k best-predicted, "
                        "most likely to hold the true best; spread: the knee, the extremes, the rest along cost)")
    return best_picks(rows, k) if pick == "best" else front_picks(rows, objectives, k)


def front_picks(rows: Sequence[dict[str, Any]], objectives: Sequence[str], k: int) -> list[tuple[str, dict]]:
    """[(role, row)]: knee, extremes ('min:<objective>'), then 'spread' members; all rows when |front| <= k."""
    if k < 1:
        raise UserError(f"k = {k} is invalid; allowed: a positive number of front picks")
    rows, objectives = list(rows), list(objectives)
    chosen: dict[str, str] = {}  # id -> role, in pick order

    def take(row: dict[str, Any], role: str) -> None:
        if len(chosen) < k and row["id"] not in chosen:
            chosen[row["id"]] = role

    if not rows:
        return []
    take(select(rows, "knee", objectives)[0], "knee")
    for o in objectives:
        take(select(rows, f"min:{o}", objectives)[0], f"min:{o}")
    cost = [o for o in objectives if o != LOSS] or objectives
    order = order_by_id(_norm(rows, cost).sum(1), [r["id"] for r in rows])
    rest = [rows[i] for i in order if rows[i]["id"] not in chosen]
    n = k - len(chosen)
    if n > 0 and rest:
        for i in np.unique(np.round(np.linspace(0, len(rest) - 1, min(n, len(rest)))).astype(int)):
            take(rest[int(i)], "spread")
    by_id = {r["id"]: r for r in rows}
    return [(role, by_id[i]) for i, role in chosen.items()]


def near_front_picks(archive: Sequence[dict[str, Any]], objectives: Sequence[str], signs: Sequence[float],
                     exclude: Sequence[str], n: int) -> list[tuple[str, dict]]:
    """[("near-front:<layer>", row)]: n feasible archive rows off the front, by non-dominated layer.

    Fills the picks when the front holds fewer than k members (a small space's front can be one genome):
    the search's next-best candidates, layer 2 first, each layer from its lowest summed normalized objectives,
    so verify still checks the surrogate where the search looked."""
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    seen, rows = set(exclude), []
    for r in archive:
        if r.get("feasible", True) and r["id"] not in seen:
            seen.add(r["id"])
            rows.append(r)
    if n < 1 or not rows:
        return []
    F = np.array([[as_float(r["metrics"].get(o), np.inf) for o in objectives] for r in rows], float)
    F = F.reshape(len(rows), len(objectives)) * np.asarray(signs, float)
    F = np.where(np.isfinite(F), F, np.finfo(float).max)
    out: list[tuple[str, dict]] = []
    for layer, idx in enumerate(NonDominatedSorting().do(F), start=2):
        idx = np.asarray(idx, int)
        Fi = F[idx]
        span = np.where(np.ptp(F, axis=0) > 0, np.ptp(F, axis=0), 1.0)
        for i in idx[order_by_id(((Fi - F.min(0)) / span).sum(1), [rows[int(j)]["id"] for j in idx])]:
            if len(out) < n:
                out.append((f"near-front:{layer}", rows[int(i)]))
    return out


def control_draw(space: Any, problem: Any, k: int, seed: int, exclude: Sequence[str] = (),
                 max_rounds: int = 50) -> list[dict[str, Any]]:
    """k records of random feasible genomes (space.sample_x from `seed`, feasibility by `problem`), skipping `exclude`.

    Returns fewer than k only when `max_rounds` batches of samples hold fewer feasible genomes. The generator
    is seeded by (seed, CONTROL_STREAM), so the control is not the search's own generation-0 sample."""
    rng = np.random.default_rng([seed, CONTROL_STREAM])  # not the search's own initial sample
    seen, out = set(exclude), []
    cheap = getattr(problem.evaluator, "kind", "") != "train"  # in train mode every sample costs a label
    for r in range(max_rounds):  # what is missing (a measured backend costs per genome), then 4x that
        need = k - len(out)
        X = space.sample_x(need * (4 if r and cheap else 1), rng)
        genomes, m = problem.metrics(X)
        for j, g in enumerate(genomes):
            rec = problem.record(g, m, j)
            if rec["feasible"] and g.id not in seen and len(out) < k:
                seen.add(g.id)
                rec["genome"] = g.with_layers(g.active_layers).to_dict()
                out.append(rec)
        if len(out) >= k:
            break
    return out
