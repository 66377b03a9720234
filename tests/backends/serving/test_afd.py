"""Paper 001's closed form: the r* it prints for Table 2, both T̄ forms, regimes and bad input."""
from __future__ import annotations

import numpy as np
import pytest

from backends.serving.afd import (AfdError, AfdParams, AfdWorkload, idle_fractions, mean_load, optimal_ratio,
                                  throughput_per_instance)

TABLE2 = AfdParams(alpha_A=0.00165, beta_A=50, alpha_F=0.083, beta_F=100, alpha_C=0.022, beta_C=20)


@pytest.mark.parametrize("kw, printed", [
    ({}, 9.30),                 # §5.3 baseline: B=256, mu_P=100, mu_D=500, N=10,000
    ({"B": 128}, 7.08),         # §5.4 batch ablation (7.0745 by the formulas)
    ({"mu_D": 100}, 2.17),      # §5.4 workload ablation (r_peak wins)
    ({"mu_P": 500}, 17.25),
])
def test_paper_printed_ratios(kw, printed):
    assert float(optimal_ratio(TABLE2, AfdWorkload(**kw))["r_star"]) == pytest.approx(printed, abs=0.006)


def test_b512_formula_value_not_the_printed_one():
    """The paper prints 10.31 for B = 512; its own Eq. 13/19 give 10.22 (README: Serving)."""
    r = float(optimal_ratio(TABLE2, AfdWorkload(B=512))["r_star"])
    assert r == pytest.approx(10.22, abs=0.005) and abs(r - 10.31) > 0.05


def test_tbar_forms_agree_for_large_n_and_limit():
    wl = dict(B=256, mu_P=100, mu_D=500, N=10_000)
    exact, asym = mean_load(AfdWorkload(**wl)), mean_load(AfdWorkload(**wl, tbar="asymptotic"))
    inf = mean_load(AfdWorkload(**wl, tbar="infinite"))
    assert exact == pytest.approx(asym, rel=1e-9)
    assert inf == pytest.approx(256 * (100 + 499)) and inf - exact == pytest.approx(499 * 256 ** 2 / 10_000, rel=1e-6)
    small = mean_load(AfdWorkload(B=256, mu_P=100, mu_D=500, N=300))  # short horizon: the cache has not filled
    assert small < asym < inf


def test_throughput_peaks_at_r_star_and_idles_cross():
    wl = AfdWorkload()
    r_star = float(optimal_ratio(TABLE2, wl)["r_star"])
    rs = np.linspace(0.5, 40, 2000)
    thr = throughput_per_instance(TABLE2, wl, rs)
    assert abs(rs[np.argmax(thr)] - r_star) < 0.05
    idle = idle_fractions(TABLE2, wl, [1.0, r_star, 32.0])
    # paper §5.3 (simulated): eta_F > 60 % at r = 1, eta_A > 60 % at r = 32; the closed form gives 59 % and 62 %
    assert idle["eta_F"][0] > 0.55 and idle["eta_A"][2] > 0.6
    assert idle["eta_A"][1] == pytest.approx(0, abs=1e-9) and idle["eta_F"][1] == pytest.approx(0, abs=1e-9)


def test_vectorized_over_genomes():
    p = AfdParams(alpha_A=np.array([0.00165, 0.0033]), beta_A=50, alpha_F=0.083, beta_F=100)
    r = optimal_ratio(p, AfdWorkload())["r_star"]
    assert r.shape == (2,) and r[1] > r[0]


@pytest.mark.parametrize("bad", [0, -1.0, [2.0, 0.0]])
def test_nonpositive_ratio_is_one_line_error(bad):
    with pytest.raises(AfdError, match="allowed: numbers > 0"):
        throughput_per_instance(TABLE2, AfdWorkload(), bad)


def test_bad_params_and_workload():
    with pytest.raises(AfdError, match="afd.params.gamma is unknown"):
        AfdParams.from_config({"alpha_A": 1, "beta_A": 1, "alpha_F": 1, "beta_F": 1, "gamma": 2})
    with pytest.raises(AfdError, match="alpha_F"):
        AfdParams(1, 1, 0, 1)
    with pytest.raises(AfdError, match="afd.tbar"):
        AfdWorkload(tbar="approx")
