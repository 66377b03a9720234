"""The pymoo problem: objectives/constraints by name, caching by genome id, infeasibility, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from backends.interface import Workload
from forge.numeric import round_sig
from search.components import check_predictor_space
from search.constraints import parse_constraint
from search.duplicates import IdDuplicateElimination
from search.evaluators import LossEvaluator, label_hook
from search.errors import SearchConfigError
from search.problem import ForgeProblem
from search.settings import settle_config
from tests.search.fakes import FakeBackend, FakePredictor, fake_loss

OBJ = ["val_loss", "ttft_ms", "tpot_ms", "energy_per_token_uj"]


def _problem(space, objectives=OBJ, constraints=("val_loss < 3.8",), backend=None, predictor=None):
    return ForgeProblem(space, LossEvaluator(predictor or FakePredictor()), backend or FakeBackend(),
                        Workload(), objectives, list(constraints))


def test_f_and_g_follow_the_config(tiny_space):
    p = _problem(tiny_space, constraints=["val_loss < 3.8", "ttft_ms <= 0.01"])
    X = tiny_space.sample_x(16, np.random.default_rng(0))
    out = {}
    p._evaluate(X, out)
    genomes = tiny_space.decode(X)
    assert out["F"].shape == (16, 4) and out["G"].shape == (16, 3)
    assert np.array_equal(out["F"][:, 0], round_sig(fake_loss(genomes)))  # 6 significant digits (forge.numeric)
    assert np.allclose(out["G"][:, 0], round_sig(fake_loss(genomes)) - 3.8)
    assert np.allclose(out["G"][:, 1], out["F"][:, 1] - 0.01)
    assert np.all(out["G"][:, 2] == 0)  # all fit the fake chip


def test_extra_and_model_objectives(tiny_space):
    p = _problem(tiny_space, objectives=["val_loss", "params", "area_mm2"])
    X = tiny_space.sample_x(5, np.random.default_rng(1))
    out = {}
    p._evaluate(X, out)
    assert np.allclose(out["F"][:, 2], out["F"][:, 1] / 1e6)  # fake area = params / 1e6


def test_unknown_objective_lists_valid_names(tiny_space):
    with pytest.raises(SearchConfigError, match=r"'latency'.*allowed:.*area_mm2.*energy_per_token_uj.*val_loss"):
        _problem(tiny_space, objectives=["val_loss", "latency"])
    with pytest.raises(SearchConfigError, match="constraint"):
        parse_constraint("val_loss is small")
    with pytest.raises(SearchConfigError, match="unknown"):
        _problem(tiny_space, constraints=["watts <= 3"])


def test_hardware_infeasible_genomes_violate_a_constraint(tiny_space):
    p = _problem(tiny_space, backend=FakeBackend(max_params=1.0e6))
    X = tiny_space.sample_x(30, np.random.default_rng(2))
    out = {}
    p._evaluate(X, out)
    _, m = p.metrics(X)
    bad = m["params"] > 1.0e6
    assert bad.any() and (~bad).any()
    assert np.all(out["G"][bad, -1] > 0) and np.all(out["G"][~bad, -1] == 0)
    assert np.all(np.isfinite(out["F"]))  # inf costs become large finite numbers for pymoo
    assert "fake chip" in m["reason"][bad][0]


def test_results_are_cached_by_genome_id(tiny_space):
    backend, pred = FakeBackend(), FakePredictor()
    p = _problem(tiny_space, backend=backend, predictor=pred)
    X = tiny_space.sample_x(10, np.random.default_rng(3))
    p.metrics(X)
    calls = (backend.calls, pred.calls)
    p.metrics(X[::-1])
    assert (backend.calls, pred.calls) == calls
    p.evaluator.swap(FakePredictor(offset=0.5))  # a new surrogate version re-predicts, costs stay cached
    _, m = p.metrics(X)
    assert np.allclose(m["val_loss"], fake_loss(tiny_space.decode(X)) + 0.5) and backend.calls == calls[0]


def test_duplicates_are_judged_by_genome_id(tiny_space):
    from pymoo.core.population import Population

    p = _problem(tiny_space)
    X = tiny_space.sample_x(3, np.random.default_rng(4))
    Y = X.copy().reshape(3, tiny_space.L_max, 7)
    off = np.flatnonzero(Y[0, :, 0] == 0)
    if len(off) == 0:  # make sure row 0 has a pruned slot, then change only that slot
        Y[0, -1, 0], off = 0, np.array([tiny_space.L_max - 1])
    Y = Y.reshape(3, -1)
    Z = Y.copy().reshape(3, tiny_space.L_max, 7)
    Z[0, off[0], 2:] = (Z[0, off[0], 2:] + 1) % 2  # pruned-slot fields do not change the network
    pop = Population.new("X", np.vstack([Y, Z.reshape(3, -1)[:1]]))
    dup = IdDuplicateElimination(p.ids)._do(pop, None, np.zeros(len(pop), bool))
    assert dup.tolist() == [False, False, False, True]


def test_surrogate_for_another_space_is_refused(tiny_space):
    pred = FakePredictor(space={"name": "iha-paper", "d_model": 768, "block_size": 1024, "vocab_size": 50257,
                                "L_max": 40})
    with pytest.raises(SearchConfigError, match="does not match space 'iha-tiny'.*d_model"):
        check_predictor_space(pred, tiny_space, "forgeformer-iha-paper")
    ok = FakePredictor(space={"name": "iha-tiny", "d_model": 128, "block_size": 256, "vocab_size": 256, "L_max": 12})
    check_predictor_space(ok, tiny_space, "tiny")


def test_beta_needs_mc_passes():
    with pytest.raises(SearchConfigError, match="n_mc"):
        LossEvaluator(FakePredictor(), beta=1.0, n_mc=0)
    ev = LossEvaluator(FakePredictor(), beta=2.0, n_mc=4)
    from forge.spaces.space import load_space

    g = load_space("iha-tiny").sample(3, np.random.default_rng(5))
    loss, mu, sigma = ev(g)
    assert np.allclose(loss, mu - 2.0 * sigma) and np.all(sigma > 0)


def test_beta_uses_the_calibrated_lower_tail_when_the_predictor_has_one():
    """With a two-tailed calibration, β multiplies (μ − lo) / z: β = z reaches the calibrated lower bound."""
    from forge.spaces.space import load_space
    from surrogate.conformal import ConformalInterval

    class Calibrated(FakePredictor):
        def interval(self, mu, sigma, level):
            return self.cal.interval(mu, sigma, level)

    rng = np.random.default_rng(0)
    m = rng.uniform(2.5, 3.5, 400)
    y = m + rng.normal(0, 0.02, 400) + rng.exponential(0.2, 400) * (rng.random(400) < 0.3)
    pred = Calibrated()
    pred.cal = ConformalInterval.fit(y, m, m, np.full(400, 0.05), bins=1)
    ev = LossEvaluator(pred, beta=1.6448536269514722, n_mc=4, level=0.9)
    g = load_space("iha-tiny").sample(3, np.random.default_rng(5))
    loss, mu, sigma = ev(g)
    lo, _ = pred.interval(mu, sigma, 0.9)
    assert np.allclose(loss, lo) and not np.allclose(loss, mu - 1.6448536269514722 * sigma)


def test_train_mode_trains_every_candidate_and_inf_labels_are_infeasible(tiny_space, tmp_path):
    from forge import plugins
    from search.components import build_evaluator

    cfg = {"evaluator": {"kind": "train", "trainer": {"_target_": "tests.search.fakes.FakeTrainer"}}}
    plugins.trust(cfg)  # the test's own config, as a command's run(cfg) declares it
    ev = build_evaluator(settle_config(cfg), tiny_space, tmp_path / "labels.db")
    p = ForgeProblem(tiny_space, ev, FakeBackend(), Workload(), OBJ, ["val_loss < 3.8"])
    X = tiny_space.sample_x(24, np.random.default_rng(6))
    out = {}
    p._evaluate(X, out)
    ids = p.ids(X)
    diverged = np.array([i[0] in "0123" for i in ids])  # FakeTrainer's failures
    assert diverged.any() and len(ev.trainer.trained) == len(set(ids))
    assert np.all(out["G"][diverged, 0] > 0) and np.allclose(out["F"][~diverged, 0],
                                                             fake_loss(tiny_space.decode(X[~diverged]), 0.1))
    with pytest.raises(SearchConfigError, match="evaluator.kind = 'oracle' is unknown; allowed: surrogate | train"):
        build_evaluator(settle_config({"evaluator": {"kind": "oracle"}}), tiny_space)


def test_a_generation_converts_the_matrix_once(tiny_space, monkeypatch):
    """metrics() turns X into per-layer values once; genomes and the analyzer's arrays share them."""
    p = _problem(tiny_space, objectives=["val_loss", "params"])
    X = tiny_space.sample_x(12, np.random.default_rng(3))
    calls = []
    real = type(tiny_space).values
    monkeypatch.setattr(type(tiny_space), "values", lambda self, X: calls.append(len(X)) or real(self, X))
    genomes, m = p.metrics(X)
    assert calls == [12]
    assert [g.id for g in genomes] == [g.id for g in tiny_space.decode(X)]
    from forge.lm.workload import model_totals
    assert np.allclose(m["params"], model_totals(tiny_space.to_arrays(X))["params"])


