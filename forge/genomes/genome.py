"""IHA genomes: a frozen, typed description of one decoder-only language model.

A genome holds global fields (width, block size, vocabulary, MLP/norm/bias/position kinds) and up to
L_max per-layer genes. Each gene carries the Infinite-Head Attention shape (LLMForge §3.1): query heads
n_h, KV groups n_kv (n_kv | n_h), query/key dim d_qk and value dim d_v, all independent per layer, plus
the MLP width d_mlp, a layer mask (`active`) and an attention gate (`attn`; off = identity attention).

The id is a hash of the *canonical* form: globals plus the active layers in order, with the attention
fields of identity-attention layers blanked. Pruned slots and the meaningless attention fields of
identity layers therefore never change the id, so two genomes share an id exactly when they build the
same network. The id is the cache key everywhere (surrogate, backends, label store, search archive).

Which genes exist, per layer and genome-wide, is the registry's to say (forge.genomes.genes): validation, the
canonical form and the files iterate over it. A gene registered after the original ones (e.g. `window`, or a
global gene beyond the nine `GLOBAL_BUILTIN`) is stored only off its default, so genomes, label stores and
checkpoints written before it load unchanged and keep their ids. A registered global gene reads as an
attribute (`genome.n_experts`) and is built with `Genome.build(..., n_experts=4)`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Literal

import yaml

from forge.genomes.genes import GLOBAL_GENES, GLOBAL_BUILTIN, LAYER_GENES, BUILTIN
from forge.genomes.genome_checks import GENE_HINT, GenomeError, check_extra, check_gene, check_globals, check_int, fail
from forge.genomes.precision import PrecisionError, PrecisionGenes


@dataclass(frozen=True)
class LayerGene:
    """One layer slot. `active=False` prunes it; `attn=False` makes its attention the identity.

    The seven fields are the original genes; a gene registered later (forge.genomes.genes, e.g. `window`) is read
    as an attribute too and stored in `extra` only where it differs from its default."""

    n_h: int
    n_kv: int
    d_qk: int
    d_v: int
    d_mlp: int
    active: bool = True
    attn: bool = True
    extra: tuple[tuple[str, int], ...] = ()  # (name, value) of registered genes off their default, sorted

    def __post_init__(self) -> None:
        for gene in LAYER_GENES.values():
            if gene.builtin:
                object.__setattr__(self, gene.name, check_gene(gene, getattr(self, gene.name)))
        object.__setattr__(self, "extra", check_extra(self.extra))
        for gene in LAYER_GENES.values():
            if gene.divides and self.get(gene.divides) % self.get(gene.name):
                raise fail(f"layer.{gene.name}", self.get(gene.name), f"a divisor of {gene.divides}={self.get(gene.divides)}")

    @classmethod
    def build(cls, **values: Any) -> "LayerGene":
        """From every gene by name (registered extras included), validated."""
        extra = {k: values.pop(k) for k in list(values) if k not in BUILTIN}
        return cls(**values, extra=tuple(extra.items()))

    @classmethod
    def trusted(cls, values: dict[str, Any], extra: tuple = ()) -> "LayerGene":
        """Without validation: for values the space's codec produced (on-grid, repaired) only."""
        g = object.__new__(cls)
        g.__dict__.update(values)
        g.__dict__["extra"] = extra
        return g

    def __getattr__(self, name: str) -> Any:  # registered genes beyond the seven fields
        gene = LAYER_GENES.get(name)
        if gene is None or name in BUILTIN or name == "extra":
            raise AttributeError(name)
        return dict(self.__dict__.get("extra", ())).get(name, gene.default)

    def get(self, name: str) -> Any:
        return getattr(self, name)

    def replace(self, **values: Any) -> "LayerGene":
        """A copy with some genes (any registered name) changed."""
        return LayerGene.build(**{**self.to_dict(), **values})

    def to_dict(self) -> dict[str, Any]:
        """Full form: the seven genes always, a registered gene only off its default (cached like `canonical`)."""
        d = self.__dict__.get("_full")
        if d is None:
            d = {k: (bool(v) if k in ("active", "attn") else int(v)) for k in BUILTIN for v in (getattr(self, k),)}
            d.update(self.extra)
            self.__dict__["_full"] = d
        return dict(d)

    def canonical(self) -> dict[str, int]:
        """Cached: layers are immutable and the decoder shares equal ones between genomes."""
        return dict(self._canon())

    def canon_json(self) -> str:
        """The canonical dict as the id's JSON text (cached: the id joins these instead of re-encoding)."""
        t = self.__dict__.get("_cjson")
        if t is None:
            t = self.__dict__["_cjson"] = json.dumps(self._canon(), sort_keys=True, separators=(",", ":"))
        return t

    def _canon(self) -> dict[str, int]:
        """The cached canonical dict itself (callers must not change it)."""
        d = self.__dict__.get("_canonical")
        if d is None:
            d = {}
            for gene in LAYER_GENES.values():
                v = 0 if gene.attention and not self.attn else int(self.get(gene.name))  # identity: no such field
                if gene.builtin or v != gene.default:
                    d[gene.name] = v
            self.__dict__["_canonical"] = d
        return d


