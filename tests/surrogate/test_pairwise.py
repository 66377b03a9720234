"""Pairwise odds (issue 51 §1): P(lower μ trains better | Δμ), fit on held-out pairs, checked on a fold it was not
fit on, stored in every checkpoint's sidecar with the hash of the rows it came from."""
from __future__ import annotations

import json

import numpy as np
import pytest

from surrogate.pairwise import PairwiseOdds, cross_check, pairs, rows_hash

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_pairs_count_the_lower_mu_members_wins_within_one_model_and_band():
    mu = np.array([2.0, 2.1, 2.3, 3.5, 2.0, 2.2])
    y = np.array([2.5, 2.4, 2.6, 2.0, 1.0, 1.0])
    ids = np.array(["a", "b", "c", "d", "a", "e"])
    model = np.array([0, 0, 0, 0, 1, 1])
    d, w = pairs(mu, y, ids, model, band=1.0)
    # model 0: d (3.5) is outside the band of 2.0; pairs ab (b wins: 0), ac (a wins: 1), bc (b wins: 1);
    # model 1: a-e is a tie in the label (0.5); never a pair across models, never one architecture with itself
    assert sorted(zip(np.round(d, 6), w)) == [(0.1, 0.0), (0.2, 0.5), (0.2, 1.0), (0.3, 1.0)]


def test_the_curve_is_monotone_bounded_and_rounded():
    rng = np.random.default_rng(0)
    mu = rng.uniform(2.0, 3.0, 300)
    y = mu + rng.normal(0, 0.05, 300)
    ids = np.array([f"g{j}" for j in range(300)])
    odds = PairwiseOdds.fit(mu, y, ids, np.zeros(300, int), np.arange(300) % 5, source="synthetic")
    p = odds.prob(np.linspace(0, 1, 50))
    assert (np.diff(p) >= 0).all() and p.min() >= 0.5 and p.max() <= 1.0 and np.array_equal(p, np.round(p, 2))
    assert odds.prob([0.3]) == odds.prob([-0.3])  # a gap is a gap, whichever member is named first
    assert odds.provenance["rows_hash"] == rows_hash(mu, y, ids) and odds.provenance["check"]["folds"] == 5
    assert PairwiseOdds.from_dict(json.loads(json.dumps(odds.to_dict()))).prob([0.1]) == odds.prob([0.1])
    assert odds.inherited("base").provenance["inherited_from"] == "base" and odds.inherited("base").x == odds.x


@pytest.mark.parametrize("bad", [[], "x", {"x": [0, 1], "p": [0.9, 0.6]}, {"x": [1, 0], "p": [0.5, 0.6]},
                                 {"x": [0, 1], "p": [0.4, 0.6]}, {"x": [0, "a"], "p": [0.5, 0.6]},
                                 {"x": [0, 1], "p": [0.5]}, {"x": [0, 1], "p": [0.5, 0.6], "band": -1},
                                 {"x": list(range(5000)), "p": [0.5] * 5000}, {"x": [0, float("nan")], "p": [.5, .6]}])
def test_a_sidecar_curve_that_this_module_could_not_have_written_is_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="pairwise") as e:
        PairwiseOdds.from_dict(bad)
    assert "\n" not in str(e.value) and "allowed:" in str(e.value)


def test_fit_on_four_folds_checked_on_the_fifth_within_0_05_per_bin(shared_data):
    """The shipped predictor's out-of-fold pairs: per held-out fold, each Δμ bin of >= 100 pairs is within 0.05."""
    from surrogate.calibration import LowEndStretch
    from surrogate.crossconf import oof_rows

    y, pred, fold, ids = oof_rows(ROOT / "bench" / "results" / "grouped_cv_oof.npz")
    mu = np.zeros(len(y))
    for f in np.unique(fold):  # the stretch cross-fitted too: nothing about fold f is fit on fold f
        r, t = fold != f, fold == f
        mu[t] = LowEndStretch.fit(pred[r], y[r]).apply(pred[t], np.zeros(t.sum()))[0]
    check = cross_check(mu, y, ids, fold, fold)
    assert check["folds"] == 5 and check["checked_bins"] >= 30
    assert check["max_error"] <= 0.05, check["bins"]


def test_every_shipped_checkpoint_carries_odds_and_names_where_they_came_from():
    from surrogate.loading import load_predictor

    for name in ("forgeformer-iha-paper-all", "forgeformer-iha-paper", "forgeformer-iha-tiny",
                 "forgeformer-iha-tiny-swa"):
        odds = load_predictor(ROOT / "data" / "surrogate" / name).pairwise
        assert odds is not None and odds.prob([0.0])[0] == pytest.approx(0.5, abs=0.03)
        prov = odds.provenance
        assert prov["n_pairs"] >= 1000 and len(prov["rows_hash"]) == 16 and prov["source"]
