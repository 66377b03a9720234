"""The surrogate contract as documented: a recipe or a user class arriving unfitted is fitted on evaluator.labels
or refused in one line; the default loss limit follows the run's own surrogate; the HV anchor never depends on the
order a grid is written in."""
from __future__ import annotations

import numpy as np
import pytest

from forge.config import data_dir, group_yaml
from forge.space import space_from_config
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
