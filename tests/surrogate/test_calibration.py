import numpy as np
import pytest
from scipy import stats

from surrogate.calibration import LowEndStretch
from surrogate.metrics import evaluate


def _bimodal(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([rng.normal(2.6, 0.15, int(0.7 * n)), rng.normal(3.5, 0.3, n - int(0.7 * n))])
    return y, rng


def test_stretch_keeps_the_order_and_only_moves_the_low_tail():
    c = LowEndStretch(cut=3.0, k=2.0)
    mu = np.array([2.0, 2.5, 2.9, 3.0, 3.5])
    m2, s2 = c.apply(mu, np.full(5, 0.1))
    assert np.allclose(m2, [1.0, 2.0, 2.8, 3.0, 3.5])
    assert np.allclose(s2, [0.2, 0.2, 0.2, 0.1, 0.1])  # σ stretched by the slope
    assert (np.diff(m2) > 0).all()
    same = LowEndStretch(cut=3.0, k=1.0).apply(mu, np.zeros(5))[0]
    assert np.array_equal(same, mu)


def test_fit_undoes_shrinkage_toward_the_middle_without_changing_ranks():
    y, rng = _bimodal()
    pred = 2.9 + 0.6 * (y - 2.9) + rng.normal(0, 0.05, len(y))  # best rows predicted too high
    c = LowEndStretch.fit(pred, y)
    assert c.k > 1.0
    mu = c.apply(pred, np.zeros_like(pred))[0]
    before, after = evaluate(y, pred), evaluate(y, mu)
    assert after["mae_at_5"] < 0.6 * before["mae_at_5"]
    assert stats.spearmanr(pred, mu).statistic == pytest.approx(1.0)
    assert after["spearman"] == pytest.approx(before["spearman"])


def test_fit_leaves_calibrated_predictions_alone():
    y, rng = _bimodal(seed=1)
    assert LowEndStretch.fit(y + rng.normal(0, 0.01, len(y)), y).k == 1.0


@pytest.mark.parametrize("cut,k", [(2.0, 0.5), (2.0, 11.0), (float("nan"), 1.5), (2.0, float("inf"))])
def test_invalid_stretch_is_refused(cut, k):
    with pytest.raises(ValueError, match="allowed"):
        LowEndStretch(cut, k)


def test_bad_fitting_data_and_dicts_are_refused():
    y, _ = _bimodal()
    with pytest.raises(ValueError, match=">= 20 held-out rows"):
        LowEndStretch.fit(y[:10], y[:10])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        LowEndStretch.fit(bad, y)
    with pytest.raises(ValueError, match="allowed"):
        LowEndStretch.from_dict({"cut": 2.0})
    assert LowEndStretch.from_dict(LowEndStretch(2.5, 1.5).to_dict()) == LowEndStretch(2.5, 1.5)
