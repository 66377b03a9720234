"""A race between k trainings (forge-verify race=true, search.race drives it live): at each rung only the ones
that can still be best go on. Pick i stops at rung r when some other live pick j has every cost <= i's and
P(Y_i < Y_j) < threshold, with Y the final losses projected by the curve model (forge.fidelity.stopping) and
taken independent: Y_i - Y_j ~ N(m_i - m_j, s_i^2 + s_j^2). At most one of two picks can stop the other
(threshold < 1/2). Each stop is logged with the rung, the projected interval and the pick that beats it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import norm

from forge.fidelity.stopping import Z90, CurveModel


@dataclass(frozen=True)
class Entrant:
    """One pick in the race: its id, exact costs, surrogate prior (or None) and rung losses so far."""

    gid: str
    costs: Sequence[float]
    prior: float | None
    losses: Sequence[float]


def race_step(r: int, alive: Sequence[Entrant], model: CurveModel, threshold: float) -> dict[str, dict[str, Any]]:
    """The stops at rung index r: {stopped id: log record}; every other live pick goes on."""
    proj = {e.gid: model.predict(r, e.losses, e.prior) if math.isfinite(e.losses[r]) else (math.inf, 1.0)
            for e in alive}
    stops: dict[str, dict[str, Any]] = {}
    for e in alive:
        m, s = proj[e.gid]
        worst, by = 1.0, ""
        for o in alive:
            if o.gid == e.gid or not np.all(np.asarray(o.costs, float) <= np.asarray(e.costs, float)):
                continue
            mo, so = proj[o.gid]
            p = 0.0 if not math.isfinite(m) else float(norm.cdf((mo - m) / math.hypot(s, so)))  # P(Y_e < Y_o)
            if p < worst:
                worst, by = p, o.gid
        if worst < threshold:
            stops[e.gid] = {"rule": "race", "rung": r + 1, "p_best": round(worst, 6), "projected": round(m, 6),
                            "interval": [round(m - Z90 * s, 6), round(m + Z90 * s, 6)], "dominated_by": by,
                            "reason": f"P(beats {by}) = {worst:.4f} < {threshold:g} at rung {r + 1}; projected "
                                      f"{m:.4f} [{m - Z90 * s:.4f}, {m + Z90 * s:.4f}] (90%)"}
    return stops


def race_plan(curves: Mapping[str, Sequence[float]], costs: Mapping[str, Sequence[float]],
              priors: Mapping[str, float | None], model: CurveModel, threshold: float) -> dict[str, Any]:
    """Replay a race on known curves (bench): which picks finish, where the others stop."""
    alive = list(curves)
    stopped: dict[str, dict[str, Any]] = {}
    n_rungs = len(next(iter(curves.values())))
    for r in range(n_rungs - 1):
        ents = [Entrant(g, costs[g], priors.get(g), list(curves[g][: r + 1])) for g in alive]
        st = race_step(r, ents, model, threshold)
        stopped.update(st)
        alive = [g for g in alive if g not in st]
    return {"finished": alive, "stopped": stopped}
