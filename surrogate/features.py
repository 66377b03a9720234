"""Genomes → packed per-layer token fields for Forge-Former and the baselines.

Appendix C of LLMForge: each *active* layer is one token of 9 fields
`(n_h, n_kv, d_qk, d_v, d_mlp, mask, attn, d_model, T)`; active layers are packed in order (pruned
slots removed), padded to L_max = 40 positions. Featurization follows `genome.id`: pruned slots never
appear and the attention fields (n_h, n_kv, d_qk, d_v) of identity-attention layers are zeroed, so two
genomes with the same id always get the same features (and the same prediction).

The `derived` field set adds per-layer quantities the encoder otherwise has to learn from raw fields
(parameter counts, K/V elements per token and FLOPs, all from `forge.lm.workload`, plus the depth fraction) plus a few whole-architecture context fields
(active depth, attention layers among the first six, index of the first attention layer). The issue
notes the high-loss mode is driven by missing early attention, which these fields expose directly.

A registered gene beyond the original seven (forge.genomes.genes, `token=True`, e.g. `window`) joins the tokens
by name: field set `paper+window` (or `derived+window`) appends its value as one more field; a registered
global gene with `token=True` joins the same way, its value broadcast to every active layer's token. The plain
sets are unchanged, so shipped checkpoints featurize exactly as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from forge.spaces.arrays import PopArrays, population
from forge.errors import ForgeError
from forge.genomes.genes import SHAPE_GENES
from forge.genomes.genes import token_genes as registered_tokens
from forge.genomes.genome import Genome
from forge.lm.workload import Precision, layer_ops

BASE_FIELDS = (*SHAPE_GENES, "mask", "attn", "d_model", "T")  # the paper's token: the shape genes, then the slot
DERIVED_FIELDS = ("attn_params", "mlp_params", "kv_per_token", "flops_per_token", "depth_frac",
                  "n_active", "early_attn", "first_attn", "attn_frac_before")
_COST_FIELDS = DERIVED_FIELDS[:4]  # from forge.lm.workload (`_layer_costs`)
_ATTN_OPS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP_OPS = ("mlp_gate", "mlp_up", "mlp_down")
FIELD_SETS = {"paper": BASE_FIELDS, "derived": BASE_FIELDS + DERIVED_FIELDS}


class FeatureError(ForgeError):
    """A genome or checkpoint does not fit the field layout; the message says what and what is allowed."""


def token_genes(field_set: str) -> tuple[str, ...]:
    """The registered genes a field set appends (`derived+window` → ('window',))."""
    base, *genes = str(field_set).split("+")
    tokens = registered_tokens()
    if base not in FIELD_SETS or any(g not in tokens for g in genes) or len(set(genes)) != len(genes):
        raise FeatureError(f"field_set = {field_set!r} is invalid; allowed: {' | '.join(FIELD_SETS)}, optionally "
                           f"+<gene> for registered token genes ({', '.join(tokens) or 'none'})")
    return tuple(genes)


def field_names(field_set: str) -> tuple[str, ...]:
    genes = token_genes(field_set)
    return FIELD_SETS[str(field_set).split("+")[0]] + genes


@dataclass
class Packed:
    """(n, L_max, F) raw field values and the (n, L_max) bool mask of real (active) tokens."""

    x: np.ndarray
    mask: np.ndarray


def _pack(pop: PopArrays, L_max: int, extra: dict[str, np.ndarray] | None = None
          ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Move active layers to the front (stable), keep L_max slots; `extra` (P, L) columns move with them."""
    act = pop.active.astype(bool)
    if act.sum(axis=1).max() > L_max:
        raise FeatureError(f"a genome has {int(act.sum(axis=1).max())} active layers; allowed: at most {L_max}")
    order = np.argsort(~act, axis=1, kind="stable")
    take = lambda a: np.take_along_axis(a, order, axis=1)  # noqa: E731
    cols = {k: getattr(pop, k) for k in ("n_h", "n_kv", "d_qk", "d_v", "d_mlp", "attn")}
    cols = {k: take(v).astype(np.float64) for k, v in {**cols, **(extra or {})}.items()}
    mask = take(act)
    pad = L_max - mask.shape[1]
    if pad > 0:
        cols = {k: np.pad(v, ((0, 0), (0, pad))) for k, v in cols.items()}
        mask = np.pad(mask, ((0, 0), (0, pad)))
    return {k: v[:, :L_max] for k, v in cols.items()}, mask[:, :L_max]