@dataclass(frozen=True)
class Genome:
    """A whole architecture. Globals are shared; `layers` has up to L_max slots (pruned ones included)."""

    d_model: int
    block_size: int
    layers: tuple[LayerGene, ...]
    vocab_size: int = 50257
    mlp: Literal["gelu", "swiglu"] = "gelu"
    norm: Literal["layernorm", "rmsnorm"] = "rmsnorm"
    bias: Literal["none", "qkv", "all"] = "none"
    tied: bool = True
    pos: Literal["rope", "learned"] = "rope"
    parallel: bool = False  # GPT-NeoX style parallel attention + MLP residual
    name: str = field(default="", compare=False)
    precision: PrecisionGenes | None = None  # per-model (W, A, KV) formats; None = the workload's
    extra: tuple[tuple[str, Any], ...] = ()  # (name, value) of registered global genes off their default, sorted

    def __post_init__(self) -> None:
        for gene in GLOBAL_GENES.values():
            if gene.builtin:
                object.__setattr__(self, gene.name, check_gene(gene, getattr(self, gene.name), gene.name))
        object.__setattr__(self, "extra", check_globals(self.extra))
        layers = tuple(self.layers)
        if not layers:
            raise fail("layers", [], "a non-empty list of layers")
        for i, g in enumerate(layers):
            if not isinstance(g, LayerGene):
                raise fail(f"layers[{i}]", g, "a LayerGene")
        if not any(g.active for g in layers):
            raise fail("layers[*].active", False, "at least one active layer")
        object.__setattr__(self, "layers", layers)
        if self.precision is not None:
            try:
                object.__setattr__(self, "precision", PrecisionGenes.from_any(self.precision))
            except PrecisionError as e:
                raise GenomeError(str(e)) from None

    @classmethod
    def build(cls, **values: Any) -> "Genome":
        """From every field by name (registered global genes beyond the nine included), validated."""
        extra = {k: values.pop(k) for k in list(values) if k in GLOBAL_GENES and k not in GLOBAL_BUILTIN}
        return cls(**values, extra=tuple(extra.items()))

    def __getattr__(self, name: str) -> Any:  # registered global genes beyond the nine fields
        gene = GLOBAL_GENES.get(name)
        if gene is None or gene.builtin:
            raise AttributeError(name)
        return dict(self.__dict__.get("extra", ())).get(name, gene.default)

    def get(self, name: str) -> Any:
        """A global gene's value by name (its default when the genome predates it)."""
        return getattr(self, name)

    def replace(self, **values: Any) -> "Genome":
        """A copy with some fields or global genes (any registered name) changed, validated."""
        return Genome.build(**{**{f: getattr(self, f) for f in (*GLOBAL_BUILTIN, "layers", "name", "precision")},
                               **dict(self.extra), **values})

    # ----------------------------------------------------------------- views
    @property
    def active_layers(self) -> tuple[LayerGene, ...]:
        return tuple(g for g in self.layers if g.active)

    @property
    def n_active(self) -> int:
        return sum(g.active for g in self.layers)

    def shown_genes(self) -> tuple[str, ...]:
        """Per-layer genes worth a column in a table: the five shape genes, plus any registered gene that
        some active layer sets off its default (so tables of older genomes look exactly as before)."""
        extra = [g.name for g in LAYER_GENES.values() if g.grid and not g.builtin
                 and any(lay.get(g.name) != g.default for lay in self.active_layers)]
        return tuple(g.name for g in LAYER_GENES.values() if g.grid and g.builtin) + tuple(extra)

    def globals_dict(self) -> dict[str, Any]:
        """Stored form of the global genes: the nine always, a registered one only off its default."""
        return {**{k: getattr(self, k) for k in GLOBAL_BUILTIN}, **dict(self.extra)}

    def global_values(self) -> dict[str, Any]:
        """Every registered global gene's value, defaults included, in registry order (for listings)."""
        return {k: self.get(k) for k in GLOBAL_GENES}

    def describe(self) -> str:
        """The architecture line of a card: each gene's `card` format, a registered gene off its default."""
        parts = [g.card.format(g.show(self.get(g.name))) if g.card else f"{g.name} {g.show(self.get(g.name))}"
                 for g in GLOBAL_GENES.values() if g.card or (not g.builtin and self.get(g.name) != g.default)]
        return ", ".join(parts)

    def canonical(self) -> dict[str, Any]:
        """Functional form: globals + active layers only (identity-attention fields blanked).

        The precision key exists only when set, so a genome without precision genes hashes as before."""
        d = {**self.globals_dict(), "layers": [g._canon() for g in self.active_layers]}
        if self.precision is not None:
            d["precision"] = self.precision.to_dict()
        return d

    @property
    def id(self) -> str:
        """Cached on first use (the genome is frozen; `replace` builds a new object)."""
        cached = self.__dict__.get("_id")
        if cached is None:
            head, tail = self._id_frame()
            blob = head + ",".join(g.canon_json() for g in self.layers if g.active) + tail
            cached = self.__dict__["_id"] = hashlib.sha256(blob.encode()).hexdigest()[:16]
        return cached

    def _id_frame(self) -> tuple[str, str]:
        """The id's JSON text around the layer list: `json.dumps(canonical(), sort_keys=True)` with the layers
        cut out, so the id is that same text (ids never change) built from cached pieces."""
        frame = self.__dict__.get("_frame")
        if frame is None:
            d = {**self.globals_dict(), "layers": []}
            if self.precision is not None:
                d["precision"] = self.precision.to_dict()
            head, tail = json.dumps(d, sort_keys=True, separators=(",", ":")).split('"layers":[]')
            frame = self.__dict__["_frame"] = (head + '"layers":[', "]" + tail)
        return frame

    # ----------------------------------------------------------- round-trip
    def to_dict(self) -> dict[str, Any]:
        """Full form (pruned slots kept), for YAML/JSON files and search state."""
        d: dict[str, Any] = {"name": self.name} if self.name else {}
        d.update(self.globals_dict())
        d["layers"] = [g.to_dict() for g in self.layers]
        if self.precision is not None:
            d["precision"] = self.precision.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Genome":
        return genome_from_dict(d)

    def with_layers(self, layers: Iterable[LayerGene]) -> "Genome":
        return replace(self, layers=tuple(layers))

    def trusted_copy(self, layers: tuple[LayerGene, ...], precision: Any = None) -> "Genome":
        """These globals with other layers, without validation (the space's decoder: values it produced)."""
        same = precision == self.precision
        if same:
            self._id_frame()  # once per template, shared by its copies
        g = object.__new__(Genome)
        g.__dict__.update(self.__dict__)
        g.__dict__.pop("_id", None)
        if not same:
            g.__dict__.pop("_frame", None)
        g.__dict__["layers"], g.__dict__["precision"] = layers, precision
        return g

    def with_precision(self, precision: Any) -> "Genome":
        """The same network at other formats (None strips them: what the surrogate sees)."""
        return replace(self, precision=precision)


