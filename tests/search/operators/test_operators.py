"""Operators: layer-boundary crossover, the four mutation operators, sampling, repair, determinism."""
from __future__ import annotations

import numpy as np
import pytest

from forge.spaces.space import N_GENES, load_space
from search import operators as ops


@pytest.fixture(scope="module")
def space():
    return load_space("iha-tiny")


def _slots(X, space):
    return X.reshape(len(X), space.L_max, N_GENES)


def test_crossover_cuts_at_a_layer_boundary(space):
    rng = np.random.default_rng(0)
    A, B = space.sample_x(20, rng), space.sample_x(20, rng)
    c1, c2 = ops.layer_crossover(A, B, space, np.random.default_rng(1))
    a, b, x1, x2 = (_slots(z, space) for z in (A, B, c1, c2))
    for r in range(20):
        cuts = [c for c in range(1, space.L_max)
                if np.array_equal(x1[r], np.concatenate([a[r, :c], b[r, c:]]))
                and np.array_equal(x2[r], np.concatenate([b[r, :c], a[r, c:]]))]
        assert cuts, f"row {r}: children are not a single-point layer crossover of their parents"


def test_deletion_flips_exactly_one_mask(space):
    X = space.sample_x(30, np.random.default_rng(2))
    Y = ops.delete(X, space, np.random.default_rng(3), p=1.0)
    diff = _slots(Y, space)[:, :, 0] != _slots(X, space)[:, :, 0]
    assert np.all(diff.sum(axis=1) == 1)
    assert np.array_equal(_slots(Y, space)[:, :, 1:], _slots(X, space)[:, :, 1:])


def test_duplication_copies_the_preceding_active_layer_without_aliasing(space):
    X = space.sample_x(40, np.random.default_rng(4))
    X_before = X.copy()
    Y = ops.duplicate(X, space, np.random.default_rng(5), p=1.0)
    assert np.array_equal(X, X_before)  # parents untouched
    x, y = _slots(X, space), _slots(Y, space)
    changed = 0
    for r in range(len(X)):
        rows = np.flatnonzero(np.any(x[r] != y[r], axis=1))
        assert len(rows) <= 1
        if len(rows):
            i = rows[0]
            prev = np.flatnonzero(x[r, :i, 0])[-1]
            assert np.array_equal(y[r, i], x[r, prev]) and y[r, i, 0] == 1
            changed += 1
    assert changed > 10
    Y[0, 0] += 1  # writing into the child never reaches the parent
    assert np.array_equal(X, X_before)


def _duplicate_row_by_row(X, space, rng, p):
    """The per-row loop the vectorized `duplicate` replaced (issue 26 glue): same draws, same children."""
    Y = ops._layers(X, space)
    rows = np.flatnonzero(rng.random(len(Y)) < p)
    slots = rng.integers(1, max(space.L_max, 2), size=len(rows))
    for r, i in zip(rows, slots):
        i = min(int(i), space.L_max - 1)
        prev = np.flatnonzero(Y[r, :i, 0])
        if len(prev):
            Y[r, i] = Y[r, prev[-1]].copy()
    return ops._join(Y, X, space)


@pytest.mark.parametrize("name,p", [("iha-tiny", 1.0), ("iha-tiny", 0.5), ("iha-paper-mx", 0.7)])
def test_vectorized_duplication_equals_the_row_by_row_loop(name, p):
    sp = load_space(name)
    X = ops.mutate(sp.sample_x(200, np.random.default_rng(6)), sp, np.random.default_rng(7))  # varied masks
    fast = ops.duplicate(X, sp, np.random.default_rng(8), p=p)
    assert np.array_equal(fast, _duplicate_row_by_row(X, sp, np.random.default_rng(8), p))
    assert not np.array_equal(fast, X)


def test_rotation_reflection_permutes_layers_within_a_block(space):
    X = space.sample_x(30, np.random.default_rng(6))
    Y = ops.rotate_reflect(X, space, np.random.default_rng(7), p=1.0)
    x, y = _slots(X, space), _slots(Y, space)
    moved = 0
    for r in range(len(X)):
        assert sorted(map(tuple, x[r])) == sorted(map(tuple, y[r]))  # same layers, new order
        moved += not np.array_equal(x[r], y[r])
    assert moved > 15


def test_perturbation_moves_by_grid_steps_within_bounds(space):
    X = space.sample_x(50, np.random.default_rng(8))
    Y = ops.perturb(X, space, np.random.default_rng(9), max_step=2, p_gene=0.5)
    _, xu = space.bounds()
    assert Y.min() >= 0 and np.all(Y <= xu)
    d = np.abs(_slots(Y, space)[:, :, 2:] - _slots(X, space)[:, :, 2:])
    assert d.max() <= 2 and (d > 0).mean() > 0.2


def test_mutation_output_is_repaired_and_decodable(space):
    X = space.sample_x(40, np.random.default_rng(10))
    Y = ops.mutate(X, space, np.random.default_rng(11))
    assert np.array_equal(space.repair_x(Y), Y)
    for g in space.decode(Y):
        space.validate(g)
    assert not np.array_equal(X, Y)


def test_operators_are_deterministic_given_the_generator(space):
    X = space.sample_x(10, np.random.default_rng(12))
    a = ops.mutate(X, space, np.random.default_rng(13))
    b = ops.mutate(X, space, np.random.default_rng(13))
    assert np.array_equal(a, b)


def test_sampling_around_a_seed_genome(space):
    seed = space.decode(space.sample_x(1, np.random.default_rng(14)))[0]
    X = ops.sample_around(space, seed, 12, np.random.default_rng(15))
    assert np.array_equal(X[0], space.encode([seed])[0])
    dist = np.abs(X[1:] - X[0]).sum(axis=1)
    assert np.all(dist < np.abs(space.sample_x(11, np.random.default_rng(16)) - X[0]).sum(axis=1).max())
    assert len({tuple(r) for r in X}) > 6
