"""The stock and mixed operators (search.operators_mix): on the grid, valid, seeded, and alignment keeps networks."""
from __future__ import annotations

import numpy as np
from pymoo.core.population import Population
from pymoo.core.problem import Problem

from forge.spaces.space import load_space
from search.operators_mix import AlignedSBX, MixedMutation, compact, pm, sbx


def _space_problem():
    space = load_space("iha-tiny")
    xl, xu = space.bounds()
    return space, Problem(n_var=space.n_var, xl=xl, xu=xu, vtype=int)


def test_compact_moves_active_layers_first_and_keeps_every_network():
    space, _ = _space_problem()
    X = space.sample_x(32, np.random.default_rng(0))
    C = compact(X, space)
    assert [g.id for g in space.decode(C)] == [g.id for g in space.decode(X)]
    act = C[:, :space.n_layer_var].reshape(len(C), space.L_max, space.n_genes)[:, :, 0]
    assert np.all(np.diff(act, axis=1) <= 0)  # 1s then 0s: slot i holds the i-th layer


def test_children_are_on_the_grid_valid_and_seeded():
    space, problem = _space_problem()
    X = space.sample_x(16, np.random.default_rng(1))
    _, xu = space.bounds()
    for cross in (sbx(space), AlignedSBX(space)):
        outs = []
        for _ in range(2):
            parents = [[Population.new("X", X[[i, i + 1]])[0], Population.new("X", X[[i, i + 1]])[1]] for i in range(0, 16, 2)]
            off = cross(problem, parents, random_state=np.random.default_rng(2))
            outs.append(np.array([ind.X for ind in off]))
        assert np.array_equal(outs[0], outs[1]) and np.all(outs[0] == np.round(outs[0]))
        assert np.all((outs[0] >= 0) & (outs[0] <= xu))
    for mut in (pm(space), MixedMutation(space, p_delete=0.5, p_duplicate=0.5, p_rotate=0.5, p_perturb=0.5)):
        a, b = (mut(problem, Population.new("X", X.astype(float)), random_state=np.random.default_rng(3)) for _ in "ab")
        Ya, Yb = (np.array([ind.X for ind in p]) for p in (a, b))
        assert np.array_equal(Ya, Yb) and np.all((Ya >= 0) & (Ya <= xu)) and not np.array_equal(Ya, X)
    Y = MixedMutation(space, p_delete=1.0)(problem, Population.new("X", X), random_state=np.random.default_rng(4))
    Y = np.array([ind.X for ind in Y]).astype(np.int64)
    assert np.array_equal(space.repair_x(Y), Y)  # repaired: valid genomes
