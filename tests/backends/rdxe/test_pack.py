"""Properties of the balanced contiguous packing (Algorithms 1-2) against a brute-force DP."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backends.rdxe.pack import (ChipCaps, balanced_pack, brute_force_pack, candidate_budgets, greedy_partition,
                                min_stages, stage_ops)


@st.composite
def instances(draw, max_n: int = 9):
    n = draw(st.integers(1, max_n))
    ints = lambda hi: st.lists(st.integers(0, hi), min_size=n, max_size=n)  # noqa: E731
    w, kT, a = draw(ints(20)), draw(ints(20)), draw(ints(10))
    o = draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))
    caps = ChipCaps(W=draw(st.integers(5, 60)), K=draw(st.integers(5, 60)), A=draw(st.integers(5, 12)),
                    cap=draw(st.integers(1, 6)))
    return w, kT, o, a, caps


def _check_partition(part, w, kT, o, a, caps):
    assert part[-1] == len(w) and list(part) == sorted(set(part)) and part[0] > 0  # contiguous, ordered, covers
    assert len(part) <= caps.cap
    start = 0
    for end in part:
        assert sum(w[start:end]) <= caps.W and sum(kT[start:end]) <= caps.K
        assert all(x <= caps.A for x in a[start:end])
        start = end


@settings(max_examples=300, deadline=None, derandomize=True)
@given(instances())
def test_budget_equals_brute_force_optimum(inst):
    w, kT, o, a, caps = inst
    opt = brute_force_pack(w, kT, o, a, caps)
    for method in ("integer", "candidates"):
        pk = balanced_pack(w, kT, o, a, caps, method=method)
        if opt is None:
            assert pk is None
            continue
        _check_partition(pk.partition, w, kT, o, a, caps)
        assert pk.budget == opt == max(stage_ops(o, pk.partition))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(instances(), st.integers(0, 300))
def test_greedy_is_maximal_next_fit(inst, extra):
    """Algorithm 2: every sealed stage could not take the next layer; a too-big layer → None."""
    w, kT, o, a, caps = inst
    B = max(o) + extra
    part = greedy_partition(w, kT, o, a, ChipCaps(caps.W, caps.K, caps.A, cap=10**6), B)
    if any(x > caps.W for x in w) or any(x > caps.K for x in kT) or any(x > caps.A for x in a):
        assert part is None
        return
    assert part is not None
    _check_partition(part, w, kT, o, a, ChipCaps(caps.W, caps.K, caps.A, 10**6))
    start = 0
    for end in part[:-1]:
        fits = (sum(w[start:end + 1]) <= caps.W and sum(kT[start:end + 1]) <= caps.K
                and sum(o[start:end + 1]) <= B)
        assert not fits
        start = end
    assert all(s <= B for s in stage_ops(o, part))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(instances())
def test_min_stages_is_a_lower_bound_on_stage_count(inst):
    w, kT, o, a, caps = inst
    pk = balanced_pack(w, kT, o, a, caps)
    if pk is not None:
        assert min_stages(w, kT, caps.W, caps.K) <= pk.n_stages <= caps.cap
        assert pk.budget in candidate_budgets(w, kT, o, caps.W, caps.K)


def test_single_layer_larger_than_chip_is_infeasible():
    caps = ChipCaps(W=100, K=100, A=10, cap=8)
    assert balanced_pack([10, 101, 10], [1, 1, 1], [5, 5, 5], [1, 1, 1], caps) is None
    assert balanced_pack([10, 10], [1, 200], [5, 5], [1, 1], caps) is None
    assert balanced_pack([10, 10], [1, 1], [5, 5], [1, 11], caps) is None
    assert balanced_pack([], [], [], [], caps) is None


def test_ring_cap_binds_and_budget_balances():
    w, kT, a = [10] * 6, [0] * 6, [0] * 6
    o = [4, 1, 1, 1, 1, 4]
    assert balanced_pack(w, kT, o, a, ChipCaps(W=20, K=1, A=1, cap=2)) is None  # needs 3 chips of 2 layers
    pk = balanced_pack(w, kT, o, a, ChipCaps(W=60, K=1, A=1, cap=2))
    assert pk.budget == 6 and pk.partition == (3, 6)  # [4,1,1] | [1,1,4]
    pk3 = balanced_pack(w, kT, o, a, ChipCaps(W=60, K=1, A=1, cap=3))
    assert pk3.budget == 4 and pk3.partition == (1, 5, 6)  # a deeper ring lowers the longest stage
