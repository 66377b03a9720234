"""The r:1 discrete-event simulator against paper 001's closed form (its §5.3 check: within 10 %)."""
from __future__ import annotations

import numpy as np
import pytest

from backends.serving.afd import AfdError, AfdParams, AfdWorkload, idle_fractions, optimal_ratio, throughput_per_instance
from backends.serving.afd_sim import simulate

# Coefficients with a balance point inside the sweep and communication hidden (t_A, t_F > 2 t_C, as in §5.2).
P = AfdParams(alpha_A=0.005, beta_A=50, alpha_F=0.5, beta_F=20, alpha_C=0.022, beta_C=20)
WL = AfdWorkload(B=64, mu_P=100, mu_D=100, N=1000)
RS = [1, 2, 3, 4, 8]


@pytest.fixture(scope="module")
def runs():
    return {r: simulate(P, WL, r, seed=1) for r in RS}


def test_throughput_within_ten_percent_of_theory(runs):
    for r in RS:
        theory = float(throughput_per_instance(P, WL, r))
        assert abs(runs[r].throughput_per_instance / theory - 1) < 0.10, r


def test_simulated_optimum_is_next_to_r_star(runs):
    best = max(RS, key=lambda r: runs[r].throughput_per_instance)
    assert abs(best - float(optimal_ratio(P, WL)["r_star"])) <= 1.0


def test_idle_fractions_follow_theory(runs):
    for r in RS:
        th = idle_fractions(P, WL, r)
        assert runs[r].eta_A == pytest.approx(float(th["eta_A"]), abs=0.1)
        assert runs[r].eta_F == pytest.approx(float(th["eta_F"]), abs=0.1)
    assert runs[1].eta_F > 0.4 and runs[8].eta_A > 0.5  # FFN waits at small r, attention at large r


def test_seeded_and_stochastic():
    a, b = simulate(P, WL, 3, seed=5, max_steps=200), simulate(P, WL, 3, seed=5, max_steps=200)
    c = simulate(P, WL, 3, seed=6, max_steps=200)
    assert a == b and a.makespan != c.makespan


def test_stragglers_cost_throughput_at_the_balance_point():
    """Attention time follows each instance's own load, so the barrier waits for the slowest: the simulator
    is below theory where attention and FFN balance (paper §5.3)."""
    r = 3
    sim = np.mean([simulate(P, WL, r, seed=s, max_steps=400).throughput_per_instance for s in range(3)])
    assert sim < float(throughput_per_instance(P, WL, r))


def test_nonpositive_ratio_rejected():
    with pytest.raises(AfdError, match="r = "):
        simulate(P, WL, 0)