GLOBAL_FIELDS = GLOBAL_BUILTIN  # the nine global dataclass fields (the registry: forge.genomes.genes.GLOBAL_GENES)


def _layer_from_dict(i: int, d: Any, template: dict[str, Any] | None = None) -> LayerGene:
    """A layer mapping; a registered gene it lacks takes its default (files older than the gene load)."""
    names = tuple(LAYER_GENES)
    if not isinstance(d, dict):
        raise fail(f"layers[{i}]", d, "a mapping with keys " + ", ".join(names))
    d = {**(template or {}), **d}
    unknown = set(d) - set(names)
    if unknown:
        raise fail(f"layers[{i}].{sorted(unknown)[0]}", d[sorted(unknown)[0]], "keys " + ", ".join(names) + GENE_HINT)
    required = [g.name for g in LAYER_GENES.values() if g.default is None]
    missing = [k for k in required if k not in d]
    if missing:
        raise GenomeError(f"layers[{i}] is missing field(s) {missing}; required: {', '.join(required)}")
    try:
        return LayerGene.build(**d)
    except GenomeError as e:  # re-label with the layer index so the user finds it
        raise GenomeError(str(e).replace("layer.", f"layers[{i}].", 1)) from None


def genome_from_dict(d: Any) -> Genome:
    """Build a genome from the full form; `n_layers` + `layer_template` is accepted as a shorthand."""
    if not isinstance(d, dict):
        raise GenomeError(f"genome = {type(d).__name__} is invalid; allowed: a mapping with d_model, block_size, layers")
    d = dict(d)
    allowed = set(GLOBAL_GENES) | {"name", "layers", "n_layers", "layer_template", "precision"}
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise fail(unknown[0], d[unknown[0]], "keys " + ", ".join(sorted(allowed)) + GENE_HINT)
    for k in (g.name for g in GLOBAL_GENES.values() if g.default is None):
        if k not in d:
            raise GenomeError(f"genome is missing field {k!r}")
    if "layers" in d:
        layers = d.pop("layers")
        if not isinstance(layers, list):
            raise fail("layers", layers, "a list of layer mappings")
        genes = [_layer_from_dict(i, x) for i, x in enumerate(layers)]
    elif "layer_template" in d:
        n = check_int("n_layers", d.pop("n_layers", None))
        tmpl = d.pop("layer_template")
        genes = [_layer_from_dict(i, {}, tmpl) for i in range(n)]
    else:
        raise GenomeError("genome is missing field 'layers' (or 'n_layers' + 'layer_template')")
    d.pop("n_layers", None)
    return Genome.build(layers=tuple(genes), **d)


def save_genome(genome: Genome, path: str | Path) -> None:
    path = Path(path)
    text = genome.to_json() if path.suffix == ".json" else genome.to_yaml()
    from forge.disk.io import atomic_write_text

    atomic_write_text(path, text)
