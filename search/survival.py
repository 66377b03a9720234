"""NSGA-II survival (pymoo's rank and crowding) with ties that every machine breaks the same way.

pymoo orders equal crowding distances (the infinite ones of each front's extremes, or equal gaps) and equal
constraint violations with numpy's default, unstable sort. numpy sorts with SIMD code where the CPU has it
(AVX-512, AVX2) and with introsort where it does not, and the two leave equal keys in different orders: the
same population survived differently on two machines (issue 33). This survival is pymoo's, step for step and
with the same random draws, but every sort is stable: equal crowding distances keep pymoo's random
permutation order, equal violations keep the population order (itself machine-independent).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from pymoo.core.population import Population
from pymoo.operators.survival.rank_and_crowding import RankAndCrowding


def stable_randomized_argsort(a: np.ndarray, random_state: np.random.Generator, descending: bool = False) -> np.ndarray:
    """pymoo's `randomized_argsort` (method numpy): a random permutation, then a *stable* sort of it, so ties
    are broken by that permutation alone."""
    perm = random_state.permutation(len(a))
    order = perm[np.argsort(np.asarray(a)[perm], kind="stable")]
    return order[::-1] if descending else order


class StableRankAndCrowding(RankAndCrowding):
    """`RankAndCrowding` (NSGA-II's survival, crowding distance 'cd') with stable tie-breaking."""

    def do(self, problem: Any, pop: Population, *args: Any, n_survive: int | None = None,
           random_state: Any = None, **kwargs: Any) -> Population:
        """pymoo's `Survival.do`: feasible members by rank and crowding, then infeasible by violation (stable)."""
        if len(pop) == 0:
            return pop
        random_state = random_state if random_state is not None else np.random.default_rng()
        n_survive = min(len(pop) if n_survive is None else n_survive, len(pop))
        if not problem.has_constraints():
            return self._do(problem, pop, *args, n_survive=n_survive, random_state=random_state, **kwargs)
        cv, ok = pop.get("CV")[:, 0], pop.get("FEAS")[:, 0].astype(bool)
        feas, infeas = np.flatnonzero(ok), np.flatnonzero(~ok)
        infeas = infeas[np.argsort(cv[infeas], kind="stable")]
        survivors = Population() if len(feas) == 0 else self._do(
            problem, pop[feas], *args, n_survive=min(len(feas), n_survive), random_state=random_state, **kwargs)
        n_left = n_survive - len(survivors)
        return Population.merge(survivors, pop[infeas[:n_left]]) if n_left > 0 else survivors

    def _do(self, problem: Any, pop: Population, *args: Any, random_state: Any = None,
            n_survive: int | None = None, **kwargs: Any) -> Population:
        F = pop.get("F").astype(float, copy=False)
        survivors: list[int] = []
        for k, front in enumerate(self.nds.do(F, n_stop_if_ranked=n_survive)):
            keep = np.arange(len(front))
            n_remove = len(survivors) + len(front) - n_survive
            crowding = self.crowding_func.do(F[front, :], n_remove=max(n_remove, 0))
            if n_remove > 0:  # the splitting front: the least crowded survive
                keep = stable_randomized_argsort(crowding, random_state, descending=True)[:-n_remove]
            for j, i in enumerate(front):
                pop[i].set("rank", k)
                pop[i].set("crowding", crowding[j])
            survivors.extend(front[keep])
        return pop[survivors]
