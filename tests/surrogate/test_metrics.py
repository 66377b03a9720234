import numpy as np
import pytest

from surrogate.metrics import METRICS, evaluate, k_at, summarize


def test_perfect_and_reversed_rankings():
    y = np.linspace(2.0, 4.0, 200)
    perfect = evaluate(y, y + 0.1)
    assert perfect["spearman"] == pytest.approx(1.0) and perfect["kendall"] == pytest.approx(1.0)
    assert perfect["mae"] == pytest.approx(0.1) and perfect["mae_at_5"] == pytest.approx(0.1)
    assert perfect["k_at_1"] == 2 and perfect["k_at_5"] == 10  # ceil(1% / 5% of 200): nothing extra needed
    rev = evaluate(y, -y)
    assert rev["spearman"] == pytest.approx(-1.0) and rev["k_at_1"] == 200


def test_k_at_is_worst_predicted_rank_of_true_top():
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    p = np.array([5.0, 1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0])  # true best predicted 5th
    assert k_at(y, p, 10) == 5


def test_mae_at_5_only_looks_at_true_top_rows():
    y = np.arange(100, dtype=float)
    p = y.copy()
    p[50:] += 1.0  # errors only outside the top 5%
    assert evaluate(y, p)["mae_at_5"] == 0.0 and evaluate(y, p)["mae"] == pytest.approx(0.5)


def test_summary_and_bad_input():
    runs = [dict.fromkeys(METRICS, 1.0), dict.fromkeys(METRICS, 3.0)]
    s = summarize(runs)
    assert s["spearman"] == {"mean": 2.0, "std": 1.0}
    with pytest.raises(ValueError, match="non-finite"):
        evaluate([1.0, np.nan], [1.0, 2.0])
