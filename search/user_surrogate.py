"""A surrogate that arrives unfitted: a conf/surrogate recipe (`evaluator.predictor=rf`) or a user's class
(`{_target_: mypkg.MySurrogate}`, or the object itself through the Python API).

The contract (docs/concepts/search.md): a surrogate needs only `fit(train, val)` and `predict(genomes)`. The
search fits it on the labels its config names (`evaluator.labels=FILE` or a list of files: JSONL or LLMForge CSV,
split train/validation by architecture with the run's seed) and then uses it; without labels, one that is not
fitted is refused in one line before anything runs, instead of failing inside the first generation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from forge.runtime.config import group_yaml, searchpath_yaml
from forge.spaces.space import SearchSpace
from search.errors import SearchConfigError


def recipe(node: Any) -> Mapping[str, Any] | None:
    """conf/surrogate/<name>.yaml when `node` is such a name (not a checkpoint file), else None: Forge's own, or
    one in a folder on the command's searchpath (`hydra.searchpath=[file://my/conf]`), whose `_target_` is then
    the user's to run, as in a config they launched (forge.plugins.trust_file)."""
    if not isinstance(node, str) or Path(node).suffix or Path(node).exists():
        return None
    own = group_yaml("surrogate", node)
    if own is not None:
        return own
    theirs = searchpath_yaml("surrogate", node)
    if theirs is not None:
        from forge import plugins

        plugins.trust_file(theirs)
    return theirs


def build(node: Any, space: SearchSpace | None, seed: int) -> Any:
    """The surrogate object: a Python object as given, a `_target_` node built with the context its class
    names (seed, space name, L_max: as forge-surrogate builds it)."""
    if not isinstance(node, Mapping):
        return node
    from forge import plugins
    from surrogate.generic import build_model

    context = {"seed": seed} if space is None else {"seed": seed, "space": space.name, "L_max": space.L_max}
    try:
        return build_model({**node, "_convert_": "all"}, **context)  # plain lists and dicts reach the class
    except plugins.PluginError as e:
        raise SearchConfigError(str(e)) from None


def ready(model: Any, name: str, space: SearchSpace | None, labels: Any, seed: int, fresh: bool = False) -> Any:
    """`model` fitted on `labels` when the config names them; else itself when it is fitted; else refused.
    `fresh`: built from a conf/surrogate recipe just now, so unfitted by construction."""
    if labels:
        return fit_on(model, labels, seed, name)
    if fresh or not fitted(model, space):
        raise SearchConfigError(f"evaluator.predictor {name!r} is not fitted; allowed: evaluator.labels=<label file> "
                                "(JSONL or CSV: the search fits it on them), a fitted surrogate, or a checkpoint name")
    return model


def fit_on(model: Any, labels: Any, seed: int, name: str) -> Any:
    """fit(train, val) on the label files, split by architecture (no test rows: every label is for the search)."""
    from surrogate.dataset import load_labelset, train_val_test

    if not callable(getattr(model, "fit", None)):
        raise SearchConfigError(f"evaluator.labels is set but {name!r} has no fit(train, val); allowed: a surrogate "
                                "with fit, or no evaluator.labels")
    paths = [labels] if isinstance(labels, (str, Path)) else list(labels)
    data = load_labelset([Path(str(p)) for p in paths])
    if len(data) < 2:
        raise SearchConfigError(f"evaluator.labels={labels!r} holds {len(data)} finite label(s); allowed: files "
                                "with at least 2 labelled genomes")
    train, val, _ = train_val_test(data, seed, test_frac=0.0)
    out = model.fit(train, val)
    return model if out is None else out


def fitted(model: Any, space: SearchSpace | None) -> bool:
    """Its own `is_fitted` when it has one; else whether one prediction works (scikit-learn's NotFittedError, or
    an attribute `fit` would have set, says it does not). Without fit it is fitted by construction."""
    flag = getattr(model, "is_fitted", None)
    if flag is not None:
        return bool(flag() if callable(flag) else flag)
    if not callable(getattr(model, "fit", None)) or space is None:
        return True
    from sklearn.exceptions import NotFittedError

    try:
        model.predict(space.sample(1, np.random.default_rng(0)))
    except (NotFittedError, AttributeError):
        return False
    return True


SHIPPED_LOSS_LIMIT = "val_loss < 3.8"  # conf/forge-search.yaml's default: a loss in the shipped surrogates' units


def own_units(c: dict[str, Any], predictor: Any = None) -> dict[str, Any]:
    """The config with the default loss constraint left out, said in one line, when the loss comes from the user's
    own surrogate (a class, an object or a recipe fitted on their labels): 3.8 nats means nothing in its units."""
    ev = c.get("evaluator") or {}
    node = predictor if predictor is not None else ev.get("predictor")
    user = predictor is not None or isinstance(node, Mapping) or recipe(node) is not None
    if not user or ev.get("kind", "surrogate") != "surrogate" or list(c.get("constraints") or []) != [SHIPPED_LOSS_LIMIT]:
        return c
    import sys

    print(f"forge-search: the default constraint {SHIPPED_LOSS_LIMIT!r} is in the shipped surrogates' units, so it is "
          "not applied to your surrogate; set constraints=[...] in its units", file=sys.stderr)
    return {**c, "constraints": []}
