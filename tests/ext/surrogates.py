"""A user's surrogate around scikit-learn, handed to the search unfitted: the search fits it on the labels its
config names (`evaluator.labels=...`), then asks it for one number per genome."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.ensemble import RandomForestRegressor

from forge.genomes.genome import Genome
from tests.ext import genes  # noqa: F401  (the glu gene this surrogate reads)


def features(genomes: Sequence[Genome]) -> np.ndarray:
    """Depth, attention layers, summed widths: a few numbers any genome has (its own genes included)."""
    rows = []
    for g in genomes:
        L = g.active_layers
        rows.append([len(L), sum(lay.attn for lay in L), sum(lay.d_mlp for lay in L),
                     sum(lay.n_h * lay.d_qk for lay in L if lay.attn), sum(lay.glu for lay in L)])
    return np.asarray(rows, dtype=float)


class ForestSurrogate:
    """fit(train, val) and predict(genomes), nothing else: the documented contract of a surrogate plug-in."""

    def __init__(self, n_estimators: int = 50, seed: int = 0) -> None:
        self.n_estimators, self.seed = n_estimators, seed  # its arguments, kept: a resume rebuilds it from them
        self.model = RandomForestRegressor(n_estimators=n_estimators, random_state=seed)

    def fit(self, train: Any, val: Any = None) -> "ForestSurrogate":
        self.model.fit(features(train.genomes), train.y)
        return self

    def predict(self, genomes: Sequence[Genome]) -> np.ndarray:
        return self.model.predict(features(genomes))


class SkForest(BaseEstimator):
    """A scikit-learn style surrogate: its constructor arguments are its attributes (`get_params()`), so a run made
    with the object records them and a command rebuilds the same one."""

    def __init__(self, n_estimators: int = 50, max_depth: int | None = None, random_state: int = 0) -> None:
        self.n_estimators, self.max_depth, self.random_state = n_estimators, max_depth, random_state

    def fit(self, train: Any, val: Any = None) -> "SkForest":
        self.model_ = RandomForestRegressor(n_estimators=self.n_estimators, max_depth=self.max_depth,
                                            random_state=self.random_state).fit(features(train.genomes), train.y)
        return self

    def predict(self, genomes: Sequence[Genome]) -> np.ndarray:
        return self.model_.predict(features(genomes))


class OpaqueForest(ForestSurrogate):
    """Keeps only the model its arguments built: they cannot be read back, so only Python can continue its runs."""

    def __init__(self, n_estimators: int = 50, seed: int = 0) -> None:  # noqa: D107  (no super: nothing kept)
        self.model = RandomForestRegressor(n_estimators=n_estimators, random_state=seed)
