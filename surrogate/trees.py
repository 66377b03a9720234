"""Rank-target tree ensembles (random forests, extra trees) over whole-architecture aggregates and
per-layer-position fields: the tree half of the hybrid surrogate and of the Forge-Former + trees ensemble.

Why (bench/results/acc_study/REPORT.md, 5 splits): a scikit-learn forest fit on the *normal scores*
of the losses (not the raw, bimodal losses) and given early-attention aggregates (value width of the
first attention layer, attention width within the first k layers) matches the 5-member Forge-Former+
on its own (Spearman 0.762 vs 0.752), and averaging the two beats either. The first attention
layer's value width is the single most important feature by permutation importance.

A fitted forest is flattened to plain arrays (children, feature, threshold, leaf value) so it is saved
in safetensors next to the encoder weights and loaded without unpickling anything; `predict` walks all
trees at once with numpy and equals sklearn's own `predict` (a test pins it).
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from forge.errors import UserError
from forge.genomes.genes import SHAPE_GENES
from forge.genomes.genome import Genome
from surrogate.dataset import LabelSet
from surrogate.features import Packed, featurize, field_names
from surrogate.targets import TargetMap
from surrogate.tree_walk import JointForests, join_forests, joint_leaves, walk

if TYPE_CHECKING:  # sklearn is imported to fit only: predicting walks the flat arrays
    from sklearn.ensemble import RandomForestRegressor

VIEWS = ("agg", "full")  # aggregates only | aggregates + packed per-layer fields
# the tree learners, settings fixed in advance (never tuned on a test fold): `rf` as in the hybrid; `et`,
# extremely randomized trees on the full view (per-layer-position fields), the strongest tabular model of
# the issue-27 audit (Spearman 0.783 on one split); no bootstrap, so no out-of-bag rows
def _rf(n: int, seed: int) -> Any:
    from sklearn.ensemble import RandomForestRegressor  # sklearn to fit only (the search path never loads it)

    return RandomForestRegressor(n_estimators=n, max_features=0.3, min_samples_leaf=3, random_state=seed,
                                 n_jobs=1, oob_score=True)


def _et(n: int, seed: int) -> Any:
    from sklearn.ensemble import ExtraTreesRegressor

    return ExtraTreesRegressor(n_estimators=n, max_features=0.5, min_samples_leaf=2, random_state=seed, n_jobs=1)


KINDS = {"rf": _rf, "et": _et}
_ARRAYS = ("right", "feature", "threshold", "value", "roots")  # left child = node + 1 (depth-first order)


def _agg(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(n, L, 18) derived fields → (n, A) aggregates a tree cannot sum by itself."""
    f = dict(zip(field_names("derived"), np.moveaxis(x, -1, 0)))
    m = mask.astype(np.float64)
    att = f["attn"] * m
    idx = np.arange(m.shape[1])[None, :]
    # position of the k-th attention layer (10**6 if there is none)
    kth = lambda k: np.where((np.cumsum(att, 1) == k) & (att > 0), idx, 10**6).min(1)  # noqa: E731
    return np.stack(_depth_cols(f, att, m, kth) + _width_cols(f, att, m, kth), 1)


def _depth_cols(f: dict, att: np.ndarray, m: np.ndarray, kth) -> list[np.ndarray]:
    """Where attention sits: counts, first/second positions, gaps, early/late counts, size totals."""
    n_act, idx = m.sum(1), np.arange(m.shape[1])[None, :]
    first = np.where(att.any(1), att.argmax(1), n_act)
    run, longest = np.zeros(len(m)), np.zeros(len(m))
    for j in range(m.shape[1]):  # longest run of identity-attention layers among the active ones
        run = np.where((m[:, j] > 0) & (att[:, j] == 0), run + 1, 0)
        longest = np.maximum(longest, run)
    from_end = n_act[:, None] - 1 - idx
    cols = [n_act, att.sum(1), att.sum(1) / np.maximum(n_act, 1), first, first / np.maximum(n_act, 1),
            np.minimum(kth(2), n_act), longest, (att * (idx < n_act[:, None] / 2)).sum(1),
            f["attn_params"].sum(1), f["mlp_params"].sum(1), f["flops_per_token"].sum(1), f["kv_per_token"].sum(1)]
    cols += [att[:, :k].sum(1) for k in range(1, 9)]
    return cols + [(att * (from_end < k) * m).sum(1) for k in (2, 4, 6)]


