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
from search.operators import SpaceSampling, sample_uniform
from search.operators_plugin import OperatorSpec, build_operator, check_code, code_record
from search.problem import ForgeProblem
from search.settings import SearchSettings
from search.survival import StableRankAndCrowding

POP_KEYS = ("X", "F", "G", "CV", "feas", "rank", "crowding", "fgen")


class ForgeNSGA2(NSGA2):
    """pymoo's NSGA-II over a Forge space, holding its own state (as pymoo's algorithms do): the space it samples, mates, mutates and repairs
    in, and `checkpoint_state()` / `restore()`, what a checkpoint saves of it and how a resume puts it back.
    `operators`: the built sampling, crossover, mutation and repair (search.operators_plugin); `code`: the record of
    those that are not Forge's own, which a checkpoint holds and a resume must match."""

    def __init__(self, space: SearchSpace, keys: Callable[[np.ndarray], list], pop_size: int, n_offsprings: int,
                 operators: Mapping[str, Any], code: Mapping[str, Any] | None = None) -> None:
        super().__init__(pop_size=pop_size, n_offsprings=n_offsprings, sampling=operators["sampling"],
                         crossover=operators["crossover"], mutation=operators["mutation"], repair=operators["repair"],
                         eliminate_duplicates=IdDuplicateElimination(keys), survival=StableRankAndCrowding())
        self.space, self.code = space, dict(code or {})

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint holds of the algorithm: the survived population, pymoo's iteration counter and the
        generator's state (JSON-able; floats round-trip exactly)."""
        st = {"n_iter": self.n_iter, "rng": self.random_state.bit_generator.state, "pop": pop_state(self.pop)}
        return {**st, "operators": self.code} if self.code else st  # a run of Forge's own operators: as before

    def restore(self, st: Mapping[str, Any]) -> None:
        """Put `checkpoint_state()`'s population, counter and generator state back into this freshly set-up algorithm,
        once its operators are the ones the checkpoint recorded (else ResumeError)."""
        check_code(st.get("operators") or {}, self.code, "resume")
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
    """The recipe's pymoo algorithm with the settled operators (search.operators_plugin), set up on `problem`."""
    nodes = {"crossover": s.crossover, "mutation": s.mutation, "repair": s.repair}
    ops = {k: build_operator(k, node, space) for k, node in nodes.items()}
    if isinstance(s.sampling, OperatorSpec):  # a user's sampling plug-in (else uniform, or around a genome)
        nodes["sampling"] = s.sampling
        ops["sampling"] = build_operator("sampling", s.sampling, space)
    else:
        ops["sampling"] = SpaceSampling(space, seed_genome)
    cls = ForgeNSGA2 if s.algorithm == "nsga" else RandomSearch
    algo = cls(space, problem.keys, s.pop_size, s.offspring, ops, code_record(nodes))
    algo.setup(problem, seed=seed, termination=NoTermination(), verbose=False)
    return algo


def pop_column(pop: Population, key: str) -> np.ndarray:
    """`pop.get(key)` for an attribute of pymoo's Individual (X, F, CV, feas), read directly: pymoo's generic
    getter costs a dictionary and two lookups per individual, and the loop reads these columns every generation."""
    return np.array([getattr(ind, key) for ind in pop])


def pop_state(pop: Population) -> dict[str, Any]:
    """JSON-able columns of a population (floats round-trip exactly through JSON)."""
    return {k: np.array([ind.get(k) for ind in pop]).tolist() for k in POP_KEYS}  # = pop.get(k), read directly
