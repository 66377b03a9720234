"""pymoo algorithms for the two search recipes, each holding its space and its checkpointed state (`ForgeNSGA2`).

`nsga`: pymoo's NSGA-II (binary tournament on constraint-dominance, rank and crowding; RankAndCrowding
survival with stable ties, `search.survival`) with the layer operators of `search.operators` and duplicate
elimination by genome id.
`random`: the same loop, but offspring are drawn uniformly from the space (LLMForge Figure 7's
Random + IHA): the evaluation budget (N + G·λ) and survival are identical, only direction is lost.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

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
from search.settings import SearchSettings
from search.survival import StableRankAndCrowding

POP_KEYS = ("X", "F", "G", "CV", "feas", "rank", "crowding", "fgen")


class ForgeNSGA2(NSGA2):
    """pymoo's NSGA-II over a Forge space, holding its own state (as pymoo's algorithms do): the space it samples, mates, mutates and repairs
    in, and `checkpoint_state()` / `restore()`, what a checkpoint saves of it and how a resume puts it back."""

    def __init__(self, space: SearchSpace, keys: Callable[[np.ndarray], list], pop_size: int, n_offsprings: int,
                 crossover: float, mutation_rate: float, mutation: MutationParams,
                 seed_genome: Genome | None = None) -> None:
        super().__init__(pop_size=pop_size, n_offsprings=n_offsprings, sampling=SpaceSampling(space, seed_genome),
                         crossover=LayerCrossover(space, crossover), mutation=LayerMutation(space, mutation_rate, mutation),
                         repair=SpaceRepair(space), eliminate_duplicates=IdDuplicateElimination(keys),
                         survival=StableRankAndCrowding())
        self.space = space

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds of the algorithm: the survived population, pymoo's iteration counter and the
        generator's state (JSON-able; floats round-trip exactly)."""
        return {"n_iter": self.n_iter, "rng": self.random_state.bit_generator.state, "pop": pop_state(self.pop)}

    def restore(self, st: Mapping[str, Any]) -> None:
        """Put `checkpoint_state()`'s population, counter and generator state back into this freshly set-up algorithm."""
        self._initialize()  # pymoo's own set-up hook
        cols = {k: np.asarray(st["pop"][k]) for k in POP_KEYS if st["pop"].get(k) is not None}
        cols["X"] = cols["X"].astype(np.int64)
        cols.pop("feas", None)  # derived by pymoo from CV
        for k in ("rank", "fgen"):
            if k in cols and not any(x is None for x in cols[k].ravel()):  # generation 0's pop has no rank yet
                cols[k] = cols[k].astype(int)
        pop = Population.new("X", cols.pop("X"))
        for k, v in cols.items():
            pop.set(k, v)
        self.pop, self.is_initialized, self.n_iter = pop, True, int(st["n_iter"])
        self.random_state.bit_generator.state = dict(st["rng"])


class RandomSearch(ForgeNSGA2):
    """NSGA-II bookkeeping with undirected offspring: λ fresh uniform samples per generation."""

    def _infill(self):
        X = sample_uniform(self.space, 2 * self.n_offsprings, self.random_state)
        off = self.eliminate_duplicates.do(Population.new("X", X), self.pop)
        return off[: self.n_offsprings]


def make_algorithm(space: SearchSpace, problem: ForgeProblem, s: SearchSettings, seed: int,
                   seed_genome: Genome | None = None) -> ForgeNSGA2:
    """The recipe's pymoo algorithm, set up on `problem`."""
    cls = ForgeNSGA2 if s.algorithm == "nsga" else RandomSearch
    algo = cls(space, problem.keys, s.pop_size, s.offspring, s.crossover, s.mutation_rate, s.mutation, seed_genome)
    algo.setup(problem, seed=seed, termination=NoTermination(), verbose=False)
    return algo


def pop_column(pop: Population, key: str) -> np.ndarray:
    """`pop.get(key)` for an attribute of pymoo's Individual (X, F, CV, feas), read directly: pymoo's generic
    getter costs a dictionary and two lookups per individual, and the loop reads these columns every generation."""
    return np.array([getattr(ind, key) for ind in pop])


def pop_state(pop: Population) -> dict[str, Any]:
    """JSON-able columns of a population (floats round-trip exactly through JSON)."""
    return {k: np.array([ind.get(k) for ind in pop]).tolist() for k in POP_KEYS}  # = pop.get(k), read directly