def _width_cols(f: dict, att: np.ndarray, m: np.ndarray, kth) -> list[np.ndarray]:
    """How wide attention is: width statistics over attention layers and the early-attention widths
    (value width n_h·d_v of the first attention layer ranks first by permutation importance)."""
    has, rows, L = att.any(1), np.arange(len(m)), m.shape[1]
    first = np.where(has, att.argmax(1), L)
    widths = {"q": f["n_h"] * f["d_qk"], "v": f["n_h"] * f["d_v"], "n_h": f["n_h"], "n_kv": f["n_kv"],
              "kv": f["n_kv"] * (f["d_qk"] + f["d_v"])}
    cols = []
    with warnings.catch_warnings():  # architectures without attention: NaN reductions → 0
        warnings.simplefilter("ignore", RuntimeWarning)
        dm = np.where(m > 0, f["d_mlp"], np.nan)
        cols += [np.nanmean(dm, 1), np.nanmin(dm, 1), np.nanmax(dm, 1)]
        for w in widths.values():
            wa = np.where(att > 0, w, np.nan)
            cols += [np.nan_to_num(np.nanmean(wa, 1)), np.nan_to_num(np.nanmin(wa, 1)),
                     np.nan_to_num(np.nanmax(wa, 1)), np.nansum(wa, 1)]
    at = lambda a, pos: np.where(pos < L, a[rows, np.minimum(pos, L - 1)], 0.0)  # noqa: E731
    for key in ("q", "v"):
        cols.append(np.where(has, at(widths[key], first), 0.0))
        cols += [(widths[key] * att)[:, :k].sum(1) for k in (1, 2, 3, 4, 6, 8)]
    cols += [at(widths["v"], kth(2)), at(widths["v"], kth(3))]
    return cols + [np.where(has, at(f[k], first), 0.0) for k in ("d_mlp", "n_kv", "d_v")]


def tree_views(genomes: Sequence[Genome], L_max: int = 40, packed: Packed | None = None) -> dict[str, np.ndarray]:
    """Every view at once from one featurization: `full` is `agg` plus the packed
    (n_h, n_kv, d_qk, d_v, d_mlp, attn) of every slot, so the hybrid featurizes a population once.
    packed: the population's `derived` fields when the caller (the encoder) already has them."""
    p = featurize(genomes, "derived", L_max) if packed is None else packed
    a = _agg(p.x, p.mask)
    keep = [field_names("derived").index(k) for k in (*SHAPE_GENES, "attn")]
    return {"agg": a, "full": np.concatenate([a, (p.x[..., keep] * p.mask[..., None]).reshape(len(a), -1)], 1)}


def _check_view(view: str) -> None:
    if view not in VIEWS:
        raise UserError(f"forest view = {view!r} is invalid; allowed: {' | '.join(VIEWS)}")


def tree_features(genomes: Sequence[Genome], view: str, L_max: int = 40) -> np.ndarray:
    """(n, F) features of one view."""
    _check_view(view)
    return tree_views(genomes, L_max)[view]


