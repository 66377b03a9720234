"""Chip Pareto: the joint non-dominated filter and the documented top-K order."""
from __future__ import annotations

import numpy as np
import pytest

from backends.rdxe.pareto import OBJECTIVES, dedupe, in_envelope, rank_front, top_k


def _sim(F):
    return {o: F[:, j] for j, o in enumerate(OBJECTIVES)} | {"power_mw": F[:, 0] * 10}


def _brute_front(F):
    dom = lambda a, b: (a <= b).all() and (a < b).any()  # noqa: E731
    return {i for i in range(len(F)) if not any(dom(F[j], F[i]) for j in range(len(F)))}


@pytest.mark.parametrize("seed", range(5))
def test_top_k_is_the_non_dominated_front(seed):
    F = np.random.default_rng(seed).integers(1, 6, size=(40, 4)).astype(float)
    chosen, n_front = top_k(_sim(F), np.ones(40, bool), k=100, rank_by="balanced")
    assert set(chosen.tolist()) == _brute_front(F) and n_front == len(chosen)
    ok = np.arange(40) % 2 == 0
    sub, _ = top_k(_sim(F), ok, k=3, rank_by="energy")
    assert len(sub) <= 3 and ok[sub].all()
    assert F[sub[0], 2] == F[ok][:, 2].min()


def test_balanced_order_is_scale_free_and_prefers_the_even_compromise():
    F = np.array([[1.0, 10.0, 10.0, 10.0], [2.0, 2.0, 2.0, 2.0], [10.0, 1.0, 10.0, 10.0]])
    assert rank_front(F)[0] == 1
    scaled = F * np.array([1e3, 1.0, 1e-3, 7.0])
    assert (rank_front(scaled) == rank_front(F)).all()
    assert rank_front(F, "ttft")[0] == 0 and rank_front(F, "tpot")[0] == 2


def test_envelope_and_dedupe():
    F = np.array([[1.0, 1, 1, 50], [1.0, 1, 1, 150], [100.0, 1, 1, 150]])
    assert in_envelope(_sim(F), (100, 2500), None).tolist() == [False, True, True]
    assert in_envelope(_sim(F), (100, 2500), (0, 20)).tolist() == [False, True, False]
    assert in_envelope(_sim(F), None, None).all()
    assert dedupe(["a", "b", "a", "c", "b"]) == [0, 1, 3]