def _layer_costs(pop: PopArrays) -> dict[str, np.ndarray]:
    """(P, L) per-layer costs from `forge.lm.workload`, the one source of parameters and FLOPs: projection
    and MLP weights (biases and a SwiGLU gate included), K/V elements stored per token, and the matmul
    FLOPs (projections + score/value products; element-wise ops excluded) of one token at full context T."""
    ops = layer_ops(pop, tokens=1, context=pop.block_size, prec=Precision(1.0, 1.0, 1.0))  # 1 byte = 1 element
    cols = lambda names: [ops.names.index(n) for n in names]  # noqa: E731
    matmul = [k != "elementwise" for k in ops.kinds]
    return {"attn_params": ops.weight_bytes[:, :, cols(_ATTN_OPS)].sum(axis=-1),
            "mlp_params": ops.weight_bytes[:, :, cols(_MLP_OPS)].sum(axis=-1),
            "kv_per_token": ops.kv_write_bytes.sum(axis=-1), "flops_per_token": ops.flops[:, :, matmul].sum(axis=-1)}


def _derived(c: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """Per-layer costs (already packed in `c`, zero on padding) and broadcast architecture context."""
    m = mask.astype(np.float64)
    n_act = m.sum(axis=1, keepdims=True)
    pos = np.cumsum(m, axis=1) - 1.0
    att = c["attn"] * m
    early = att[:, :6].sum(axis=1, keepdims=True)
    first = np.where(att.any(axis=1), att.argmax(axis=1), n_act[:, 0])[:, None].astype(np.float64)
    before = (np.cumsum(att, axis=1) - att) / np.maximum(pos + 1.0, 1.0)
    bc = lambda a: np.broadcast_to(a, m.shape) * m  # noqa: E731
    return {**{k: c[k] * m for k in _COST_FIELDS}, "depth_frac": pos / np.maximum(n_act, 1.0) * m,
            "n_active": bc(n_act), "early_attn": bc(early), "first_attn": bc(first), "attn_frac_before": before * m}


def featurize(genomes: Sequence[Genome], field_set: str = "paper", L_max: int = 40) -> Packed:
    """Raw (un-normalized) packed fields of a population, in `field_names(field_set)` order."""
    names = field_names(field_set)
    if not genomes:
        return Packed(np.zeros((0, L_max, len(names))), np.zeros((0, L_max), dtype=bool))
    pop = population(genomes)  # a search's GenomeBatch brings its arrays (no second stacking)
    derived = str(field_set).split("+")[0] == "derived"
    extra = {**(_layer_costs(pop) if derived else {}), **{g: pop.column(g) for g in token_genes(field_set)}}
    cols, mask = _pack(pop, L_max, extra or None)
    m = mask.astype(np.float64)
    d = pop.d_model[:, None].astype(np.float64)
    T = pop.block_size[:, None].astype(np.float64)
    cols.update(mask=m, d_model=d * m, T=T * m)
    if derived:
        cols.update(_derived(cols, mask))
    x = np.stack([cols[k] * m for k in names], axis=-1)
    return Packed(x=x, mask=mask)


@dataclass
class MinMax:
    """Per-field min/max from the TRAIN split only (App. C); constant fields map to 0."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def fit(cls, p: Packed) -> "MinMax":
        v = p.x[p.mask]  # real tokens only: padding zeros must not set the minimum
        return cls(lo=v.min(axis=0), hi=v.max(axis=0))

    def apply(self, p: Packed) -> np.ndarray:
        span = np.where(self.hi > self.lo, self.hi - self.lo, 1.0)
        z = (p.x - self.lo) / span
        return (z * p.mask[..., None]).astype(np.float32)

    def to_dict(self) -> dict[str, list[float]]:
        return {"lo": self.lo.tolist(), "hi": self.hi.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, list[float]]) -> "MinMax":
        return cls(lo=np.asarray(d["lo"], dtype=np.float64), hi=np.asarray(d["hi"], dtype=np.float64))


def flat_packed(p: Packed) -> np.ndarray:
    """(n, L_max·F) flattened packed fields (padding = 0) for the MLP and random forest."""
    return (p.x * p.mask[..., None]).reshape(p.x.shape[0], -1)
