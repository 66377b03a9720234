"""Train a Forge-Former predictor on a label set, and replay-fine-tune one from a frozen base.

`train_forgeformer` normalizes fields with train-split statistics only (App. C), selects each
member's epoch on the validation carve, picks a calibrated recipe's low-end stretch by a nested split
(an inner carve nothing else touches), and returns a `ForgeFormerPredictor`. `finetune` always
reloads the base checkpoint from disk (App. C.2: refits never compound earlier refits).
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from forge.errors import UserError
from forge.genomes.labels import Label
from surrogate.calibration import LowEndStretch
from surrogate.checkpoints import covers_of, data_covers, union_covers
from surrogate.conformal import BEST_BINS, ConformalInterval, coverage_cv
from surrogate.dataset import LabelSet, from_labels, load_labelset, split_ids
from surrogate.features import MinMax, featurize, field_names
from surrogate.forgeformer import FFConfig
from surrogate.checkpoints import resolve_checkpoint
from surrogate.predictor import ForgeFormerPredictor
from surrogate.loading import load_predictor
from surrogate.targets import TargetMap
from surrogate.trees import fit_forests
from surrogate.recipe import Recipe

log = logging.getLogger(__name__)
CALIB_SEED_OFFSET = 104_729  # the calibration carve's split seed = recipe.seed + this (the val carve uses 7,919)


def _arrays(p: ForgeFormerPredictor | None, data: LabelSet, norm: MinMax, field_set: str, L_max: int,
            target: TargetMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if p is not None:
        p.check(data.genomes)
    pk = featurize(data.genomes, field_set, L_max)
    return norm.apply(pk), pk.mask, target.to_target(data.y).astype(np.float32)


def train_forgeformer(train: LabelSet, val: LabelSet | None, recipe: Recipe, space_name: str = "iha-paper",
                      L_max: int = 40, cfg: FFConfig | None = None) -> ForgeFormerPredictor:
    """Fit `recipe.n_members` members (seeds recipe.seed + k) and wrap them in a predictor; with
    `recipe.calibrate` the low-end stretch is picked by a nested split (`_nested_stretch`)."""
    p = _fit(train, val, recipe, space_name, L_max, cfg)
    if recipe.calibrate:
        p.calib = _nested_stretch(train, val, recipe, space_name, L_max, cfg, p.meta)
    return p


def _fit(train: LabelSet, val: LabelSet | None, recipe: Recipe, space_name: str, L_max: int,
         cfg: FFConfig | None) -> ForgeFormerPredictor:
    """The uncalibrated predictor: encoder members (epoch picked on `val`) plus, for a hybrid, its forests."""
    from surrogate.predictor import _space_of
    from surrogate.training import fit_members  # Lightning's imports, paid by what trains

    names = field_names(recipe.field_set)
    cfg = cfg or FFConfig(n_fields=len(names), L_max=L_max)
    norm = MinMax.fit(featurize(train.genomes, recipe.field_set, L_max))  # TRAIN split only
    target = TargetMap.fit(train.y, recipe.target_kind())  # TRAIN split only
    tr = _arrays(None, train, norm, recipe.field_set, L_max, target)
    va = _arrays(None, val, norm, recipe.field_set, L_max, target) if val is not None and len(val) else None
    fitted = fit_members(cfg, recipe, tr, va, target.scale)
    members, infos = [m for m, _ in fitted], [info for _, info in fitted]
    meta = {"recipe": recipe.to_dict(), "data_hash": train.data_hash(), "n_train": len(train),
            "n_val": len(val) if val is not None else 0, "members": infos,
            "covers": data_covers(train)}  # the genes and ranges it saw: search.blind refuses the rest
    p = ForgeFormerPredictor(members, norm, recipe.field_set, _space_of(train, space_name, L_max), target, meta)
    if recipe.forests:
        if not 0.0 <= recipe.nn_weight <= 1.0:
            raise UserError(f"nn_weight = {recipe.nn_weight}; allowed: 0 <= nn_weight <= 1")
        p.forests, p.nn_weight = fit_forests(train, val, recipe.forest_trees, recipe.seed, L_max), recipe.nn_weight
    return p


def _nested_stretch(train: LabelSet, val: LabelSet | None, recipe: Recipe, space_name: str, L_max: int,
                    cfg: FFConfig | None, meta: dict) -> LowEndStretch | None:
    """Pick the low-end stretch on an inner calibration carve of the training rows that nothing else touches.

    Why nested: the validation carve already picks every member's epoch, so a factor chosen on it is chosen
    on rows that shaped the model (and it then looked better on the compare table than on unseen labels).
    Here `calib_frac` of the training ids are set aside, the same recipe (same validation carve) is fit on
    the rest, it predicts the carve, and k is chosen there. The returned (cut, k) is applied to the model fit
    on all training rows (weights unchanged by calibration). Costs a second fit. Carve < 20 rows: skipped."""
    rest, held = split_ids(train.ids, recipe.calib_frac, recipe.seed + CALIB_SEED_OFFSET)
    if len(held) < 20:
        meta["calibration_skipped"] = (f"calibration carve has {len(held)} rows; calibration needs >= 20 "
                                       "(raise calib_frac)")
        log.warning("calibrate: %s", meta["calibration_skipped"])
        return None
    inner = _fit(train.take(rest), val, replace(recipe, calibrate=False), space_name, L_max, cfg)
    carve = train.take(held)
    stretch = LowEndStretch.fit(inner.predict(carve.genomes)[0], carve.y)
    meta["calibration_fit"] = {"method": "nested: inner carve of the training rows, fit on the rest",
                               "n_carve": len(carve), "n_fit": len(rest), "carve_hash": carve.data_hash()}
    return stretch


_FILE_CACHE: dict[tuple[str, float], LabelSet] = {}


def _as_labelset(data: LabelSet | Sequence[Label] | str | Path) -> LabelSet:
    """Label sets from memory or a file; files are cached by (path, mtime) since every refit replays them."""
    if isinstance(data, LabelSet):
        return data
    if isinstance(data, (str, Path)):
        key = (str(Path(data).resolve()), Path(data).stat().st_mtime if Path(data).is_file() else 0.0)
        if key not in _FILE_CACHE:
            _FILE_CACHE[key] = load_labelset(data)
        return _FILE_CACHE[key]
    labels = list(data)
    return from_labels(labels) if labels else LabelSet([], np.zeros(0), [], 0, "empty")


def finetune(base_ckpt: str | Path, new_labels: LabelSet | Sequence[Label] | str | Path,
             replay_data: LabelSet | Sequence[Label] | str | Path, ratio: float = 5.0, epochs: int = 10,
             lr: float = 1e-4, batch: int = 32, seed: int = 0) -> ForgeFormerPredictor:
    """A new predictor fine-tuned from the frozen base checkpoint (re-read from disk every call)."""
    from surrogate.training import finetune_member  # Lightning's imports, paid by what trains

    if ratio < 0 or epochs < 1 or batch < 2:
        raise UserError(f"finetune: ratio={ratio}, epochs={epochs}, batch={batch}; allowed: ratio >= 0, "
                        "epochs >= 1, batch >= 2")
    stem = resolve_checkpoint(base_ckpt)
    base = load_predictor(stem)
    new, old = _as_labelset(new_labels), _as_labelset(replay_data)
    if len(new) == 0:
        raise UserError("finetune: no new labels; allowed: at least one finite label")
    args = (base.norm, base.field_set, base.L_max, base.target)
    new_a, old_a = _arrays(base, new, *args), _arrays(base, old, *args)
    members = [finetune_member(m, new_a, old_a, ratio, epochs, lr, batch, seed + k, base.target.scale)
               for k, m in enumerate(base.torch_members())]
    base_hash = hashlib.sha256(stem.with_suffix(".safetensors").read_bytes()).hexdigest()[:16]
    meta = {**base.meta, "finetune": {"base": str(stem), "base_weights_hash": base_hash, "n_new": len(new),
                                      "n_replay": len(old), "ratio": ratio, "epochs": epochs, "lr": lr,
                                      "batch": batch, "seed": seed, "new_data_hash": new.data_hash()},
            **finetuned_covers(base.meta, new, old)}
    forests = base.forests
    if forests and len(old):  # forests train in seconds: refit on replay + new rows (base forests if no replay)
        et = [f.n_trees for f in forests if f.kind == "et"]
        forests = fit_forests(old, new, forests[0].n_trees, seed, base.L_max, et[0] if et else 0)
    # the base's low-end stretch is kept: it corrects the recipe's shrinkage, which a short refit keeps.
    # So is its conformal calibration, marked as measured on the base (the refit's own error is unmeasured)
    conformal = base.conformal
    if conformal is not None:
        conformal = replace(conformal, provenance={**conformal.provenance, "measured_on": f"base checkpoint {stem.name} "
                                                   "(this predictor is a replay fine-tune of it)"})
    pairwise = base.pairwise.inherited(stem.name) if base.pairwise is not None else None  # the parent's, said so
    return ForgeFormerPredictor(members, base.norm, base.field_set, base.space, base.target, meta, forests,
                                base.nn_weight, base.calib, conformal, base.forest_weights, pairwise)


def finetuned_covers(base_meta: dict[str, Any], new: LabelSet, replay: LabelSet) -> dict[str, Any]:
    """A fine-tune's `covers`: the union of its base's and of what its new and replay rows saw (mode=train declares
    its own data's the same way), with each part's source (`covers_from`: the base's ranges, and each data set's
    hash beside its ranges), so a reader can check the ranges against the rows they came from."""
    parts = {"base": {"covers": covers_of(base_meta), "data_hash": base_meta.get("data_hash")},
             "new": {"covers": data_covers(new), "data_hash": new.data_hash()}}
    if len(replay):
        parts["replay"] = {"covers": data_covers(replay), "data_hash": replay.data_hash()}
    return {"covers": union_covers(*(p["covers"] for p in parts.values())), "covers_from": parts}


def held_predictions(p: ForgeFormerPredictor, held: LabelSet, n_mc: int,
                     seed: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(deterministic μ, MC μ, MC σ) of `p` on `held`; the MC pair is None when n_mc = 0."""
    import torch

    mu, _ = p.predict(held.genomes)
    if n_mc <= 0:
        return mu, None, None
    p.seed_mc(seed)
    torch.manual_seed(seed)
    mu_mc, sigma = p.predict(held.genomes, n_mc=n_mc)
    return mu, mu_mc, sigma


def conformal_fit(p: ForgeFormerPredictor, held: LabelSet, split: dict, n_mc: int = 10,
                  bins: int | tuple[float, ...] = BEST_BINS, seed: int = 0, level: float = 0.9) -> ConformalInterval:
    """Split-conformal scores of `p` on `held`, rows it never trained on (its test split); `split` says which
    rows they are. Deterministic μ gives the residual scores; n_mc MC-dropout passes seeded by `seed` give
    μ/σ for the σ-scaled ones (n_mc = 0: residual only). Both tails are calibrated separately. The
    provenance records a 5-fold cross-conformal check at `level` on the same rows, folds grouped by
    architecture (calibrate on 4 folds, measure on the 5th): coverage, each tail's misses, best-10 % coverage."""
    mu, mu_mc, sigma = held_predictions(p, held, n_mc, seed)
    bins = bins if isinstance(bins, int) else tuple(float(b) for b in bins)
    cv = coverage_cv(held.y, mu, mu_mc, sigma, level, bins=bins, seed=seed, ids=held.ids)
    keys = ("coverage", "below", "above", "width", "coverage_best10")
    prov = {"rows": "held-out test split (architecture-level; never trained on, never used to pick an epoch)",
            **split, "n_rows": len(held), "rows_hash": held.data_hash(), "n_mc": n_mc, "mc_seed": seed,
            "bins": bins if isinstance(bins, int) else list(bins), "tails": "two (lower and upper calibrated apart)",
            "cv_check": {"level": level, "folds": 5, "grouped_by": "architecture (canonical genome id)",
                         **{k: {s: round(v[s], 4) for s in keys} for k, v in cv.items()}}}
    return ConformalInterval.fit(held.y, mu, mu_mc, sigma, bins, prov)


def pairwise_fit(p: ForgeFormerPredictor, held: LabelSet, split: dict, seed: int = 0) -> Any:
    """Pairwise odds of `p` (surrogate.pairwise) on `held`, rows it never trained on: one model, so every pair of
    held rows counts; the check's folds are grouped by architecture."""
    from surrogate.pairwise import PairwiseOdds, group_folds_of

    mu = np.asarray(p.predict(held.genomes)[0], float)
    ids = np.asarray(held.ids).astype(str)
    return PairwiseOdds.fit(mu, held.y, ids, np.zeros(len(ids), int), group_folds_of(ids, 5, seed),
                            source=f"held-out test split {split.get('split', '')} of {split.get('data', '?')}")

