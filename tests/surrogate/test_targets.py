import numpy as np
import pytest

from surrogate.targets import TargetMap


def _bimodal(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(2.7, 0.1, int(n * 0.7)), rng.normal(5.0, 0.6, n - int(n * 0.7))])


@pytest.mark.parametrize("kind", ["raw", "standard", "normal_scores"])
def test_target_map_roundtrips_training_losses_and_its_dict(kind):
    y = _bimodal()
    t = TargetMap.fit(y, kind)
    z = t.to_target(y)
    assert np.isfinite(z).all()
    assert np.allclose(t.to_loss(z), y, atol=1e-6 if kind != "normal_scores" else 0.02)
    u = TargetMap.from_dict(t.to_dict())
    assert u.kind == kind and np.allclose(u.to_loss(z), t.to_loss(z), atol=1e-5)


def test_normal_scores_are_rank_gauss_and_stay_in_the_training_range():
    y = _bimodal()
    t = TargetMap.fit(y, "normal_scores")
    z = t.to_target(y)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.05  # ~N(0, 1) whatever the shape of y
    assert np.array_equal(np.argsort(z, kind="stable"), np.argsort(y, kind="stable"))  # order kept
    far = t.to_loss(np.array([-40.0, 40.0]))
    assert far[0] == pytest.approx(y.min()) and far[1] == pytest.approx(y.max())


def test_unknown_target_kind_is_refused():
    with pytest.raises(ValueError, match="allowed: raw | standard | normal_scores"):
        TargetMap.fit(np.ones(3), "log")


def test_old_sidecars_without_kind_still_load():
    assert TargetMap.from_dict({"mean": 3.0, "std": 0.5}).kind == "standard"
    assert TargetMap.from_dict({"mean": 0.0, "std": 1.0}).kind == "raw"


def test_normal_scores_keep_a_compact_quantile_grid():
    from surrogate.targets import GRID

    y = _bimodal(n=5000, seed=1)
    t = TargetMap.fit(y, "normal_scores")
    assert len(t.grid_y) == GRID and t.grid_y[0] == y.min() and t.grid_y[-1] == y.max()
    z = t.to_target(y)
    assert abs(z.mean()) < 0.01 and np.abs(t.to_loss(z) - y).max() < 0.05
    small = TargetMap.fit(y[:100], "normal_scores")
    assert np.array_equal(small.grid_y, np.sort(y[:100]))  # small sets keep every training loss
    with pytest.raises(ValueError, match="grid_q and grid_y"):
        TargetMap.from_dict({"kind": "normal_scores", "mean": 0.0, "std": 1.0})
