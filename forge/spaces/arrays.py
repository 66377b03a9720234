"""Struct-of-arrays view of a population, the input of every vectorized cost model.

Per-layer fields are (P, L) integer arrays; attention fields are zeroed where a layer is pruned or
its attention is the identity, and every field is zeroed on pruned layers, so a cost model can sum
over layers without looking at the masks again. Globals are (P,) arrays, so one population may mix
baselines of different widths and vocabularies.

Per-layer fields follow the gene registry (forge.genomes.genes): the original seven are dataclass fields, every
registered gene beyond them (e.g. `window`, 0 = full attention) sits in `genes` and reads as an attribute
too (`pop.window`), its default filling arrays built without it. Masking iterates the registry.

Global genes (forge.genomes.genes.GLOBAL_GENES) become (P,) arrays through `global_columns`, the one place that turns
the nine into the analyzer's flags (swiglu, layernorm, ...); a registered global gene beyond the nine sits in
`glob` and reads as an attribute too (`pop.n_experts`). `column(name)` gives any gene as a (P, L) array
(a global one broadcast over the active layers): what the surrogate's tokens read.

`weight_bytes`, `act_bytes`, `kv_bytes` are (P,) bytes per element from each genome's precision genes
(shared MX scales included), NaN where a genome has none: the analyzer then uses the workload's.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping, Sequence

import numpy as np

from forge.genomes.genes import GLOBAL_GENES, LAYER_GENES, MASKS, SHAPE_GENES, extra_genes, extra_globals
from forge.genomes.genome import Genome

LAYER_KEYS = MASKS + SHAPE_GENES  # the built-in per-layer genes: PopArrays' own (P, L) fields
PREC_KEYS = ("weight_bytes", "act_bytes", "kv_bytes")


class GenomeBatch(list):
    """A list of genomes that also carries their PopArrays, built once from the encoded rows: the search
    hands it to the surrogate and the backend, which read `.arrays` instead of stacking the genomes again.
    Anything that only iterates genomes sees a plain list."""

    def __init__(self, genomes, arrays: "PopArrays") -> None:
        super().__init__(genomes)
        self.arrays = arrays


def global_columns(values: Mapping[str, Any], P: int) -> dict[str, Any]:
    """Every global gene's value (a scalar shared by the population, or a (P,) array) → PopArrays' global
    fields: the analyzer's flags from the nine, and `glob` for registered genes beyond them."""
    def col(k: str, f=lambda x: x) -> np.ndarray:  # noqa: ANN001
        x = values[k]
        return np.asarray(f(np.asarray(x))) if np.ndim(x) else np.full(P, f(x))
    return dict(d_model=col("d_model"), block_size=col("block_size"), vocab_size=col("vocab_size"),
                swiglu=col("mlp", lambda x: x == "swiglu"), learned_pos=col("pos", lambda x: x == "learned"),
                tied=col("tied", lambda x: x.astype(bool) if np.ndim(x) else bool(x)),
                bias_qkv=col("bias", lambda x: (x == "qkv") | (x == "all")), bias_all=col("bias", lambda x: x == "all"),
                layernorm=col("norm", lambda x: x == "layernorm"),
                glob={g.name: col(g.name) for g in extra_globals() if g.name in values})


def population(genomes: Sequence[Genome]) -> "PopArrays":
    """The genomes' PopArrays: a GenomeBatch's own, else stacked (`PopArrays.from_genomes`)."""
    arrays = getattr(genomes, "arrays", None)
    return arrays if isinstance(arrays, PopArrays) else PopArrays.from_genomes(genomes)


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
    genes: dict[str, np.ndarray] | None = None  # (P, L) per registered gene beyond the seven (e.g. window)
    glob: dict[str, np.ndarray] | None = None  # (P,) per registered global gene beyond the nine

    def __post_init__(self) -> None:
        for k in PREC_KEYS:
            if getattr(self, k) is None:
                setattr(self, k, np.full(self.active.shape[0], np.nan))
        self.genes = dict(self.genes or {})
        for g in extra_genes():
            if g.name not in self.genes:
                self.genes[g.name] = np.full(self.active.shape, int(g.default), dtype=np.int64)
        self.glob = dict(self.glob or {})
        for gg in extra_globals():
            if gg.name not in self.glob:
                self.glob[gg.name] = np.full(self.active.shape[0], gg.default)

    def __getattr__(self, name: str) -> np.ndarray:  # pop.window and any other registered gene
        for table in ("genes", "glob"):
            t = self.__dict__.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(name)

    def column(self, name: str) -> np.ndarray:
        """(P, L) numbers of any gene: a per-layer one as stored (masked), a global one (a choice as its index
        in the choices) broadcast over the active layers."""
        gene = GLOBAL_GENES.get(name)
        if gene is None:
            return getattr(self, name)
        v = getattr(self, name)
        if gene.kind == "choice":
            v = np.array([gene.choices.index(x) for x in v.tolist()])
        return self.active * np.asarray(v, dtype=np.int64)[:, None]

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
        kw["genes"], kw["glob"] = dict(self.genes), dict(self.glob)
        for gene in LAYER_GENES.values():
            if gene.name in ("active", "attn"):
                continue
            where = kw if gene.name in LAYER_KEYS else kw["genes"]
            where[gene.name] = np.where(att if gene.attention else act, where[gene.name], 0).astype(np.int64)
        return PopArrays(**kw)

    @property
    def has_precision(self) -> bool:
        return bool(np.isfinite(self.weight_bytes).any() or np.isfinite(self.act_bytes).any()
                    or np.isfinite(self.kv_bytes).any())

    def with_bytes(self, **kw: np.ndarray | None) -> "PopArrays":
        """A copy with some per-genome byte fields replaced (None = NaN, the workload's)."""
        return replace(self, **kw)

    def take(self, idx: np.ndarray) -> "PopArrays":
        kw = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("genes", "glob")}
        return PopArrays(**{k: v[idx] for k, v in kw.items()}, genes={k: v[idx] for k, v in self.genes.items()},
                         glob={k: v[idx] for k, v in self.glob.items()})

    @classmethod
    def from_genomes(cls, genomes: Sequence[Genome], L: int | None = None) -> "PopArrays":
        """Stack genomes, padding each to L layer slots with pruned layers."""
        L = L or max(len(g.layers) for g in genomes)
        P = len(genomes)
        names = tuple(LAYER_GENES)
        lay = {k: np.zeros((P, L), dtype=np.int64) for k in names}
        for p, g in enumerate(genomes):
            for i, gene in enumerate(g.layers):
                for k in names:
                    lay[k][p, i] = int(gene.get(k))
        glob = global_columns({k: np.array([g.get(k) for g in genomes]) for k in GLOBAL_GENES}, P)
        prec = np.array([g.precision.bytes() if g.precision is not None else (np.nan,) * 3 for g in genomes],
                        dtype=float).reshape(P, 3)
        glob.update({k: prec[:, j] for j, k in enumerate(PREC_KEYS)})
        genes = {k: lay.pop(k) for k in names if k not in LAYER_KEYS}
        return cls(**lay, **glob, genes=genes).masked()