class RankForest:
    """A random forest on normal-score targets, stored as flat node arrays."""

    def __init__(self, view: str, target: TargetMap, arrays: dict[str, np.ndarray], L_max: int = 40,
                 oob: np.ndarray | None = None, kind: str = "rf") -> None:
        self.view, self.target, self.a, self.L_max, self.kind = view, target, arrays, L_max, kind
        self.oob = oob  # after `fit` of an `rf`: out-of-bag loss prediction of every training row (not saved)

    @property
    def n_trees(self) -> int:
        return int(len(self.a["roots"]))

    @classmethod
    def fit(cls, genomes: Sequence[Genome], y: np.ndarray, view: str, n_trees: int = 100, seed: int = 0,
            L_max: int = 40, X: np.ndarray | None = None, kind: str = "rf") -> "RankForest":
        """X: this view's features of `genomes` when the caller already has them."""
        if kind not in KINDS:
            raise UserError(f"forest kind = {kind!r} is invalid; allowed: {' | '.join(KINDS)}")
        target = TargetMap.fit(y, "normal_scores")
        # rf settings fixed in advance (a flat plateau in bench/results/acc_study/tune.json), never tuned on test;
        # oob_score only adds the out-of-bag pass (honest predictions of the training rows), the trees are the same
        rf = KINDS[kind](n_trees, seed)
        X = tree_features(genomes, view, L_max) if X is None else X
        with warnings.catch_warnings():  # with a handful of trees some rows are never out of bag: sklearn
            warnings.filterwarnings("ignore", "Some inputs do not have OOB")  # gives them z = 0, the median
            rf.fit(X.astype(np.float32), target.to_target(y))
        oob = target.to_loss(np.ravel(rf.oob_prediction_)) if kind == "rf" else None
        return cls(view, target, _flatten(rf), L_max, oob, kind)

    def leaves_z(self, X: np.ndarray) -> np.ndarray:
        """(n, trees) leaf values (normal-score units); same float32 inputs and `<=` rule as sklearn."""
        a = self.a
        X = np.asarray(X, dtype=np.float32)
        n, T = len(X), len(a["roots"])
        start = np.broadcast_to(a["roots"], (n, T)).ravel()  # one walker per (row, tree), row-major
        base = np.repeat(np.arange(n) * X.shape[1], T)  # each walker's row, as an offset into flat X
        return a["value"].take(walk(a, start, X.ravel(), base)).reshape(n, T).astype(np.float64)

    def predict_z(self, X: np.ndarray) -> np.ndarray:
        """Mean leaf value over trees (normal-score units): sklearn's `predict`."""
        return self.leaves_z(X).mean(1)

    def predict(self, genomes: Sequence[Genome], X: np.ndarray | None = None) -> np.ndarray:
        X = tree_features(genomes, self.view, self.L_max) if X is None else X
        return self.target.to_loss(self.predict_z(X))

    def meta(self) -> dict[str, Any]:
        return {"view": self.view, "n_trees": self.n_trees, "target": self.target.to_dict(),
                **({"kind": self.kind} if self.kind != "rf" else {})}  # rf sidecars stay as they were

    def tensors(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.{k}": np.ascontiguousarray(self.a[k]) for k in _ARRAYS}

    @classmethod
    def from_tensors(cls, tensors: dict[str, Any], prefix: str, meta: dict[str, Any], L_max: int) -> "RankForest":
        _check_view(meta["view"])
        arrays = {k: np.asarray(tensors[f"{prefix}.{k}"]) for k in _ARRAYS}
        n = len(arrays["right"])
        if not all(len(arrays[k]) == n for k in ("feature", "threshold", "value")) or \
                len(arrays["roots"]) != meta["n_trees"]:
            raise UserError(f"{prefix}: node arrays of unequal length or {len(arrays['roots'])} roots "
                            f"for {meta['n_trees']} trees")
        kind = meta.get("kind", "rf")
        if kind not in KINDS:
            raise UserError(f"{prefix}: forest kind {kind!r}; allowed: {' | '.join(KINDS)}")
        return cls(meta["view"], TargetMap.from_dict(meta["target"]), arrays, L_max, kind=kind)


def fit_forests(train: LabelSet, val: LabelSet | None, n_trees: int, seed: int, L_max: int,
                extra_trees: int = 0) -> list[RankForest]:
    """One rank forest per view (seeds seed, seed + 1), on train + val: the settings are fixed and nothing
    is selected on val, so the carve is free training data here. extra_trees > 0 appends an `et` forest of
    that many trees on the full view (seed + 2): the ensemble's tree model."""
    rows = train if val is None or not len(val) else train.join(val)
    X = tree_views(rows.genomes, L_max)
    out = [RankForest.fit(rows.genomes, rows.y, v, n_trees, seed + j, L_max, X[v]) for j, v in enumerate(VIEWS)]
    if extra_trees > 0:
        out.append(RankForest.fit(rows.genomes, rows.y, "full", extra_trees, seed + 2, L_max, X["full"], kind="et"))
    return out


def forests_oob(forests: Sequence[RankForest], last: int) -> np.ndarray:
    """Mean out-of-bag prediction of the last `last` rows the forests were fit on (`fit_forests` puts the
    validation carve last): held-out predictions for calibrating a hybrid."""
    if any(f.oob is None for f in forests):
        raise ValueError("forests_oob: a forest has no out-of-bag predictions (loaded, not fit here)")
    return np.mean([f.oob[len(f.oob) - last:] for f in forests], axis=0)


def forests_predict(forests: Sequence[RankForest], genomes: Sequence[Genome], packed: Packed | None = None,
                    weights: Sequence[float] | None = None, joint: JointForests | None = None) -> np.ndarray:
    """Mean (or `weights`-weighted) loss prediction of several forests, featurizing the population once
    (or not at all: packed); `joint`: the forests already joined by their owner (else joined for this call)."""
    preds = [f.target.to_loss(z.mean(1)) for f, z in _leaves(forests, genomes, packed, joint)]
    return np.average(preds, axis=0, weights=weights)


def forests_predict_spread(forests: Sequence[RankForest], genomes: Sequence[Genome], packed: Packed | None = None,
                           weights: Sequence[float] | None = None,
                           joint: JointForests | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mean, spread) in loss units. The spread is the standard deviation of every tree's own prediction,
    the usual random-forest uncertainty (as in SMAC, Hutter et al. 2011). On the 5 compare splits it ranks
    the hybrid's held-out |error| with Spearman 0.56 ± 0.04, against 0.45 for MC-dropout σ, and its scale
    is right: (1 − w)·spread averages 1.19 × the mean |error| (a Gaussian gives 1.25). bench/RESULTS.md."""
    leaves = _leaves(forests, genomes, packed, joint)
    mean = np.average([f.target.to_loss(z.mean(1)) for f, z in leaves], axis=0, weights=weights)
    return mean, np.concatenate([f.target.to_loss(z) for f, z in leaves], axis=1).std(1)


def _leaves(forests: Sequence[RankForest], genomes: Sequence[Genome], packed: Packed | None,
            joint: JointForests | None) -> list[tuple[RankForest, np.ndarray]]:
    """Each forest with its (n, trees) leaf values, from one featurization of the population."""
    X = tree_views(genomes, forests[0].L_max, packed)
    if len(forests) == 1 or not len(genomes):
        return [(f, f.leaves_z(X[f.view])) for f in forests]
    if joint is None or not joint.holds(forests):  # not joined by an owner (a baseline): joined for this call
        joint = join_forests(forests)
    return list(zip(forests, joint_leaves(joint, X)))  # one walk over every forest's trees: the same leaves


def _threshold32(t: np.ndarray) -> np.ndarray:
    """float64 split points → the largest float32 not above them. No float32 input lies in between,
    so `x <= t32` decides exactly as sklearn's `x <= t` for its float32 inputs, at half the bytes."""
    t32 = t.astype(np.float32)
    return np.where(t32.astype(np.float64) > t, np.nextafter(t32, np.float32(-np.inf)), t32)


def _flatten(rf: RandomForestRegressor) -> dict[str, np.ndarray]:
    """Concatenate every tree's nodes with global child indices (leaves: right = -1)."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in _ARRAYS}
    off = 0
    for est in rf.estimators_:
        t = est.tree_
        inner = t.children_left >= 0
        if not (t.children_left[inner] == np.flatnonzero(inner) + 1).all():
            raise ValueError("tree not in depth-first order (left child != node + 1); cannot flatten")
        parts["right"].append(np.where(inner, t.children_right + off, -1).astype(np.int32))
        parts["feature"].append(np.maximum(t.feature, 0).astype(np.int16))
        parts["threshold"].append(_threshold32(t.threshold))
        parts["value"].append(t.value[:, 0, 0].astype(np.float32))
        parts["roots"].append(np.array([off], dtype=np.int32))
        off += t.node_count
    return {k: np.concatenate(v) for k, v in parts.items()}