def test_select_upper_makes_the_loss_objective_the_interval_upper_bound():
    """evaluator.select=upper (issue 35 §5): the loss objective is loss_hi, μ and σ are reported unchanged."""
    from forge.spaces.space import load_space

    class Calibrated(FakePredictor):
        def interval(self, mu, sigma, level):
            return np.asarray(mu) - 0.05, np.asarray(mu) + 0.3 + np.asarray(sigma)

    g = load_space("iha-tiny").sample(4, np.random.default_rng(5))
    loss, mu, sigma = LossEvaluator(Calibrated(), n_mc=4, select="upper")(g)
    assert np.allclose(loss, mu + 0.3 + sigma) and np.all(sigma > 0)
    base, mu0, _ = LossEvaluator(Calibrated(), n_mc=4)(g)  # the default: μ
    assert np.allclose(base, mu0) and np.allclose(mu0, mu)
    with pytest.raises(SearchConfigError, match="select=upper needs a calibrated predictor"):
        LossEvaluator(FakePredictor(), select="upper")
    with pytest.raises(SearchConfigError, match="evaluator.select = 'lcb'; allowed: mu | upper"):
        LossEvaluator(Calibrated(), select="lcb")


def test_a_label_hook_runs_before_the_trainers_own_and_is_taken_back():
    seen: list[str] = []

    class Trainer:
        on_label = None

        def train(self, labels):
            for lab in labels:
                self.on_label(lab)

    t = Trainer()
    t.on_label = lambda lab: seen.append(f"own {lab}")
    own = t.on_label
    with label_hook(t, lambda lab: seen.append(f"note {lab}")):
        t.train(["a", "b"])
    assert seen == ["note a", "own a", "note b", "own b"] and t.on_label is own
    with pytest.raises(RuntimeError), label_hook(t, seen.append):
        raise RuntimeError("a failed training")
    assert t.on_label is own  # restored on the way out of a failure too
    bare = object()
    with label_hook(bare, seen.append):  # a trainer without the hook is left as it is
        pass
    assert not hasattr(bare, "on_label")

