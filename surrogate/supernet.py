"""A weight-sharing IHA supernet as a loss source (issue 38): score any genome of a space by the validation
loss of its slice with inherited weights.

The supernet is `forge.lm.model.IHAModel` built from the space's largest genome (every slot active, with
attention, at the largest n_h / n_kv / d_qk / d_v / d_mlp, full attention). A genome runs as a slice of it
(`IHAModel.forward(..., sub=genome)`): the first n_h query heads and n_kv groups, the first d_qk / d_v dims per
head, the first d_mlp units, its inactive slots skipped, attn=false slots without attention, its window as the
mask. Written once in the model, so a slice's forward equals the standalone model with the same weights
(tests/surrogate/test_supernet.py).

A score is a loss of the *shared* weights, trained by `surrogate.supernet_train` for a stated budget; it is not
the loss the genome reaches when trained alone. `SupernetPredictor` maps it to label units with a least-squares
line fitted on labelled rows and sizes its interval with the same split-conformal code as every predictor
(`calibrate_interval`). What the scores are worth against real labels is measured in bench/RESULTS.md
(issue 38) and docs/concepts/supernet.md.

A checkpoint is `<stem>.safetensors` (the supernet's weights) + `<stem>.json` (format, space, protocol and
corpus configs, the line, the conformal calibration, provenance); nothing is unpickled.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn

from forge.errors import UserError
from forge.genomes.genome import Genome, LayerGene, genome_from_dict
from forge.disk.io import atomic_write_json, loads
from forge.labelling.train import Protocol, evaluate, save_weights
from forge.lm.model import IHAModel
from surrogate.conformal import ConformalInterval, coverage_cv, interval_or_nan
from surrogate.features import FeatureError

FORMAT = "forge-surrogate/supernet-v1"
DIMS = ("n_h", "n_kv", "d_qk", "d_v", "d_mlp")


def largest(space: Any) -> Genome:
    """Every slot active with attention, each dim at its grid's maximum, full attention: the supernet itself."""
    top = LayerGene(**{k: max(space.grid(k)) for k in DIMS})
    return space.genome([top] * space.L_max, name="supernet")


def smallest(space: Any) -> Genome:
    """One active attention layer (slot 0) at each grid's minimum and the narrowest window (sandwich rule)."""
    wins = [w for w in space.grid("window") if w]
    low = LayerGene.build(**{k: min(space.grid(k)) for k in DIMS}, **({"window": min(wins)} if wins else {}))
    off = low.replace(active=False)
    return space.genome([low] + [off] * (space.L_max - 1), name="smallest")


def space_meta(space: Any) -> dict[str, Any]:
    """What a checkpoint records of its space: the globals, the depth and each dim's maximum."""
    g = largest(space)
    return {"name": space.name, "L_max": space.L_max, "d_model": g.d_model, "block_size": g.block_size,
            "vocab_size": g.vocab_size, **{f"max_{k}": int(getattr(g.layers[0], k)) for k in DIMS},
            "genome": g.to_dict()}


GLOBALS = ("d_model", "block_size", "vocab_size", "mlp", "norm", "bias", "tied", "pos", "parallel")


def check_slice(meta: dict[str, Any], genomes: Sequence[Genome]) -> None:
    """Refuse a genome the supernet cannot slice: other globals, more slots, or a dim above the supernet's."""
    for i, g in enumerate(genomes):
        for k in GLOBALS:
            if getattr(g, k) != meta["genome"][k]:
                raise FeatureError(f"genome #{i} has {k}={getattr(g, k)}; this supernet was trained for space "
                                   f"{meta['name']!r} with {k}={meta['genome'][k]}")
        if len(g.layers) > meta["L_max"]:
            raise FeatureError(f"genome #{i} has {len(g.layers)} layer slots; allowed: at most {meta['L_max']}")
        for j, layer in enumerate(g.layers):
            for k in DIMS:
                if layer.active and getattr(layer, k) > meta[f"max_{k}"]:
                    raise FeatureError(f"genome #{i} layers[{j}].{k} = {getattr(layer, k)}; allowed: at most "
                                       f"{meta[f'max_{k}']} (the supernet of space {meta['name']!r})")


class _Slice(nn.Module):
    """One genome's slice as a plain LM module (what `forge.labelling.train.evaluate` scores)."""

    def __init__(self, net: IHAModel, genome: Genome) -> None:
        super().__init__()
        self.net, self.genome = net, genome

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        return self.net(idx, targets, sub=self.genome)


def score(net: IHAModel, genomes: Sequence[Genome], corpus: Any, protocol: Protocol, batch: int = 16) -> np.ndarray:
    """Validation loss of each genome's slice with inherited weights on the protocol's fixed validation windows,
    `batch` windows per forward."""
    p = replace(protocol, batch=batch)
    dev = next(net.parameters()).device
    return np.array([evaluate(_Slice(net, g), corpus, p, dev) for g in genomes], dtype=float)


