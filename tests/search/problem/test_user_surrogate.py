"""The surrogate contract as documented: a recipe or a user class arriving unfitted is fitted on evaluator.labels
or refused in one line; the default loss limit follows the run's own surrogate; the HV anchor never depends on the
order a grid is written in."""
from __future__ import annotations

import numpy as np
import pytest

from forge.runtime.config import data_dir, group_yaml
from forge.spaces.space import space_from_config
from search.archive import default_anchor
from search.components import build_evaluator
from search.errors import SearchConfigError
from search.settings import settle_config
from search.user_surrogate import SHIPPED_LOSS_LIMIT, own_units

LABELS = str(data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl")
FOREST = {"_target_": "tests.ext.surrogates.ForestSurrogate", "n_estimators": 10}


@pytest.fixture
def space(tiny_space):
    from forge import plugins

    plugins.trust({"plugins": {"surrogate": [FOREST["_target_"]]}})
    return tiny_space


@pytest.mark.parametrize("node", [FOREST, "rf", "rf_rank", "mlp"])
def test_an_unfitted_user_surrogate_or_recipe_is_refused_in_one_line(space, node):
    with pytest.raises(SearchConfigError, match=r"' is not fitted; allowed: evaluator.labels="):
        build_evaluator(settle_config({"evaluator": {"predictor": node}}), space)


def test_the_search_fits_a_user_class_and_a_conf_surrogate_recipe_on_the_named_labels(space):
    genomes = space.sample(6, np.random.default_rng(0))
    for node in (FOREST, "rf"):  # a user's class; conf/surrogate/rf.yaml by name (not a checkpoint)
        ev = build_evaluator(settle_config({"evaluator": {"predictor": node, "labels": LABELS}, "seed": 0}), space)
        _, mu, _ = ev(genomes)
        assert np.all(np.isfinite(mu)) and 0.5 < float(np.mean(mu)) < 10.0 and np.ptp(mu) > 0


def test_the_default_loss_limit_follows_the_runs_surrogate(capsys):
    shipped = {"constraints": [SHIPPED_LOSS_LIMIT], "evaluator": {"predictor": "forgeformer-iha-tiny"}}
    assert own_units(shipped) == shipped
    mine = {"constraints": [SHIPPED_LOSS_LIMIT], "evaluator": {"predictor": FOREST}}
    assert own_units(mine)["constraints"] == [] and "not applied to your surrogate" in capsys.readouterr().err
    typed = {"constraints": ["val_loss < 0.5"], "evaluator": {"predictor": FOREST}}
    assert own_units(typed) == typed


def test_the_hv_anchor_does_not_depend_on_the_order_of_a_grid():
    node = group_yaml("space", "iha-tiny")
    up = space_from_config({**node, "d_model": [128, 192], "mlp": ["gelu", "swiglu"]})
    down = space_from_config({**node, "d_model": [128, 192], "mlp": ["swiglu", "gelu"]})
    assert down.global_grid("mlp") == ("swiglu", "gelu")  # a choice keeps the order it is written in
    assert default_anchor(up) == default_anchor(down)
    assert default_anchor(up).d_model == 128 and default_anchor(up).mlp == "gelu"


def test_a_recipe_on_the_users_own_searchpath_works_as_a_shipped_one(tiny_space, monkeypatch, tmp_path):
    """`hydra.searchpath=[file://tests/ext/conf] evaluator.predictor=ext-forest`: the recipe is read from the user's
    folder and its class (named only there, not under plugins) is the user's to run; a path is never a name."""
    from types import SimpleNamespace

    from hydra.core.hydra_config import HydraConfig

    from forge import plugins
    from forge.runtime.config import searchpath_yaml

    plugins.trust({})  # nothing allowed beyond Forge's own
    conf = data_dir().parent / "tests" / "ext" / "conf"
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(searchpath=[f"file://{conf}"])))
    ev = build_evaluator(settle_config({"evaluator": {"predictor": "ext-forest", "labels": LABELS}, "seed": 0}), tiny_space)
    _, mu, _ = ev(tiny_space.sample(4, np.random.default_rng(0)))
    assert np.all(np.isfinite(mu)) and type(ev.predictor).__name__ != "ForgeFormerPredictor"
    assert searchpath_yaml("surrogate", "../surrogate/ext-forest") is None
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(searchpath=[])))
    from forge.errors import ForgeError

    with pytest.raises(ForgeError, match="ext-forest"):  # not on the searchpath: as before, one line
        build_evaluator(settle_config({"evaluator": {"predictor": "ext-forest", "labels": LABELS}, "seed": 0}), tiny_space)
