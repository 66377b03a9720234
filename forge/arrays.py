"""Struct-of-arrays view of a population, the input of every vectorized cost model.

Per-layer fields are (P, L) integer arrays; attention fields are zeroed where a layer is pruned or
its attention is the identity, and every field is zeroed on pruned layers, so a cost model can sum
over layers without looking at the masks again. Globals are (P,) arrays, so one population may mix
baselines of different widths and vocabularies.

`weight_bytes`, `act_bytes`, `kv_bytes` are (P,) bytes per element from each genome's precision genes
(shared MX scales included), NaN where a genome has none: the analyzer then uses the workload's.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Sequence

import numpy as np

from forge.genome import Genome

LAYER_KEYS = ("active", "attn", "n_h", "n_kv", "d_qk", "d_v", "d_mlp")
PREC_KEYS = ("weight_bytes", "act_bytes", "kv_bytes")


@dataclass
class PopArrays:
    active: np.ndarray  # (P, L) 0/1
    attn: np.ndarray  # (P, L) 0/1, already ANDed with active
    n_h: np.ndarray  # (P, L)
    n_kv: np.ndarray
    d_qk: np.ndarray
    d_v: np.ndarray
    d_mlp: np.ndarray
    d_model: np.ndarray  # (P,)
    block_size: np.ndarray
    vocab_size: np.ndarray
    swiglu: np.ndarray  # (P,) bool: three-matrix MLP
    learned_pos: np.ndarray  # (P,) bool: learned position table of block_size rows
    tied: np.ndarray  # (P,) bool
    bias_qkv: np.ndarray  # (P,) bool: biases on Q, K, V (true for bias in {qkv, all})
    bias_all: np.ndarray  # (P,) bool: biases on every linear and norm
    layernorm: np.ndarray  # (P,) bool: LayerNorm (else RMSNorm)
    weight_bytes: np.ndarray | None = None  # (P,) float, NaN = the workload's precision
    act_bytes: np.ndarray | None = None
    kv_bytes: np.ndarray | None = None

    def __post_init__(self) -> None:
        for k in PREC_KEYS:
            if getattr(self, k) is None:
                setattr(self, k, np.full(self.active.shape[0], np.nan))

    @property
    def P(self) -> int:
        return self.active.shape[0]

    @property
    def L(self) -> int:
        return self.active.shape[1]

    def masked(self) -> "PopArrays":
        """Zero pruned layers everywhere and attention fields of identity layers."""
        act = self.active.astype(bool)
        att = act & self.attn.astype(bool)
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        kw["active"] = act.astype(np.int64)
        kw["attn"] = att.astype(np.int64)
        for k in ("n_h", "n_kv", "d_qk", "d_v"):
            kw[k] = np.where(att, kw[k], 0).astype(np.int64)
        kw["d_mlp"] = np.where(act, kw["d_mlp"], 0).astype(np.int64)
        return PopArrays(**kw)

    @property
    def has_precision(self) -> bool:
        return bool(np.isfinite(self.weight_bytes).any() or np.isfinite(self.act_bytes).any()
                    or np.isfinite(self.kv_bytes).any())

    def with_bytes(self, **kw: np.ndarray | None) -> "PopArrays":
        """A copy with some per-genome byte fields replaced (None = NaN, the workload's)."""
        return replace(self, **kw)

    def take(self, idx: np.ndarray) -> "PopArrays":
        return PopArrays(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @classmethod
    def from_genomes(cls, genomes: Sequence[Genome], L: int | None = None) -> "PopArrays":
        """Stack genomes, padding each to L layer slots with pruned layers."""
        L = L or max(len(g.layers) for g in genomes)
        P = len(genomes)
        lay = {k: np.zeros((P, L), dtype=np.int64) for k in LAYER_KEYS}
        for p, g in enumerate(genomes):
            for i, gene in enumerate(g.layers):
                for k in LAYER_KEYS:
                    lay[k][p, i] = int(getattr(gene, k))
        glob = dict(
            d_model=np.array([g.d_model for g in genomes], dtype=np.int64),
            block_size=np.array([g.block_size for g in genomes], dtype=np.int64),
            vocab_size=np.array([g.vocab_size for g in genomes], dtype=np.int64),
            swiglu=np.array([g.mlp == "swiglu" for g in genomes]),
            learned_pos=np.array([g.pos == "learned" for g in genomes]),
            tied=np.array([g.tied for g in genomes]),
            bias_qkv=np.array([g.bias in ("qkv", "all") for g in genomes]),
            bias_all=np.array([g.bias == "all" for g in genomes]),
            layernorm=np.array([g.norm == "layernorm" for g in genomes]),
        )
        prec = np.array([g.precision.bytes() if g.precision is not None else (np.nan,) * 3 for g in genomes],
                        dtype=float).reshape(P, 3)
        glob.update({k: prec[:, j] for j, k in enumerate(PREC_KEYS)})
        return cls(**lay, **glob).masked()
