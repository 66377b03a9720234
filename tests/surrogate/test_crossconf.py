"""Issue 35: bins that no single row can set, the cross-conformal calibration on every label, decision metrics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from surrogate.conformal import MIN_TAIL, ConformalInterval, ScoreBins
from surrogate.decision import bootstrap, decision_table, optimism_best10, overlap_at, regret_at


def test_a_small_bin_is_pooled_with_its_neighbours_so_no_single_row_sets_its_bound():
    mu = np.r_[np.full(36, 2.5), np.full(300, 3.0)]
    score = np.r_[np.full(35, 0.1), 2.25, np.full(300, 0.3)]  # the best bin holds one wild row
    b = ScoreBins(edges=(2.75,), scores=(tuple(np.sort(score[:36])), tuple(score[36:])))
    # alone, the 36-row bin's 95 % rank is its 36th score, the wild row: 2.25. Pooled, it is a typical score
    alone = np.sort(score[:36])[math.ceil(37 * 0.95) - 1]
    assert alone == 2.25 and b.quantile(0.95)[0] == pytest.approx(0.3)
    assert b.quantile(0.8)[0] == pytest.approx(0.1)  # at 80 % the bin has >= MIN_TAIL scores beyond: its own
    assert len(b.pooled(0, 0.95)) - math.ceil((len(b.pooled(0, 0.95)) + 1) * 0.95) + 1 >= MIN_TAIL


def test_pooling_gives_finite_bounds_at_95_percent_where_the_old_bins_gave_infinity():
    rng = np.random.default_rng(0)
    mu = rng.uniform(2.0, 4.0, 354)
    cal = ConformalInterval.fit(mu + rng.normal(0, 0.1, 354), mu)
    lo, hi = cal.interval(mu, np.zeros(len(mu)), 0.95)
    assert np.isfinite(lo).all() and np.isfinite(hi).all()


def test_decision_metrics_on_a_hand_checked_case():
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    p = np.array([2.0, 1.0, 3.5, 3.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert regret_at(1)(y, p) == 1.0  # the best-predicted row has true loss 2, the true best is 1
    assert regret_at(2)(y, p) == 0.0
    assert overlap_at(4)(y, p) == 1.0 and overlap_at(3)(y, p) == pytest.approx(2 / 3)
    assert optimism_best10(y, p) == 1.0  # best-predicted row: true 2 − predicted 1
    ci = bootstrap(y, p, regret_at(2), reps=200)
    assert ci["ci95"][0] <= ci["value"] <= ci["ci95"][1]


def test_decision_table_resamples_architectures_and_is_seeded():
    rng = np.random.default_rng(1)
    y = rng.normal(3, 0.5, 200)
    p = y + rng.normal(0, 0.2, 200)
    ids = [f"a{i // 2}" for i in range(200)]
    a, b = decision_table(y, p, ids, reps=100), decision_table(y, p, ids, reps=100)
    assert a == b and set(a) == {"regret_at_10", "overlap_at_10", "optimism_best10"}
    assert decision_table(y, y, ids, reps=50)["regret_at_10"]["value"] == 0.0


def test_the_shipped_all_labels_predictor_is_calibrated_on_every_label_by_nested_grouped_cv(shared_csv):
    """The cross-conformal check reproduces from the out-of-fold file and meets issue 35 §2's targets."""
    from pathlib import Path

    from surrogate.crossconf import nested_check, oof_rows
    from surrogate.loading import load_predictor

    p = load_predictor("forgeformer-iha-paper-all")
    prov = p.conformal.provenance
    oof = Path(__file__).resolve().parents[2] / "bench" / "results" / "grouped_cv_oof.npz"
    y, pred, fold, _ = oof_rows(oof)
    assert prov["n_rows"] == len(y) == 1753 and p.meta["n_train"] == 1753
    again = nested_check(y, pred, fold)
    for k, v in prov["cv_check"]["conformal-residual"].items():
        assert np.allclose(again[k], v, rtol=1e-6, atol=1e-4), k  # stored at 4 decimals
    assert 0.025 <= again["below"] <= 0.075 and 0.025 <= again["above"] <= 0.075
    assert 0.85 <= again["coverage_best10"] <= 0.95 and again["width_best10"] <= again["width"]


def test_mode_calibrate_refuses_the_cross_conformal_checkpoint_in_one_line(tmp_path):
    from hydra import compose, initialize_config_module

    from forge.errors import UserError
    from surrogate.cli import run

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose(config_name="forge-surrogate",
                      overrides=["mode=calibrate", "ckpt=forgeformer-iha-paper-all", f"out_dir={tmp_path}"])
    with pytest.raises(UserError, match="cross-conformally on grouped out-of-fold rows"):
        run(cfg)
