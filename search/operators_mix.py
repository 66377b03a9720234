"""Stock integer operators over the genome matrix, and mixtures of them with the layer operators (issue 53).

pymoo's own integer recipe (simulated binary crossover and polynomial mutation on the grid indices, rounded: pymoo's
"mixed-variable" guide) treats every gene as a number; the layer operators of `search.operators` move whole layer
slots. `bench/bench_operators.py` measures both, alone and mixed, at equal evaluations; the winner is the default
(conf/search/nsga.yaml), the others one setting away (`search.mutation=llmforge`, conf/search/mutation/).

`AlignedSBX` respects layer alignment: both parents' active layers are moved to the front in order first (the same
networks: a genome's id is its active slots in order), so slot i of either parent is its i-th layer and genes are
blended with the same layer of the other parent, not with whatever a masked-out slot held.
"""
from __future__ import annotations

import numpy as np
from pymoo.core.crossover import Crossover
from pymoo.core.mutation import Mutation
from pymoo.operators.crossover.sbx import SBX
from pymoo.core.population import Population
from pymoo.operators.mutation.pm import PM, mut_pm
from pymoo.operators.repair.rounding import RoundingRepair

from forge.spaces.space import SearchSpace
from search.operators import ACTIVE, _join, _layers, delete, duplicate, perturb, rotate_reflect


def sbx(space: SearchSpace | None = None, prob: float = 0.9, eta: float = 15.0) -> Crossover:
    """pymoo's SBX on the grid indices, rounded (its integer recipe); `space` unused (every operator gets it)."""
    return SBX(prob=prob, eta=eta, vtype=float, repair=RoundingRepair())


def pm(space: SearchSpace | None = None, eta: float = 20.0, prob: float = 1.0) -> Mutation:
    """pymoo's polynomial mutation on the grid indices (one gene per genome on average), rounded."""
    return PM(prob=prob, eta=eta, vtype=float, repair=RoundingRepair())


def compact(X: np.ndarray, space: SearchSpace) -> np.ndarray:
    """Rows with their active layer slots moved to the front in order (stable), inactive ones after: the same
    networks (ids), with slot i holding the i-th layer."""
    Y = _layers(X, space)
    order = np.argsort(~Y[:, :, ACTIVE].astype(bool), axis=1, kind="stable")
    return _join(np.take_along_axis(Y, order[:, :, None], axis=1), X, space)


class AlignedSBX(SBX):
    """SBX between parents whose layers are aligned first (`compact`): layer i meets layer i."""

    def __init__(self, space: SearchSpace, prob: float = 0.9, eta: float = 15.0):
        super().__init__(prob=prob, eta=eta, vtype=float, repair=RoundingRepair())
        self.space = space

    def do(self, problem, pop, parents=None, *args, **kwargs):
        matings = [pop[m] for m in parents] if parents is not None else pop
        aligned = [Population.new("X", compact(np.array([ind.X for ind in m]), self.space)) for m in matings]
        return super().do(problem, aligned, None, *args, **kwargs)


class MixedMutation(Mutation):
    """Polynomial mutation on every offspring, then each layer operator on a row with its own probability
    (deletion, duplication, rotation/reflection, numeric perturbation: `search.operators`), repaired."""

    def __init__(self, space: SearchSpace, eta: float = 20.0, p_delete: float = 0.1, p_duplicate: float = 0.1,
                 p_rotate: float = 0.1, p_perturb: float = 0.0, p_gene: float = 0.1, max_step: int = 2,
                 prob: float = 1.0):
        super().__init__(prob=prob)
        self.space, self.eta = space, eta
        self.p = {"delete": p_delete, "duplicate": p_duplicate, "rotate": p_rotate, "perturb": p_perturb}
        self.p_gene, self.max_step = p_gene, max_step

    def _do(self, problem, X, *args, random_state=None, **kwargs):
        rng, sp = random_state, self.space
        n = len(X)  # pymoo's polynomial mutation, as `pm` draws it (one gene a genome on average)
        Y = mut_pm(np.asarray(X, float), problem.xl, problem.xu, np.full(n, float(self.eta)),
                   self.get_prob_var(problem, size=n), at_least_once=False, random_state=rng)
        Y = np.asarray(Y).round().astype(np.int64)
        Y = delete(Y, sp, rng, self.p["delete"])
        Y = duplicate(Y, sp, rng, self.p["duplicate"])
        Y = rotate_reflect(Y, sp, rng, self.p["rotate"])
        rows = np.flatnonzero(rng.random(len(Y)) < self.p["perturb"]) if self.p["perturb"] > 0 else []
        if len(rows):
            Y[rows] = perturb(Y[rows], sp, rng, self.max_step, self.p_gene)
        return sp.repair_x(Y)