@dataclass
class SupernetPredictor:
    """The search-side `LossPredictor`: label ≈ slope · score + intercept; σ = 0 (scores are deterministic)."""

    net: IHAModel
    space: dict[str, Any]
    protocol: dict[str, Any]
    corpus: dict[str, Any]
    line: tuple[float, float] = (1.0, 0.0)
    conformal: ConformalInterval | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    score_batch: int = 16
    _cache: dict[str, float] = field(default_factory=dict, repr=False)

    def scores(self, genomes: Sequence[Genome]) -> np.ndarray:
        """Raw supernet scores (nats per token of the shared weights), cached by genome id."""
        from forge.labelling.corpus import build_corpus

        check_slice(self.space, genomes)
        todo = [g for g in dict.fromkeys(genomes) if g.id not in self._cache]
        if todo:
            s = score(self.net.eval(), todo, build_corpus(dict(self.corpus)), Protocol.from_config(self.protocol),
                      self.score_batch)
            self._cache.update(zip((g.id for g in todo), s.tolist()))
        return np.array([self._cache[g.id] for g in genomes], dtype=float)

    def predict(self, genomes: Sequence[Genome], n_mc: int = 0) -> tuple[np.ndarray, np.ndarray]:
        mu = self.line[0] * self.scores(genomes) + self.line[1]
        return mu, np.zeros_like(mu)

    def interval(self, mu: np.ndarray, sigma: np.ndarray, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        return interval_or_nan(self.conformal, mu, sigma, level)

    def interval_info(self, has_sigma: bool) -> dict[str, Any]:
        if self.conformal is None:
            return {"method": "none", "source": "supernet checkpoint without conformal calibration"}
        return {"method": self.conformal.method(False), "source": self.conformal.provenance}

    def fit_line(self, genomes: Sequence[Genome], y: np.ndarray) -> "SupernetPredictor":
        """Least-squares label ≈ slope · score + intercept on labelled rows (order is the score's own)."""
        s = self.scores(genomes)
        slope, icpt = np.polyfit(s, np.asarray(y, float), 1) if len(set(s.round(9))) > 1 else (0.0, float(np.mean(y)))
        self.line = (float(slope), float(icpt))
        return self

    def sidecar(self) -> dict[str, Any]:
        return {"format": FORMAT, "space": self.space, "protocol": self.protocol, "corpus": self.corpus,
                "line": list(self.line), "score_batch": self.score_batch,
                **({"conformal": self.conformal.to_dict()} if self.conformal is not None else {}), **self.meta}

    def save(self, stem: str | Path) -> Path:
        stem = Path(stem).with_suffix("") if Path(stem).suffix in (".json", ".safetensors") else Path(stem)
        save_weights(self.net, stem.with_suffix(".safetensors"))
        atomic_write_json(stem.with_suffix(".json"), self.sidecar())
        return stem.with_suffix(".json")


def calibrate_interval(p: SupernetPredictor, held: Any, split: dict[str, Any], seed: int = 0, level: float = 0.9,
                       bins: int = 3) -> ConformalInterval:
    """The interval hookup, in one place: two-tailed split-conformal residual scores on held-out labelled rows
    (`surrogate.conformal`, as every checkpoint), with the same grouped cross-conformal check in its provenance
    as `surrogate.fit.conformal_fit` (not called: it would close an import circle through surrogate.predictor)."""
    mu, _ = p.predict(held.genomes)
    cv = coverage_cv(held.y, mu, None, None, level, bins=bins, seed=seed, ids=held.ids)
    keys = ("coverage", "below", "above", "width", "coverage_best10")
    prov = {"rows": "held-out labelled rows (not used for the line)", **split, "n_rows": len(held),
            "rows_hash": held.data_hash(), "n_mc": 0, "bins": bins, "tails": "two (lower and upper calibrated apart)",
            "cv_check": {"level": level, "folds": 5, "grouped_by": "architecture (canonical genome id)",
                         **{k: {s: round(v[s], 4) for s in keys} for k, v in cv.items()}}}
    p.conformal = ConformalInterval.fit(held.y, mu, bins=bins, provenance=prov)
    return p.conformal


class SupernetCheckpointError(UserError):
    """A supernet checkpoint that cannot be read."""


def load_supernet(stem: Path) -> SupernetPredictor:
    """Load `<stem>.json` + `<stem>.safetensors`; the JSON only names configs, never code."""
    from safetensors.torch import load_model

    try:
        meta = loads(Path(stem).with_suffix(".json").read_text())
        net = IHAModel(genome_from_dict(meta["space"]["genome"]))
        load_model(net, str(Path(stem).with_suffix(".safetensors")))
        conf = ConformalInterval.from_dict(meta["conformal"]) if meta.get("conformal") else None
        Protocol.from_config(meta["protocol"])
    except (OSError, KeyError, TypeError, ValueError, RuntimeError, UserError) as e:
        raise SupernetCheckpointError(f"{stem}: unreadable supernet checkpoint: {e}") from None
    rest = {k: v for k, v in meta.items() if k not in ("format", "space", "protocol", "corpus", "line", "conformal",
                                                       "score_batch")}
    return SupernetPredictor(net.eval(), meta["space"], meta["protocol"], meta["corpus"],
                             tuple(float(x) for x in meta["line"]), conf, rest, int(meta.get("score_batch", 16)))
