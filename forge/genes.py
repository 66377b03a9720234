"""The gene registry: every per-layer gene of a genome is declared here once.

A `Gene` says its name, its type (int or bool), the smallest valid value, its default (the value a
genome written before the gene existed takes), whether identity-attention layers blank it, which gene
its value must divide (n_kv | n_h), and whether it enters the surrogate's tokens. The genome (validation,
canonical id, YAML/JSON), the space (grids, sampling, repair, codec), the population arrays, the
operators and the feature packer iterate over `LAYER_GENES` instead of naming genes; only the model and
the workload analyzer give a gene its meaning.

A gene registered after the first seven (`LEGACY`) is stored only when it differs from its default, so
the ids and files of every genome that predates it stay byte-identical. Adding a gene is one call:

    register(Gene("window", lo=0, default=0, attention=True))

and a space that searches it lists its grid (`window: [0, 64, 128]` in conf/space/*.yaml).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

LEGACY = ("n_h", "n_kv", "d_qk", "d_v", "d_mlp", "active", "attn")  # LayerGene's own fields, in this order
REQUIRED = None  # a default of None: the gene must be given


@dataclass(frozen=True)
class Gene:
    """One per-layer gene. `grid`: searched over a grid the space lists (the masks `active`/`attn` are not)."""

    name: str
    kind: str = "int"  # int | bool
    lo: int = 1  # smallest valid int
    default: Any = REQUIRED
    attention: bool = False  # identity-attention layers blank it to 0
    divides: str | None = None  # its value must divide this gene's (n_kv | n_h)
    grid: bool = True
    token: bool = True  # a field of the surrogate's per-layer tokens when the surrogate asks for it
    doc: str = ""

    @property
    def legacy(self) -> bool:
        return self.name in LEGACY


LAYER_GENES: dict[str, Gene] = {}


def register(gene: Gene) -> Gene:
    """Declare a per-layer gene (codec column order = registration order). Re-registering the same
    declaration is a no-op; a different one under a taken name is an error."""
    if not isinstance(gene, Gene):
        raise TypeError(f"register() takes a Gene, got {type(gene).__name__}")
    old = LAYER_GENES.get(gene.name)
    if old is not None and old != gene:
        raise ValueError(f"gene {gene.name!r} is already registered as {old}")
    if gene.kind not in ("int", "bool"):
        raise ValueError(f"gene {gene.name!r}: kind = {gene.kind!r}; allowed: int | bool")
    if gene.name not in LEGACY and gene.default is REQUIRED:
        raise ValueError(f"gene {gene.name!r} needs a default (the value genomes written before it take)")
    LAYER_GENES[gene.name] = gene
    return gene


def unregister(name: str) -> None:
    """Remove a non-legacy gene (tests that register a toy gene clean up with it)."""
    if name in LEGACY:
        raise ValueError(f"gene {name!r} is built in and cannot be removed")
    LAYER_GENES.pop(name, None)


@contextmanager
def registered(gene: Gene) -> Iterator[Gene]:
    """`with registered(Gene(...)):` the gene exists inside the block only."""
    register(gene)
    try:
        yield gene
    finally:
        unregister(gene.name)


def extra_genes() -> tuple[Gene, ...]:
    """Registered genes beyond LayerGene's own fields (stored only when not at their default)."""
    return tuple(g for g in LAYER_GENES.values() if not g.legacy)


def grid_genes() -> tuple[Gene, ...]:
    """Genes a space searches over a grid, in codec order."""
    return tuple(g for g in LAYER_GENES.values() if g.grid)


def attention_genes() -> tuple[str, ...]:
    return tuple(g.name for g in LAYER_GENES.values() if g.attention)


for _g in (
    Gene("active", kind="bool", lo=0, default=True, grid=False, doc="the slot is a layer (False: pruned)"),
    Gene("attn", kind="bool", lo=0, default=True, grid=False, doc="attention on (False: identity attention)"),
    Gene("n_h", attention=True, doc="query heads"),
    Gene("n_kv", attention=True, divides="n_h", doc="KV groups (n_kv | n_h)"),
    Gene("d_qk", attention=True, doc="query/key head dim"),
    Gene("d_v", attention=True, doc="value head dim"),
    Gene("d_mlp", doc="MLP hidden width"),
    Gene("window", lo=0, default=0, attention=True,
         doc="attention window in tokens: 0 = full causal attention, w > 0 = query i sees keys i-w < j <= i"),
):
    register(_g)
