"""Any surrogate by config: build a `TrainableSurrogate` from its `_target_` node and refit it for co-evolution.

`build_model` passes each of seed / space / L_max only to a class that takes it, so no model is special-cased
by name (Forge-Former, the baselines and a user's class are built the same way). `refit` is co-evolution's
fine-tune for a surrogate given as a config node (`evaluator.predictor: {_target_: ...}`): the model is
refitted from scratch on the replay corpus plus every real label so far, and handed back as a search-side
predictor (`surrogate.interface.as_loss_predictor`).
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Mapping, Sequence

from forge.runtime.config import to_container
from forge.genomes.labels import Label
from surrogate.dataset import LabelSet, from_labels, load_labelset
from surrogate.interface import as_loss_predictor


def build_model(mcfg: Any, **context: Any) -> Any:
    """Instantiate a surrogate config; each of `context` goes only to a class whose signature names it
    (seed also to one taking **kwargs) and the node does not set (a recorded object's own seed stays its own). The class must be an allowed surrogate plug-in (`forge.plugins`)."""
    from forge import plugins

    node = dict(to_container(mcfg)) if not isinstance(mcfg, dict) else dict(mcfg)
    if node.get("_object_"):  # a Python object's record (search.python_objects): never built with guessed arguments
        raise plugins.PluginError(f"surrogate {node.get('_target_')!r} was handed to forge.search as an object that no "
                                  f"command can rebuild ({node['_object_']}); allowed: continue from Python, handing "
                                  "the same object again")
    cls = plugins.resolve("surrogate", node.get("_target_"))  # PluginError (a user error) names what is allowed
    try:
        params = inspect.signature(cls).parameters
    except (ValueError, TypeError) as e:
        raise plugins.PluginError(f"surrogate _target_ {node.get('_target_')!r} cannot be built ({e}); allowed: "
                                  "a class with fit(train, val) and predict(genomes)") from None
    open_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kw = {k: v for k, v in context.items() if k not in node and (k in params or (k == "seed" and open_kw))}
    return plugins.instantiate("surrogate", node, **kw)


def _labelset(data: LabelSet | Sequence[Label] | str | Path | None) -> LabelSet | None:
    if data is None or isinstance(data, LabelSet):
        return data
    if isinstance(data, (str, Path)):
        return load_labelset(data)
    labels = list(data)
    return from_labels(labels) if labels else None


def refit(base: Mapping[str, Any], new_labels: Sequence[Label], replay: Any = None, seed: int = 0,
          **_: Any) -> Any:
    """Co-evolution's fine-tune for a config-node surrogate: a fresh model fitted on replay ∪ new labels.
    The Forge-Former-specific options (ratio, epochs, lr, batch) are accepted and ignored."""
    if not isinstance(base, Mapping) or "_target_" not in base:
        raise ValueError(f"refit: base {base!r} is not a surrogate config; allowed: a mapping with _target_")
    new, old = _labelset(new_labels), _labelset(replay)
    if new is None:
        raise ValueError("refit: no new labels; allowed: at least one finite label")
    data = old.join(new) if old is not None and len(old) else new
    return as_loss_predictor(build_model(dict(base), seed=seed).fit(data, None))
