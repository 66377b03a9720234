"""The gene registry: every gene of a genome, per layer or genome-wide, is declared here once.

A `Gene` (per layer) says its name, its type (int or bool), the smallest valid value, its default (the value a
genome written before the gene existed takes), whether identity-attention layers blank it, which gene
its value must divide (n_kv | n_h), and whether it enters the surrogate's tokens. The genome (validation,
canonical id, YAML/JSON), the space (grids, sampling, repair, codec), the population arrays, the
operators and the feature packer iterate over `LAYER_GENES` instead of naming genes; only the model and
the workload analyzer give a gene its meaning.

A gene registered after the first seven (`BUILTIN`) is stored only when it differs from its default, so
the ids and files of every genome that predates it stay byte-identical. Adding a gene is one call:

    register(Gene("window", lo=0, default=0, attention=True))

and a space that searches it lists its grid (`window: [0, 64, 128]` in conf/space/*.yaml).

A `GlobalGene` is genome-wide (d_model, block_size, vocab_size, mlp, norm, bias, tied, pos, parallel:
`GLOBAL_BUILTIN`, always stored): its kind (int, bool, or one of `choices`), smallest int, default, whether a
space may search it (`d_model: [128, 192]` in a space yaml: one codec column after the layer slots) and
whether it can join the surrogate's tokens (broadcast to every layer, field set `paper+<name>`; d_model and
block_size already sit in every token as `d_model` and `T`). `card` is how the export card's architecture
line shows it. A global gene registered later is stored only off its default, like a per-layer one:

    register(GlobalGene("n_experts", lo=1, default=1, doc="mixture-of-experts MLP"))
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

BUILTIN = ("n_h", "n_kv", "d_qk", "d_v", "d_mlp", "active", "attn")  # the built-in genes: LayerGene's own fields
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
    def builtin(self) -> bool:
        """One of LayerGene's own fields (always stored), not a gene registered later (stored off its default)."""
        return self.name in BUILTIN

    def show(self, value: Any) -> str:
        """A value as tables and cards print it: a bool gene as true/false (a genome file's spelling) whether the
        genome holds it as a bool or, in its canonical form, as 0/1."""
        return show(self.kind, value)


GLOBAL_BUILTIN = ("d_model", "block_size", "vocab_size", "mlp", "norm", "bias", "tied", "pos", "parallel")
RESERVED = ("name", "layers", "n_layers", "layer_template", "precision", "extra", "id", "genes")  # genome keys


@dataclass(frozen=True)
class GlobalGene:
    """One genome-wide gene. `search`: a space may list a grid (ints) or several choices for it; `token`: a
    field set may name it (`paper+<name>`), its value (a choice's index) broadcast to every layer's token."""

    name: str
    kind: str = "int"  # int | bool | choice
    lo: int = 1  # smallest valid int
    choices: tuple[str, ...] = ()  # the allowed values of a choice gene
    default: Any = REQUIRED
    search: bool = True
    token: bool = False
    card: str = ""  # the card's architecture line: a format ("vocab {}"); empty: "<name> <value>" off default only
    doc: str = ""

    @property
    def builtin(self) -> bool:
        return self.name in GLOBAL_BUILTIN

    def show(self, value: Any) -> str:
        return show(self.kind, value)

    def allowed(self) -> str:
        """What the gene accepts, in words (the error messages' `allowed:` part)."""
        if self.kind == "choice":
            return " | ".join(self.choices)
        return "true/false (or 0/1)" if self.kind == "bool" else f"an integer >= {self.lo}"


def show(kind: str, value: Any) -> str:
    """One spelling for a value of a gene of `kind`: true/false for a bool, else the value as written."""
    return ("true" if value else "false") if kind == "bool" and value in (0, 1) else str(value)


LAYER_GENES: dict[str, Gene] = {}
GLOBAL_GENES: dict[str, GlobalGene] = {}
ORIGIN: dict[str, str] = {}  # gene name -> the module whose import registered it


