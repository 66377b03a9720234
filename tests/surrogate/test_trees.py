import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from surrogate.trees import RankForest, _flatten, tree_features


def test_flattened_forest_predicts_exactly_like_sklearn():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)).astype(np.float32) * np.array([1, 1e7, 3, 1e-3, 50, 1], np.float32)
    X[:, 2] = np.round(X[:, 2])  # ties and integer-valued features, like layer counts
    y = X[:, 0] + np.sin(X[:, 2]) + rng.normal(scale=0.1, size=300)
    rf = RandomForestRegressor(n_estimators=12, max_features=0.5, min_samples_leaf=3, random_state=0).fit(X, y)
    f = RankForest("agg", None, _flatten(rf))
    Xt = np.concatenate([X, rng.normal(size=(200, 6)).astype(np.float32) * X.std(0)])
    assert np.allclose(f.predict_z(Xt), rf.predict(Xt), atol=1e-6)


def test_rank_forest_roundtrips_through_tensors(tiny_jsonl):
    from surrogate.dataset import load_labelset

    data = load_labelset(tiny_jsonl)
    g, y = data.genomes, data.y
    f = RankForest.fit(g, y, "full", n_trees=8, seed=0, L_max=12)
    t = f.tensors("f0")
    g2 = RankForest.from_tensors(t, "f0", f.meta(), 12)
    assert np.array_equal(f.predict(g), g2.predict(g))
    p = f.predict(g)
    assert y.min() <= p.min() and p.max() <= y.max()  # mapped back through the training quantiles
    t["f0.value"] = t["f0.value"][:-1]
    with pytest.raises(ValueError, match="unequal length"):
        RankForest.from_tensors(t, "f0", f.meta(), 12)


def test_features_see_the_first_attention_layer_width(tiny_jsonl):
    from forge.genomes.labels import read_labels

    from dataclasses import replace

    g = next(lab.genome for lab in read_labels(tiny_jsonl)
             if lab.genome.layers[0].attn and lab.genome.layers[0].active and lab.genome.layers[0].d_v != 64)
    wide = g.with_layers([replace(g.layers[0], d_v=64)] + list(g.layers[1:]))
    a, b = tree_features([g, wide], "agg", 12)
    assert not np.array_equal(a, b) or g.layers[0].d_v == 64
    with pytest.raises(ValueError, match="allowed: agg | full"):
        tree_features([g], "deep")


def test_forest_spread_is_the_std_of_every_trees_own_prediction(tiny_jsonl):
    from surrogate.dataset import load_labelset
    from surrogate.targets import TargetMap
    from surrogate.trees import forests_predict, forests_predict_spread, tree_views

    data = load_labelset(tiny_jsonl)
    g, y = data.genomes, data.y
    X = tree_views(g, 12)["agg"].astype(np.float32)
    target = TargetMap.fit(y, "normal_scores")
    rf = RandomForestRegressor(n_estimators=9, max_features=0.3, min_samples_leaf=3, random_state=0)
    rf.fit(X, target.to_target(y))
    f = RankForest("agg", target, _flatten(rf), 12)
    mean, spread = forests_predict_spread([f], g)
    per_tree = np.stack([target.to_loss(est.predict(X)) for est in rf.estimators_], axis=1)
    assert np.allclose(spread, per_tree.std(1), atol=1e-6) and (spread > 0).any()
    assert np.array_equal(mean, forests_predict([f], g))


