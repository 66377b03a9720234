"""How a Forge-Former is trained (`Recipe`), apart from the Lightning loop that uses it (surrogate/training.py), so
that what only reads a recipe (a checkpoint's sidecar, the compare table, `mode=eval`) loads without Lightning."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Recipe:
    """How to train; `paper` = App. C exactly, the defaults come from conf/surrogate/*.yaml."""

    field_set: str = "paper"
    epochs: int = 200
    lr: float = 1e-4
    weight_decay: float = 0.0
    batch: int = 32
    standardize: bool = False  # train on (y - mean) / std instead of raw losses
    normal_scores: bool = False  # train on the rank-Gauss transform of y (overrides standardize)
    rank_weight: float = 0.0  # pairwise ranking loss mixed with L1
    n_members: int = 1  # seed ensemble
    val_frac: float = 0.1  # validation carve of the training split (model selection)
    seed: int = 100  # App. C uses seed 100
    bucket: bool = False  # length-bucketed batches (same rows per epoch, far less padding on CPU)
    schedule: str = "constant"  # constant | cosine (per-epoch cosine decay of lr to ~0 at `epochs`)
    forests: bool = False  # hybrid: add two rank-target random forests (surrogate/trees.py), fit on train + val
    forest_trees: int = 100
    nn_weight: float = 1.0 / 3.0  # hybrid: encoder-ensemble weight; the two forests share the rest
    calibrate: bool = False  # low-end stretch picked by a nested split (surrogate/calibration.py, fit._nested_stretch)
    calib_frac: float = 0.15  # calibrate: inner carve of the training rows used for nothing but picking the stretch
    accelerator: str = "cpu"  # Lightning accelerator for training: cpu | gpu | auto
    workers: int = 1  # members trained at once in spawned processes, one torch thread each (see fit_members)

    def to_dict(self) -> dict:
        return asdict(self)

    def target_kind(self) -> str:
        return "normal_scores" if self.normal_scores else "standard" if self.standardize else "raw"
