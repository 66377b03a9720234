"""The two surrogate interfaces: one the search consumes, one training and saving use.

**Search side, `LossPredictor`** (what `evaluator.predictor` must give): `predict(genomes, n_mc=0) ->
(mu, sigma)` in loss units, one value each per genome (n_mc = 0: deterministic, sigma = 0). Optional:
`interval(mu, sigma, level) -> (lo, hi)` and `interval_info(has_sigma) -> {method, source}` (a calibrated
loss interval; without them the interval is NaN, an unknown error), and `space` (a mapping with name,
d_model, block_size, vocab_size, L_max that the search checks against its space).

**Training side, `TrainableSurrogate`** (what `conf/surrogate/<name>.yaml` builds and `forge-surrogate
mode=train|compare` fits): `fit(train, val) -> self` on `surrogate.dataset.LabelSet`s and `predict(genomes)
-> mu` (point predictions, what the comparison table scores). Optional: `save(stem) -> Path` (what `out=`
writes; loadable again by `surrogate.loading.load_predictor` when its format is registered there) and
`as_predictor() -> LossPredictor` (the search side of a trained model).

Any object with the training side becomes a search-side predictor through `as_loss_predictor`, so a
Forge-Former, a tree baseline, an ensemble or a user's class plugs into the search, co-evolution
(`search.coevolve.finetune` returns a new predictor) and the comparison with one config entry.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from forge.genomes.genome import Genome


@runtime_checkable
class LossPredictor(Protocol):
    def predict(self, genomes: Sequence[Genome], n_mc: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(mu, sigma) per genome; n_mc = 0 is the deterministic pass with sigma = 0."""
        ...


@runtime_checkable
class TrainableSurrogate(Protocol):
    def fit(self, train: Any, val: Any | None) -> "TrainableSurrogate":
        """Fit on a LabelSet (val: an optional carve for epoch selection); returns self."""
        ...

    def predict(self, genomes: Sequence[Genome]) -> np.ndarray:
        """Point predictions (loss units), one per genome."""
        ...


class PointPredictor:
    """A fitted train-side model as a search-side predictor: its point prediction, sigma 0, no interval."""

    def __init__(self, model: Any, space: Mapping[str, Any] | None = None):
        self.model = model
        if space is not None or getattr(model, "space", None) is not None:
            self.space = space if space is not None else model.space

    def predict(self, genomes: Sequence[Genome], n_mc: int = 0) -> tuple[np.ndarray, np.ndarray]:
        mu = np.asarray(self.model.predict(list(genomes)), dtype=float).reshape(-1)
        return mu, np.zeros_like(mu)


def takes_n_mc(obj: Any) -> bool:
    """Whether `obj.predict` is the search side's `predict(genomes, n_mc)`."""
    try:
        return "n_mc" in inspect.signature(obj.predict).parameters
    except (TypeError, ValueError):
        return False


def as_loss_predictor(obj: Any) -> Any:
    """The search-side predictor of any surrogate: itself when it has `predict(genomes, n_mc)`, its
    `as_predictor()` when it offers one, else its point predictions with sigma 0 (`PointPredictor`)."""
    if not callable(getattr(obj, "predict", None)):
        raise TypeError(f"{type(obj).__name__} is not a surrogate: it has no predict(genomes)")
    if takes_n_mc(obj):
        return obj
    if callable(getattr(obj, "as_predictor", None)):
        return obj.as_predictor()
    return PointPredictor(obj)
