"""MOASHA baseline: syne-tune's own multi-objective ASHA scheduler (Schmucker et al. 2021; Salinas et al. 2021),
not a copy of it, behind the rules' interface (`decide(rung index, losses, context)`, forge.fidelity.stopping).

The scheduler keeps its rungs in memory, while Forge's trainings decide in separate processes (and the bench
replays them), so each decision builds a fresh scheduler and feeds it, in arrival order, every peer's rung
results and then the candidate's: the same history gives the same decision. Metrics: the loss at the rung
and each exact cost, all minimized; time is the optimizer step. Optional extra: pip install -e '.[moasha]'.

syne-tune 0.16's default priority (`NonDominatedPriority`) returns the *order* of `nondominated_sort` (indices,
best first) where MOASHA's bracket expects each trial's priority, so the new trial is ranked by whichever index
sorts last (a trial dominating every other one is stopped: tests/forge/labelling/test_stopping.py). `priority=
"rank"` (the default) passes, through MOASHA's own `multiobjective_priority` parameter, the inverse of that
order (each trial's position in it); `priority="syne"` keeps syne-tune's default as shipped.
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from forge.fidelity.context import Context, StopError

_EPOCH = _dt.datetime(2026, 1, 1)


def _rank_priority():
    from syne_tune.optimizer.schedulers.multiobjective.multiobjective_priority import NonDominatedPriority

    class RankPriority(NonDominatedPriority):
        """Each trial's position in syne-tune's non-dominated order (lower = picked first)."""

        def priority_unsafe(self, objectives):
            order = super().priority_unsafe(objectives)
            rank = np.empty(len(order), dtype=float)
            rank[np.asarray(order, dtype=int)] = np.arange(len(order))
            return rank

    return RankPriority()


def _syne():
    try:
        from syne_tune.backend.trial_status import Trial
        from syne_tune.optimizer.scheduler import SchedulerDecision
        from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA
    except ImportError:
        raise StopError("stop.rule=moasha needs the optional package syne-tune: pip install -e '.[moasha]' in the "
                        "Forge clone (or pip install syne-tune)") from None
    return Trial, SchedulerDecision, MOASHA


@dataclass
class MoashaRule:
    """Stop where syne-tune's MOASHA says STOP (rungs: the first rung's step times eta^k up to the budget)."""

    eta: int = 3
    rungs: int = 4
    steps: Sequence[int] = ()
    priority: str = "rank"   # rank | syne (see the module's docstring)
    name: str = "moasha"

    def decide(self, r: int, losses: Sequence[float], ctx: Context) -> dict[str, Any] | None:
        Trial, Decision, MOASHA = _syne()
        steps = list(self.steps) or [self.eta ** k for k in range(self.rungs)]
        k = len(ctx.costs)
        metrics = ["loss", *(f"cost{j}" for j in range(k))]
        prio = _rank_priority() if self.priority == "rank" else None
        sched = MOASHA(config_space={}, metrics=metrics, do_minimize=True, time_attr="step", max_t=steps[-1],
                       grace_period=steps[0], reduction_factor=self.eta, brackets=1, multiobjective_priority=prio)
        action = Decision.CONTINUE
        history = [(g, c, ls) for g, (c, ls, _) in ctx.peers.items() if g != ctx.gid] + \
                  [(ctx.gid, ctx.costs, list(losses[: r + 1]))]
        for tid, (_, costs, ls) in enumerate(history):
            trial = Trial(trial_id=tid, config={}, creation_time=_EPOCH)
            sched.on_trial_add(trial)
            for q, loss in enumerate(ls[: len(steps) - 1]):
                res = {"step": steps[q], "loss": loss if math.isfinite(loss) else 1e30,
                       **{f"cost{j}": float(costs[j]) for j in range(k)}}
                action = sched.on_trial_result(trial, res)
                if action == Decision.STOP:
                    break
        if action != Decision.STOP:
            return None
        return {"rule": self.name, "reason": f"syne-tune MOASHA stopped it at rung {r + 1} (step {steps[r]})"}