def register(gene: Gene | GlobalGene) -> Gene | GlobalGene:
    """Declare a per-layer gene (codec column order = registration order) or a global one. Re-registering the
    same declaration is a no-op; a different one under a taken name (of either kind) is an error."""
    if not isinstance(gene, (Gene, GlobalGene)):
        raise TypeError(f"register() takes a Gene or a GlobalGene, got {type(gene).__name__}")
    table, other = (LAYER_GENES, GLOBAL_GENES) if isinstance(gene, Gene) else (GLOBAL_GENES, LAYER_GENES)
    old = table.get(gene.name) or other.get(gene.name)
    if old is not None and old != gene:
        raise ValueError(f"gene {gene.name!r} is already registered as {old}")
    if gene.name in RESERVED or not gene.name.isidentifier():
        raise ValueError(f"gene name {gene.name!r} is invalid; allowed: an identifier other than {', '.join(RESERVED)}")
    kinds = ("int", "bool") if isinstance(gene, Gene) else ("int", "bool", "choice")
    if gene.kind not in kinds:
        raise ValueError(f"gene {gene.name!r}: kind = {gene.kind!r}; allowed: {' | '.join(kinds)}")
    if isinstance(gene, GlobalGene) and (gene.kind == "choice") != bool(gene.choices):
        raise ValueError(f"gene {gene.name!r}: choices = {gene.choices!r}; allowed: a non-empty tuple exactly when kind = choice")
    if not gene.builtin and gene.default is REQUIRED:
        raise ValueError(f"gene {gene.name!r} needs a default (the value genomes written before it take)")
    if old is None:  # the module that declared it: a run that uses the gene records that module (forge.shell.plugin_use)
        ORIGIN[gene.name] = str(sys._getframe(1).f_globals.get("__name__", ""))
    table[gene.name] = gene
    return gene


def unregister(name: str) -> None:
    """Remove a registered (not built-in) gene of either kind (tests that register a toy gene clean up with it)."""
    if name in BUILTIN or name in GLOBAL_BUILTIN:
        raise ValueError(f"gene {name!r} is built in and cannot be removed")
    LAYER_GENES.pop(name, None)
    GLOBAL_GENES.pop(name, None)
    ORIGIN.pop(name, None)


@contextmanager
def registered(gene: Gene | GlobalGene) -> Iterator[Gene | GlobalGene]:
    """`with registered(Gene(...)):` the gene exists inside the block only."""
    register(gene)
    try:
        yield gene
    finally:
        unregister(gene.name)


def extra_genes() -> tuple[Gene, ...]:
    """Registered genes beyond LayerGene's own fields (stored only when not at their default)."""
    return tuple(g for g in LAYER_GENES.values() if not g.builtin)


def grid_genes() -> tuple[Gene, ...]:
    """Genes a space searches over a grid, in codec order."""
    return tuple(g for g in LAYER_GENES.values() if g.grid)


def attention_genes() -> tuple[str, ...]:
    return tuple(g.name for g in LAYER_GENES.values() if g.attention)


def extra_globals() -> tuple[GlobalGene, ...]:
    """Registered global genes beyond the nine (stored only when not at their default)."""
    return tuple(g for g in GLOBAL_GENES.values() if not g.builtin)


def token_genes() -> tuple[str, ...]:
    """Genes a surrogate field set may append (`paper+<name>`): per-layer ones, then global ones."""
    return (tuple(g.name for g in LAYER_GENES.values() if g.token and not g.builtin)
            + tuple(g.name for g in GLOBAL_GENES.values() if g.token and not g.builtin))


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

for _gg in (
    GlobalGene("d_model", card="d_model {}", doc="residual width (in every surrogate token as d_model)"),
    GlobalGene("block_size", card="block {}", doc="context length T (in every surrogate token as T)"),
    GlobalGene("vocab_size", default=50257, search=False, card="vocab {}", doc="the tokenizer's vocabulary"),
    GlobalGene("mlp", kind="choice", choices=("gelu", "swiglu"), default="gelu", card="{}", doc="MLP kind"),
    GlobalGene("norm", kind="choice", choices=("layernorm", "rmsnorm"), default="rmsnorm", card="{}", doc="norm kind"),
    GlobalGene("bias", kind="choice", choices=("none", "qkv", "all"), default="none", doc="which linears have biases"),
    GlobalGene("tied", kind="bool", lo=0, default=True, doc="input and output embeddings share weights"),
    GlobalGene("pos", kind="choice", choices=("rope", "learned"), default="rope", card="{}", doc="positions"),
    GlobalGene("parallel", kind="bool", lo=0, default=False, doc="GPT-NeoX parallel attention + MLP residual"),
):
    register(_gg)

# named once here, from the declarations above: what every other module iterates instead of spelling gene names
SHAPE_GENES = tuple(n for n in BUILTIN if LAYER_GENES[n].grid)  # n_h, n_kv, d_qk, d_v, d_mlp: every space's grids
ATTENTION_SHAPE = tuple(n for n in SHAPE_GENES if LAYER_GENES[n].attention)  # the attention block's widths
MASKS = tuple(n for n in BUILTIN if not LAYER_GENES[n].grid)  # active, attn: the slot's on/off switches
