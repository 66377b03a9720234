"""The Forge-Former predictor the search uses: predict (MC-dropout), intervals, devices, save. Reading a
checkpoint back (`load_predictor`, `register_format`) lives in surrogate/loading.py.

A checkpoint is `<stem>.safetensors` (member weights, `m<k>.<param>` keys) plus `<stem>.json` (format,
encoder config, field layout, train-split normalization statistics, target scaling, the space/globals
it was trained for, data hash, recipe and metrics). Loading reads tensors with safetensors and the sidecar
with json (surrogate/loading.py): nothing is ever unpickled. A loaded checkpoint's members are numpy arrays run by
surrogate/numpy_encoder.py on the CPU (no torch import); `torch_members()` and `to("cuda")` make torch modules
of them for fine-tuning and GPUs, imported only then.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from safetensors.numpy import save_file

from forge.genomes.genome import Genome
from forge.disk.io import atomic_write_bytes, atomic_write_json
from surrogate.calibration import LowEndStretch
from surrogate.checkpoints import checkpoint_stem, covers_of
from surrogate.conformal import ConformalInterval, interval_or_nan
from surrogate.pairwise import PairwiseOdds
from surrogate.dataset import LabelSet
from surrogate.features import FeatureError, MinMax, Packed, featurize, field_names
from surrogate.numpy_encoder import NumpyForgeFormer, from_torch
from surrogate.targets import TargetMap
from surrogate.tree_walk import join_forests
from surrogate.trees import RankForest, forests_predict, forests_predict_spread

FORMAT = "forge-surrogate/forgeformer-v1"
DEFAULT = "forgeformer-iha-paper-all"  # every shared label (issue 35); "forgeformer-iha-paper" still loads by name


def _space_of(data: LabelSet, name: str, L_max: int) -> dict[str, Any]:
    g = data.genomes
    glob = {k: sorted({getattr(x, k) for x in g}) for k in ("d_model", "block_size", "vocab_size")}
    mixed = [k for k, v in glob.items() if len(v) > 1]
    if mixed:
        raise FeatureError(f"training labels mix several {mixed[0]} values {glob[mixed[0]]}; allowed: one space")
    return {"name": name, "L_max": L_max, **{k: int(v[0]) for k, v in glob.items()}}


@dataclass
class ForgeFormerPredictor:
    """The search-side `surrogate.interface.LossPredictor` for one space; an ensemble averages its members."""

    members: list[Any]  # `NumpyForgeFormer`s (loaded) or torch `ForgeFormer`s (trained, or moved to a GPU)
    norm: MinMax
    field_set: str
    space: dict[str, Any]
    target: TargetMap = field(default_factory=TargetMap)
    meta: dict[str, Any] = field(default_factory=dict)
    forests: list[RankForest] = field(default_factory=list)  # hybrid: rank-target forests averaged in
    nn_weight: float = 1.0  # weight of the encoder ensemble; the forests share the rest equally
    calib: LowEndStretch | None = None  # low-end stretch fit on held-out predictions (surrogate/calibration.py)
    conformal: ConformalInterval | None = None  # interval calibration on held-out labels (surrogate/conformal.py)
    forest_weights: list[float] | None = None  # weights of the forests within their share (None: equal)
    pairwise: PairwiseOdds | None = None  # P(lower μ trains better | Δμ) on held-out pairs (surrogate/pairwise.py)

    def __post_init__(self) -> None:
        self.seed_mc(0)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "forests":  # joined once, when the forests arrive (built, loaded or refit): the joint walk's arrays
            super().__setattr__("joint", join_forests(value) if len(value) > 1 else None)

    @property
    def L_max(self) -> int:
        return int(self.space["L_max"])

    @property
    def covers(self) -> dict[str, Any]:
        """The genes its training data covered ({gene: [lo, hi] | None}; search.blind refuses the others)."""
        return covers_of(self.sidecar())

    def check(self, genomes: Sequence[Genome]) -> None:
        """Refuse genomes from another space (globals or depth) with a clear message."""
        for i, g in enumerate(genomes):
            for k in ("d_model", "block_size", "vocab_size"):
                if getattr(g, k) != self.space[k]:
                    raise FeatureError(f"genome #{i} has {k}={getattr(g, k)}; this surrogate was trained for "
                                       f"space {self.space['name']!r} with {k}={self.space[k]}")
            if g.n_active > self.L_max or len(g.layers) > self.L_max:
                raise FeatureError(f"genome #{i} has {len(g.layers)} layer slots ({g.n_active} active); "
                                   f"allowed: at most {self.L_max} (space {self.space['name']!r})")

    def arrays(self, genomes: Sequence[Genome], packed: Packed | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Normalized fields and mask; `packed`: this predictor's fields of `genomes`, already checked."""
        if packed is None:
            self.check(genomes)
            packed = featurize(genomes, self.field_set, self.L_max)
        return self.norm.apply(packed), packed.mask

    def tensors(self, genomes: Sequence[Genome], packed: Packed | None = None) -> tuple[Any, Any]:
        """`arrays` as torch tensors (for the torch modules)."""
        import torch

        return tuple(torch.from_numpy(a) for a in self.arrays(genomes, packed))

    def seed_mc(self, seed: int) -> None:
        """Re-seed every member's dropout stream: the same seed and call sequence give the same σ."""
        for k, m in enumerate(self.members):
            m.seed_dropout(int(np.random.SeedSequence([seed, k]).generate_state(1)[0]))

    def predict(self, genomes: Sequence[Genome], n_mc: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(mu, sigma) in loss units. n_mc = 0: deterministic, sigma = 0. n_mc > 0: see `encoder_predict`.
        A hybrid adds its forests' mean with weight 1 − nn_weight; with n_mc > 0 its sigma combines the
        encoder's MC-dropout spread (weight nn_weight) and the forests' across-tree spread (1 − nn_weight).
        A calibrated predictor then stretches its low tail (order unchanged)."""
        packed = None
        if len(genomes):  # featurize once: the forests reuse the encoder's `derived` fields
            self.check(genomes)
            packed = featurize(genomes, self.field_set, self.L_max)
        mu, sigma = self.encoder_predict(genomes, n_mc, packed)
        if self.forests and len(genomes):
            w, shared = self.nn_weight, packed if self.field_set == "derived" else None
            if n_mc > 0:  # the encoder's MC-dropout spread and the forests' across-tree spread, as independent parts
                trees, spread = forests_predict_spread(self.forests, genomes, shared, self.forest_weights,
                                                       self.joint)
                sigma = np.sqrt((w * sigma) ** 2 + ((1.0 - w) * spread) ** 2)
            else:  # deterministic (the search's hot path): no per-tree loss mapping
                trees = forests_predict(self.forests, genomes, shared, self.forest_weights, self.joint)
            mu = w * mu + (1.0 - w) * trees
        return self.calib.apply(mu, sigma) if self.calib is not None else (mu, sigma)

    def interval(self, mu: np.ndarray, sigma: np.ndarray, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Calibrated (lo, hi) around `predict`'s output; NaN when the checkpoint has no conformal calibration
        (an unknown error is not a zero error)."""
        return interval_or_nan(self.conformal, mu, sigma, level)

    def interval_info(self, has_sigma: bool) -> dict[str, Any]:
        """Which method `interval` uses and the calibration's provenance (for summaries and cards)."""
        if self.conformal is None:
            return {"method": "none", "source": "uncalibrated checkpoint (run forge-surrogate mode=calibrate)"}
        return {"method": self.conformal.method(has_sigma), "source": self.conformal.provenance}

    def encoder_predict(self, genomes: Sequence[Genome], n_mc: int,
                        packed: Packed | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The encoder ensemble. n_mc > 0: n_mc stochastic passes with dropout on. An ensemble deals the
        passes round-robin to its members (pass j uses member j mod K), i.e. it samples the mixture of the
        members' MC-dropout posteriors: sigma covers seed and dropout uncertainty, and 10 passes cost what
        10 passes of one member cost. Each member's passes run as one batched forward.

        On the CPU the members run in float64 in numpy (surrogate/numpy_encoder.py; torch members' weights are
        converted exactly): float32 kernels of different instruction sets disagree at ~1e-8, float64 ones at
        ~1e-16, far below the digits the search keeps (forge.numeric), so every machine predicts the same
        rounded μ. Members moved to a GPU run there in torch float32."""
        if len(genomes) == 0:
            return np.zeros(0), np.zeros(0)
        if self._on_gpu():
            return self.torch_encoder_predict(genomes, n_mc, packed, "float32")
        x, mask = self.arrays(genomes, packed)
        members = [m if isinstance(m, NumpyForgeFormer) else from_torch(m) for m in self.members]
        if n_mc <= 0:
            return self.target.to_loss(np.stack([m(x, mask) for m in members]).mean(0)), np.zeros(len(x))
        samples = []
        for reps, m in self._mc_deal(n_mc, members):
            samples.append(m(np.tile(x, (reps, 1, 1)), np.tile(mask, (reps, 1)), m.masks).reshape(reps, len(x)))
        s = self.target.to_loss(np.concatenate(samples))  # each pass in loss units
        return s.mean(0), s.std(0)

    @staticmethod
    def _mc_deal(n_mc: int, members: list[Any]) -> list[tuple[int, Any]]:
        """(passes, member) for n_mc passes dealt round-robin over the members (members with none left out)."""
        K = len(members)
        deal = [(n_mc // K + (k < n_mc % K), m) for k, m in enumerate(members)]
        return [(r, m) for r, m in deal if r]

    def torch_encoder_predict(self, genomes: Sequence[Genome], n_mc: int, packed: Packed | None = None,
                              dtype: str = "float64") -> tuple[np.ndarray, np.ndarray]:
        """`encoder_predict` through the torch modules in `dtype` on their device (the GPU path; on the CPU in
        float64 the reference the numpy pass is tested against). Imports torch."""
        import torch

        members = self.torch_members()
        dev, dt = next(members[0].parameters()).device, getattr(torch, dtype)
        x, mask = self.tensors(genomes, packed)
        x, mask = x.to(dev, dt), mask.to(dev)
        try:
            for m in members:
                m.to(dt)  # outside inference mode: the parameters stay trainable
            with torch.inference_mode():
                if n_mc <= 0:
                    outs = torch.stack([m.eval()(x, mask) for m in members]).mean(0)
                    return self.target.to_loss(outs.double().cpu().numpy()), np.zeros(len(x))
                samples = [m.train()(x.repeat(reps, 1, 1), mask.repeat(reps, 1)).view(reps, len(x))
                           for reps, m in self._mc_deal(n_mc, members)]
        finally:
            for m in members:
                m.eval().float()
        s = self.target.to_loss(torch.cat(samples).double().cpu().numpy())
        return s.mean(0), s.std(0)

    def torch_members(self) -> list[Any]:
        """The members as torch `ForgeFormer`s (numpy members converted, sharing their dropout streams)."""
        if any(isinstance(m, NumpyForgeFormer) for m in self.members):
            from surrogate.forgeformer import ForgeFormer

            self.members = [ForgeFormer.from_numpy(m) if isinstance(m, NumpyForgeFormer) else m for m in self.members]
        return self.members

    @property
    def uses_torch_rng(self) -> bool:
        """Whether MC dropout draws from torch's generator (on a GPU); on the CPU it draws from `seed_mc`'s streams."""
        return self._on_gpu()

    def _on_gpu(self) -> bool:
        return any(not isinstance(m, NumpyForgeFormer) and next(m.parameters()).device.type != "cpu"
                   for m in self.members)

    @property
    def device(self) -> Any:
        """The encoder's torch device (numpy members: the CPU)."""
        import torch

        m = self.members[0]
        return torch.device("cpu") if isinstance(m, NumpyForgeFormer) else next(m.parameters()).device

    def to(self, device: Any) -> "ForgeFormerPredictor":
        """Run the encoder on `device` (e.g. "cuda"; on a GPU dropout is torch's own). The forests, the
        featurization and every returned array stay on the CPU; on the CPU the encoder runs in numpy."""
        if str(device) != "cpu":
            for m in self.torch_members():
                m.to(device)
        return self

    # ------------------------------------------------------------------ persistence
    def sidecar(self) -> dict[str, Any]:
        return {"format": FORMAT, "config": self.members[0].cfg.to_dict(), "n_members": len(self.members),
                "field_set": self.field_set, "fields": list(field_names(self.field_set)),
                "norm": self.norm.to_dict(), "target": self.target.to_dict(),
                "forests": [f.meta() for f in self.forests], "nn_weight": self.nn_weight,
                "calibration": self.calib.to_dict() if self.calib is not None else None,
                **({"conformal": self.conformal.to_dict()} if self.conformal is not None else {}),
                **({"forest_weights": self.forest_weights} if self.forest_weights is not None else {}),
                **({"pairwise": self.pairwise.to_dict()} if self.pairwise is not None else {}),
                "space": self.space, **self.meta}

    def save(self, stem: str | Path) -> Path:
        """Write `<stem>.safetensors` + `<stem>.json` atomically; returns the sidecar path."""
        stem = checkpoint_stem(stem)
        tensors = {f"m{k}.{n}": np.ascontiguousarray(t if isinstance(t, np.ndarray) else t.detach().cpu().numpy())
                   for k, m in enumerate(self.members) for n, t in m.state_dict().items()}
        for j, f in enumerate(self.forests):
            tensors.update(f.tensors(f"f{j}"))
        stem.parent.mkdir(parents=True, exist_ok=True)
        tmp = stem.with_name(stem.name + ".tmp.safetensors")
        save_file(tensors, str(tmp))
        atomic_write_bytes(stem.with_suffix(".safetensors"), tmp.read_bytes())
        tmp.unlink()
        atomic_write_json(stem.with_suffix(".json"), self.sidecar())
        return stem.with_suffix(".json")
