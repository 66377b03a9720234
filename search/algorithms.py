"""pymoo algorithms for the two search recipes, and (re)storing their population.

`nsga`: pymoo's NSGA-II (binary tournament on constraint-dominance, rank and crowding; RankAndCrowding
survival with stable ties, `search.survival`) with the layer operators of `search.operators` and duplicate
elimination by genome id.
`random`: the same loop, but offspring are drawn uniformly from the space (LLMForge Figure 7's
Random + IHA): the evaluation budget (N + G·λ) and survival are identical, only direction is lost.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.population import Population
from pymoo.core.termination import NoTermination

from forge.genomes.genome import Genome
from forge.spaces.space import SearchSpace
from search.duplicates import IdDuplicateElimination
from search.operators import (LayerCrossover, LayerMutation, MutationParams, SpaceRepair, SpaceSampling,
                              sample_uniform)
from search.problem import ForgeProblem
from search.survival import StableRankAndCrowding

POP_KEYS = ("X", "F", "G", "CV", "feas", "rank", "crowding", "fgen")


class RandomSearch(NSGA2):
    """NSGA-II bookkeeping with undirected offspring: λ fresh uniform samples per generation."""

    def _infill(self):
        X = sample_uniform(self.space, 2 * self.n_offsprings, self.random_state)
        off = self.eliminate_duplicates.do(Population.new("X", X), self.pop)
        return off[: self.n_offsprings]


def make_algorithm(space: SearchSpace, problem: ForgeProblem, s: Mapping[str, Any], seed: int,
                   seed_genome: Genome | None = None) -> NSGA2:
    """The recipe's pymoo algorithm, from the search section `search.settings.settle_config` filled in and checked."""
    mut = dict(s["mutation"])
    rate = float(mut.pop("rate"))
    cls = NSGA2 if s["algorithm"] == "nsga" else RandomSearch
    algo = cls(pop_size=int(s["pop_size"]), n_offsprings=int(s["offspring"]),
               sampling=SpaceSampling(space, seed_genome), crossover=LayerCrossover(space, float(s["crossover"])),
               mutation=LayerMutation(space, rate, MutationParams(**mut)), repair=SpaceRepair(space),
               eliminate_duplicates=IdDuplicateElimination(problem.keys), survival=StableRankAndCrowding())
    algo.space = space
    algo.setup(problem, seed=seed, termination=NoTermination(), verbose=False)
    return algo


def pop_column(pop: Population, key: str) -> np.ndarray:
    """`pop.get(key)` for an attribute of pymoo's Individual (X, F, CV, feas), read directly: pymoo's generic
    getter costs a dictionary and two lookups per individual, and the loop reads these columns every generation."""
    return np.array([getattr(ind, key) for ind in pop])


def pop_state(pop: Population) -> dict[str, Any]:
    """JSON-able columns of a population (floats round-trip exactly through JSON)."""
    return {k: np.array([ind.get(k) for ind in pop]).tolist() for k in POP_KEYS}  # = pop.get(k), read directly


def restore(algo: NSGA2, st: Mapping[str, Any], n_iter: int, rng_state: Mapping[str, Any]) -> None:
    """Put a checkpointed population and generator state back into a freshly set-up algorithm."""
    algo._initialize()
    cols = {k: np.asarray(st[k]) for k in POP_KEYS if st.get(k) is not None}
    cols["X"] = cols["X"].astype(np.int64)
    cols.pop("feas", None)  # derived by pymoo from CV
    for k in ("rank", "fgen"):
        if k in cols and not any(x is None for x in cols[k].ravel()):  # generation 0's pop has no rank yet
            cols[k] = cols[k].astype(int)
    pop = Population.new("X", cols.pop("X"))
    for k, v in cols.items():
        pop.set(k, v)
    algo.pop, algo.is_initialized, algo.n_iter = pop, True, n_iter
    algo.random_state.bit_generator.state = dict(rng_state)
