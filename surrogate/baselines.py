"""Baselines on the same splits as Forge-Former: HW-GPT-Bench MLP, random forest, PLAS scaling law.

Every model here has `fit(train, val) -> self` and `predict(genomes) -> (n,) losses`, like the
Forge-Former wrapper in `surrogate.compare`.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import least_squares
from sklearn.ensemble import RandomForestRegressor
from torch.utils.data import DataLoader, TensorDataset

from surrogate.dataset import LabelSet
from surrogate.features import BASE_FIELDS, MinMax, featurize, flat_packed


class MLPBaseline:
    """Flattened packed per-layer fields (train min-max), standardized targets, val-carve selection."""

    def __init__(self, epochs: int = 200, lr: float = 1e-3, batch: int = 32, seed: int = 0) -> None:
        self.epochs, self.lr, self.batch, self.seed = epochs, lr, batch, seed

    def _x(self, genomes) -> torch.Tensor:
        p = featurize(genomes, "paper")
        p.x = self.norm.apply(p)
        return torch.from_numpy(flat_packed(p)).float()

    def fit(self, train: LabelSet, val: LabelSet | None) -> "MLPBaseline":
        from surrogate.baselines_net import NetModule  # Lightning: imported by the one baseline that trains with it
        from surrogate.training import _trainer

        torch.manual_seed(self.seed)
        self.norm = MinMax.fit(featurize(train.genomes, "paper"))
        self.mu, self.sd = float(train.y.mean()), float(train.y.std()) or 1.0
        ty = lambda d: torch.from_numpy((d.y - self.mu) / self.sd).float()  # noqa: E731
        self.module = NetModule(self._x(train.genomes[:1]).shape[1], self.lr)
        gen = torch.Generator().manual_seed(self.seed)
        tl = DataLoader(TensorDataset(self._x(train.genomes), ty(train)), batch_size=self.batch, shuffle=True,
                        generator=gen)
        vl = DataLoader(TensorDataset(self._x(val.genomes), ty(val)), batch_size=len(val)) if val else None
        _trainer(self.epochs, vl is not None).fit(self.module, tl, vl)
        if self.module.best_state is not None:
            self.module.net.load_state_dict(self.module.best_state)
        return self

    @torch.no_grad()
    def predict(self, genomes) -> np.ndarray:
        self.module.eval()
        return self.module(self._x(genomes)).double().numpy() * self.sd + self.mu


def rf_features(genomes) -> np.ndarray:
    """Packed per-layer fields plus two counts a tree cannot sum by itself: active and attention layers."""
    p = featurize(genomes, "paper")
    counts = np.stack([p.mask.sum(1), p.x[..., 6].sum(1), p.x[:, :6, 6].sum(1)], axis=1)
    return np.concatenate([flat_packed(p), counts], axis=1)


class RFBaseline:
    """scikit-learn random forest on packed per-layer fields (active layers in order, pruned removed)
    plus the active / attention / early-attention layer counts."""

    def __init__(self, n_estimators: int = 300, max_features: float = 0.5, min_samples_leaf: int = 5,
                 seed: int = 0, n_jobs: int = 1) -> None:
        self.rf = RandomForestRegressor(n_estimators=n_estimators, max_features=max_features,
                                        min_samples_leaf=min_samples_leaf, random_state=seed, n_jobs=n_jobs)

    def fit(self, train: LabelSet, val: LabelSet | None = None) -> "RFBaseline":
        self.rf.fit(rf_features(train.genomes), train.y)  # val rows unused: no selection
        return self

    def predict(self, genomes) -> np.ndarray:
        return self.rf.predict(rf_features(genomes))


class RankForestBaseline:
    """The hybrid's tree half alone: two rank-target forests (aggregates | aggregates + packed fields)
    averaged, fit on train + val like in the hybrid (fixed settings, no selection). Reported so the
    hybrid is compared against its strongest ingredient, not only against the paper's weak RF."""

    def __init__(self, n_trees: int = 100, seed: int = 0, L_max: int = 40) -> None:
        self.n_trees, self.seed, self.L_max, self.forests = n_trees, seed, L_max, []

    def fit(self, train: LabelSet, val: LabelSet | None = None) -> "RankForestBaseline":
        from surrogate.trees import fit_forests

        self.forests = fit_forests(train, val, self.n_trees, self.seed, self.L_max)
        return self

    def predict(self, genomes) -> np.ndarray:
        from surrogate.trees import forests_predict

        return forests_predict(self.forests, genomes)


def aggregate(genomes) -> np.ndarray:
    """(n, 4) PLAS aggregates: depth l, width d, MLP ratio r, KV dimension d_m (mean over attention layers)."""
    p = featurize(genomes, "paper")
    f = {k: p.x[..., i] for i, k in enumerate(BASE_FIELDS)}
    m = p.mask.astype(np.float64)
    l = m.sum(1)
    d = f["d_model"].max(1)
    r = (f["d_mlp"] * m).sum(1) / l / d
    n_att = f["attn"].sum(1)
    kv = (f["n_kv"] * (f["d_qk"] + f["d_v"]) / 2.0).sum(1)
    dm = np.where(n_att > 0, kv / np.maximum(n_att, 1), 1.0)  # no attention at all: d_m = 1 (worst case)
    return np.stack([l, d, r, dm], axis=1)


class ScalingLawBaseline:
    """PLAS Eq. 2 for dense models (ρ = 1), fitted by nonlinear least squares from the Eq. 15 values:
    L = κ_l/l^α_l + κ_d/(r^α_r d^β_2) + κ_m/d_m^α_m + L_∞. With ρ = 1 the sparsity term is a second
    width term; our labels have one width, so it merges with the capacity term and β_2 stays at 0.97."""

    P0 = np.array([9.96, 1.63, 500.0, 0.17, 0.20, 0.05, 2.53])  # PLAS Eq. 15 (paper 000, Table 6)
    BETA2 = 0.97  # PLAS Table 6

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed  # deterministic fit; kept for the common constructor signature

    def law(self, p: np.ndarray, a: np.ndarray) -> np.ndarray:
        kl, al, kd, ar, km, am, linf = p
        l, d, r, dm = a.T
        return kl / l ** al + kd / (r ** ar * d ** self.BETA2) + km / dm ** am + linf

    def fit(self, train: LabelSet, val: LabelSet | None = None) -> "ScalingLawBaseline":
        a = aggregate(train.genomes)
        lo = [0, 0, 0, -3, -50, -3, 0]
        hi = [1e4, 5, 1e6, 3, 50, 3, 10]
        res = least_squares(lambda p: self.law(p, a) - train.y, self.P0, bounds=(lo, hi), loss="soft_l1")
        self.params = res.x
        return self

    def predict(self, genomes) -> np.ndarray:
        return self.law(self.params, aggregate(genomes))
