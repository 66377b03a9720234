"""IHA genomes: a frozen, typed description of one decoder-only language model.

A genome holds global fields (width, block size, vocabulary, MLP/norm/bias/position kinds) and up to
L_max per-layer genes. Each gene carries the Infinite-Head Attention shape (LLMForge §3.1): query heads
n_h, KV groups n_kv (n_kv | n_h), query/key dim d_qk and value dim d_v, all independent per layer, plus
the MLP width d_mlp, a layer mask (`active`) and an attention gate (`attn`; off = identity attention).

The id is a hash of the *canonical* form: globals plus the active layers in order, with the attention
fields of identity-attention layers blanked. Pruned slots and the meaningless attention fields of
identity layers therefore never change the id, so two genomes share an id exactly when they build the
same network. The id is the cache key everywhere (surrogate, backends, label store, search archive).
"""
from __future__ import annotations

import hashlib
import json
import operator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Literal

import yaml

from forge.errors import ForgeError
from forge.precision import PrecisionError, PrecisionGenes

MLP_KINDS = ("gelu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
BIAS_KINDS = ("none", "qkv", "all")
POS_KINDS = ("rope", "learned")
LAYER_FIELDS = ("active", "attn", "n_h", "n_kv", "d_qk", "d_v", "d_mlp")
ATTN_FIELDS = ("n_h", "n_kv", "d_qk", "d_v")


class GenomeError(ForgeError):
    """A genome field holds a value outside its domain; the message names field, value and domain."""


def _fail(where: str, value: Any, allowed: str) -> GenomeError:
    return GenomeError(f"{where} = {value!r} is invalid; allowed: {allowed}")


def _check_int(where: str, value: Any, lo: int = 1) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        if isinstance(value, bool):
            raise TypeError
        iv = operator.index(value)
    except TypeError:
        raise _fail(where, value, f"an integer >= {lo}") from None
    if iv < lo:
        raise _fail(where, iv, f"an integer >= {lo}")
    return iv


def _check_bool(where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise _fail(where, value, "true/false (or 0/1)")


def _check_choice(where: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise _fail(where, value, " | ".join(choices))
    return value


@dataclass(frozen=True)
class LayerGene:
    """One layer slot. `active=False` prunes it; `attn=False` makes its attention the identity."""

    n_h: int
    n_kv: int
    d_qk: int
    d_v: int
    d_mlp: int
    active: bool = True
    attn: bool = True

    def __post_init__(self) -> None:
        for name in ("n_h", "n_kv", "d_qk", "d_v", "d_mlp"):
            object.__setattr__(self, name, _check_int(f"layer.{name}", getattr(self, name)))
        object.__setattr__(self, "active", _check_bool("layer.active", self.active))
        object.__setattr__(self, "attn", _check_bool("layer.attn", self.attn))
        if self.n_h % self.n_kv:
            raise _fail("layer.n_kv", self.n_kv, f"a divisor of n_h={self.n_h}")

    def canonical(self) -> dict[str, int]:
        d = {k: int(getattr(self, k)) for k in LAYER_FIELDS}
        if not self.attn:  # identity attention: its shape fields do not exist in the network
            for k in ATTN_FIELDS:
                d[k] = 0
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

    def __post_init__(self) -> None:
        for k in ("d_model", "block_size", "vocab_size"):
            object.__setattr__(self, k, _check_int(k, getattr(self, k)))
        _check_choice("mlp", self.mlp, MLP_KINDS)
        _check_choice("norm", self.norm, NORM_KINDS)
        _check_choice("bias", self.bias, BIAS_KINDS)
        _check_choice("pos", self.pos, POS_KINDS)
        object.__setattr__(self, "tied", _check_bool("tied", self.tied))
        object.__setattr__(self, "parallel", _check_bool("parallel", self.parallel))
        layers = tuple(self.layers)
        if not layers:
            raise _fail("layers", [], "a non-empty list of layers")
        for i, g in enumerate(layers):
            if not isinstance(g, LayerGene):
                raise _fail(f"layers[{i}]", g, "a LayerGene")
        if not any(g.active for g in layers):
            raise _fail("layers[*].active", False, "at least one active layer")
        object.__setattr__(self, "layers", layers)
        if self.precision is not None:
            try:
                object.__setattr__(self, "precision", PrecisionGenes.from_any(self.precision))
            except PrecisionError as e:
                raise GenomeError(str(e)) from None

    # ----------------------------------------------------------------- views
    @property
    def active_layers(self) -> tuple[LayerGene, ...]:
        return tuple(g for g in self.layers if g.active)

    @property
    def n_active(self) -> int:
        return sum(g.active for g in self.layers)

    def globals_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in GLOBAL_FIELDS}

    def canonical(self) -> dict[str, Any]:
        """Functional form: globals + active layers only (identity-attention fields blanked).

        The precision key exists only when set, so a genome without precision genes hashes as before."""
        d = {**self.globals_dict(), "layers": [g.canonical() for g in self.active_layers]}
        if self.precision is not None:
            d["precision"] = self.precision.to_dict()
        return d

    @property
    def id(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # ----------------------------------------------------------- round-trip
    def to_dict(self) -> dict[str, Any]:
        """Full form (pruned slots kept), for YAML/JSON files and search state."""
        d: dict[str, Any] = {"name": self.name} if self.name else {}
        d.update(self.globals_dict())
        d["layers"] = [{k: (bool(v) if k in ("active", "attn") else int(v))
                        for k, v in asdict(g).items()} for g in self.layers]
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

    def with_precision(self, precision: Any) -> "Genome":
        """The same network at other formats (None strips them: what the surrogate sees)."""
        return replace(self, precision=precision)


GLOBAL_FIELDS = ("d_model", "block_size", "vocab_size", "mlp", "norm", "bias", "tied", "pos", "parallel")


def _layer_from_dict(i: int, d: Any, template: dict[str, Any] | None = None) -> LayerGene:
    if not isinstance(d, dict):
        raise _fail(f"layers[{i}]", d, "a mapping with keys " + ", ".join(LAYER_FIELDS))
    d = {**(template or {}), **d}
    unknown = set(d) - set(LAYER_FIELDS)
    if unknown:
        raise _fail(f"layers[{i}].{sorted(unknown)[0]}", d[sorted(unknown)[0]], "keys " + ", ".join(LAYER_FIELDS))
    missing = [k for k in ("n_h", "n_kv", "d_qk", "d_v", "d_mlp") if k not in d]
    if missing:
        raise GenomeError(f"layers[{i}] is missing field(s) {missing}; required: n_h, n_kv, d_qk, d_v, d_mlp")
    try:
        return LayerGene(**d)
    except GenomeError as e:  # re-label with the layer index so the user finds it
        raise GenomeError(str(e).replace("layer.", f"layers[{i}].", 1)) from None


def genome_from_dict(d: Any) -> Genome:
    """Build a genome from the full form; `n_layers` + `layer_template` is accepted as a shorthand."""
    if not isinstance(d, dict):
        raise GenomeError(f"genome = {type(d).__name__} is invalid; allowed: a mapping with d_model, block_size, layers")
    d = dict(d)
    allowed = set(GLOBAL_FIELDS) | {"name", "layers", "n_layers", "layer_template", "precision"}
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise _fail(unknown[0], d[unknown[0]], "keys " + ", ".join(sorted(allowed)))
    for k in ("d_model", "block_size"):
        if k not in d:
            raise GenomeError(f"genome is missing field {k!r}")
    if "layers" in d:
        layers = d.pop("layers")
        if not isinstance(layers, list):
            raise _fail("layers", layers, "a list of layer mappings")
        genes = [_layer_from_dict(i, x) for i, x in enumerate(layers)]
    elif "layer_template" in d:
        n = _check_int("n_layers", d.pop("n_layers", None))
        tmpl = d.pop("layer_template")
        genes = [_layer_from_dict(i, {}, tmpl) for i in range(n)]
    else:
        raise GenomeError("genome is missing field 'layers' (or 'n_layers' + 'layer_template')")
    d.pop("n_layers", None)
    return Genome(layers=tuple(genes), **d)


def save_genome(genome: Genome, path: str | Path) -> None:
    path = Path(path)
    text = genome.to_json() if path.suffix == ".json" else genome.to_yaml()
    from forge.io import atomic_write_text

    atomic_write_text(path, text)
