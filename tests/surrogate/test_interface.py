"""Any surrogate through one interface: a user's class from config alone in training, comparison, the
search's evaluator, and a registered checkpoint format loaded by name."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hydra import compose, initialize_config_module

from forge.spaces.space import load_space
from surrogate.cli import run
from surrogate.interface import LossPredictor, PointPredictor, as_loss_predictor
from surrogate.checkpoints import CheckpointError
from surrogate.loading import LOADERS, load_predictor, register_format
from tests.search.user_plugins import UserSurrogate

USER = "tests.search.user_plugins.UserSurrogate"


@pytest.fixture
def make_search_any():
    """A 4-generation iha-tiny search on the fake backend with the given predictor and co-evolution."""
    from backends.interface import Workload
    from search.evaluators import LossEvaluator
    from search.build import build_search
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend

    def make(run_dir, predictor, coevolution):
        return build_search(tiny_cfg(), run_dir, {"space": load_space("iha-tiny"), "evaluator": LossEvaluator(predictor),
                                                  "backend": FakeBackend(), "workload": Workload(),
                                                  "coevolution": coevolution})
    return make


def _cfg(*overrides):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name="forge-surrogate", overrides=["threads=1", *overrides])


def test_a_point_model_becomes_a_search_predictor():
    genomes = load_space("iha-tiny").sample(5, np.random.default_rng(0))
    p = as_loss_predictor(UserSurrogate(slope=0.2))
    assert isinstance(p, PointPredictor) and isinstance(p, LossPredictor)
    mu, sigma = p.predict(genomes, n_mc=4)
    assert np.allclose(mu, [5.0 - 0.2 * g.n_active for g in genomes]) and not sigma.any()
    with pytest.raises(TypeError, match="no predict"):
        as_loss_predictor(object())


def test_a_user_surrogate_trains_and_compares_from_config(tiny_jsonl, tmp_path):
    yaml = tmp_path / "mine.yaml"
    yaml.write_text(f"_target_: {USER}\nslope: 0.05\n")
    res = run(_cfg("mode=compare", f"data={tiny_jsonl}", "seeds=1", f"models=[scaling_law,{yaml}]",
                   f"out_dir={tmp_path / 'cmp'}"))
    mine = res["models"][str(yaml)]["summary"]
    assert set(mine) >= {"mae", "spearman"} and np.isfinite(mine["mae"]["mean"])
    assert str(yaml) in (tmp_path / "cmp" / "table.md").read_text()


def test_train_mode_builds_any_class_and_refuses_out_without_save(tiny_jsonl, tmp_path):
    cfg = _cfg(f"data={tiny_jsonl}", "space=iha-tiny", f"out_dir={tmp_path}")
    from omegaconf import OmegaConf

    OmegaConf.set_struct(cfg, False)
    cfg.surrogate = {"_target_": USER, "slope": 0.05}
    res = run(cfg)
    assert res["n_test"] > 0 and np.isfinite(res["metrics"]["mae"])
    cfg.out = str(tmp_path / "ckpt")
    with pytest.raises(ValueError, match="has no save"):
        run(cfg)


def test_a_registered_format_loads_by_path(tmp_path, monkeypatch):
    (tmp_path / "mine.json").write_text(json.dumps({"format": "test/user-v1", "slope": 0.3}))
    with pytest.raises(CheckpointError, match="'test/user-v1'; allowed: forge-surrogate/forgeformer-v1"):
        load_predictor(tmp_path / "mine")
    monkeypatch.setattr("surrogate.loading.LOADERS", dict(LOADERS))
    register_format("test/user-v1", lambda stem: UserSurrogate(json.loads(stem.with_suffix(".json").read_text())["slope"]))
    assert load_predictor(tmp_path / "mine").slope == 0.3


def test_a_config_node_surrogate_co_evolves(tmp_path, make_search_any):
    """search.coevolve with evaluator.predictor = a user's class node: refitted on the real labels and hot-swapped."""
    from search.components import build_coevolution
    from search.settings import settle_config
    from surrogate.generic import refit

    node = {"_target_": USER, "slope": 0.2}
    trainer = {"_target_": "tests.search.fakes.FakeTrainer"}
    cfg = {"seed": 0, "evaluator": {"kind": "surrogate", "predictor": node},
           "search": {"coevolve": {"every": 2, "batch": 4, "n_mc": 2, "trainer": trainer}}}
    from forge import plugins

    plugins.trust(cfg)  # as forge-search's run(cfg) does with the config the user launched
    co = build_coevolution(settle_config(cfg), load_space("iha-tiny"), tmp_path)
    assert co.finetune is refit and co.base == node
    s = make_search_any(tmp_path, as_loss_predictor(UserSurrogate(slope=0.2)), co)
    s.run()
    ev = s.problem.evaluator
    assert ev.version == 2 and isinstance(ev.predictor, PointPredictor)
    real = [json.loads(line)["label"] for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    finite = [x for x in real if isinstance(x, float)]
    assert ev.predictor.model.base == pytest.approx(np.mean(finite))  # fitted on the buffer of real labels