def test_extra_trees_forest_round_trips_and_a_weighted_blend_moves_the_prediction(tiny_jsonl, tmp_path):
    from surrogate.dataset import load_labelset
    from surrogate.loading import load_predictor
    from surrogate.trees import fit_forests

    data = load_labelset(tiny_jsonl)
    f = fit_forests(data, None, 6, 0, 12, extra_trees=6)
    assert [x.kind for x in f] == ["rf", "rf", "et"] and f[2].view == "full" and f[2].oob is None
    et = RankForest.from_tensors(f[2].tensors("f2"), "f2", f[2].meta(), 12)
    assert et.kind == "et" and np.array_equal(et.predict(data.genomes), f[2].predict(data.genomes))
    p = load_predictor("forgeformer-iha-tiny")
    p.forests, p.nn_weight = f, 0.0
    even = p.predict(data.genomes)[0]
    p.forest_weights = [0.0, 0.0, 1.0]
    assert np.allclose(p.predict(data.genomes)[0], f[2].predict(data.genomes))  # only the extra trees count
    assert not np.allclose(even, p.predict(data.genomes)[0])
    p.save(tmp_path / "ck")
    q = load_predictor(tmp_path / "ck")
    assert q.forest_weights == [0.0, 0.0, 1.0] and np.array_equal(q.predict(data.genomes)[0], p.predict(data.genomes)[0])


def test_the_joint_walk_finds_each_forests_own_leaves():
    """surrogate.tree_walk.joint_leaves (the hybrid's forests in one walk) = each forest's own leaves_z, bit for
    bit, on the shipped hybrid's three forests (two of them on the same view) and features near their splits."""
    from surrogate.loading import load_predictor
    from surrogate.tree_walk import join_forests, joint_leaves

    forests = load_predictor("forgeformer-iha-paper-all").forests
    assert len(forests) == 3
    rng = np.random.default_rng(7)
    for n in (1, 5, 48):
        views = {}
        for view in {f.view for f in forests}:
            mine = [f for f in forests if f.view == view]
            cols = int(max(f.a["feature"].max() for f in mine)) + 1
            X = np.zeros((n, cols), np.float32)
            for j in range(cols):  # values at, just below and just above real split points: both branches taken
                th = np.concatenate([f.a["threshold"][(f.a["feature"] == j) & (f.a["right"] >= 0)] for f in mine])
                X[:, j] = (rng.choice(th, n) + rng.choice([-1e-3, 0.0, 1e-3], n)) if len(th) else 0.0
            views[view] = X
        for f, z in zip(forests, joint_leaves(join_forests(forests), views)):
            assert np.array_equal(z, f.leaves_z(views[f.view]))


def test_the_predictor_joins_its_forests_once_and_no_module_holds_them():
    """The joint walk's arrays are the predictor's own (`joint`, made when its forests arrive), not a module-level
    cache keyed by object identity that keeps forests alive; its predictions are each forest's own walk, bit for bit."""
    import surrogate.tree_walk
    import surrogate.trees
    from forge.spaces.space import load_space
    from surrogate.loading import load_predictor
    from surrogate.trees import forests_predict

    p = load_predictor("forgeformer-iha-paper-all")
    assert p.joint is not None and p.joint.holds(p.forests)
    genomes = load_space("iha-paper").sample(24, np.random.default_rng(3))
    mu, _ = p.predict(genomes)
    own = np.average([forests_predict([f], genomes) for f in p.forests], axis=0, weights=p.forest_weights)
    assert np.array_equal(forests_predict(p.forests, genomes, None, p.forest_weights, p.joint), own)
    forests, joint = p.forests, p.joint
    p.forests = list(forests)  # new forests (a refit): joined again, on the predictor
    assert p.joint is not joint and p.joint.holds(p.forests) and np.array_equal(p.predict(genomes)[0], mu)
    for module in (surrogate.tree_walk, surrogate.trees):
        held = [k for k, v in vars(module).items() if _reaches(v, {id(f) for f in forests})]
        assert held == [], f"{module.__name__} holds forests in {held}"


def _reaches(v, ids: set[int], depth: int = 4) -> bool:
    """Whether a module-level container holds one of the objects `ids`, a few containers deep."""
    if id(v) in ids:
        return True
    if depth and isinstance(v, (list, tuple, set, dict)):
        items = [*v.keys(), *v.values()] if isinstance(v, dict) else v
        return any(_reaches(x, ids, depth - 1) for x in items)
    return False
