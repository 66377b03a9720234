"""Numeric formats of weights, activations and the KV cache, and the loss penalty of quantizing them.

A format is a name from `FORMATS`: plain floats (fp32, fp16, bf16, fp8 = E4M3), plain integers (int8,
int4: per-channel scales are a few bytes per row, ignored) and the OCP microscaling formats MXINT and
MXFP (PLENA, paper 004 §II-A and §IV-A: τ = (datatype, bits, block B), one shared E8M0 scale per block).
A block size other than the OCP default 32 is written `mxint4_b16`.

Bytes per element COUNT the shared scale: MXINT4 with B = 32 is 4 + 8/32 = 4.25 bits = 0.53125 bytes.
The PLENA paper does not: its Table XI gives the 4-bit KV cache as exactly a quarter of the 16-bit one
(239.26 → 59.81 GB), i.e. 4.00 bits per element; `int4` reproduces it, `mxint4` is 6.25 % larger.

`PrecisionGenes` is the per-genome (W, A, KV) triple carried by `Genome.precision`; `QuantPenalty` is the
search's separate, replaceable model of the loss cost of a triple (see its docstring for the fit).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

SCALE_BITS = 8  # E8M0 shared scale (OCP MX v1.0; PLENA Fig. 3: power-of-two scale per block)
MX_BLOCK = 32  # OCP MX default block size
_BASE = {  # name: (family, element bits)
    "fp32": ("float", 32), "fp16": ("float", 16), "bf16": ("float", 16), "fp8": ("float", 8),
    "int8": ("int", 8), "int4": ("int", 4),
    "mxint8": ("mxint", 8), "mxint4": ("mxint", 4),
    "mxfp8": ("mxfp", 8), "mxfp6": ("mxfp", 6), "mxfp4": ("mxfp", 4),
}
FORMATS = tuple(_BASE)
TENSORS = ("weights", "acts", "kv")
_ALIASES = {"w": "weights", "weight": "weights", "a": "acts", "act": "acts", "activations": "acts",
            "kv_cache": "kv"}


class PrecisionError(ValueError):
    """An unknown format or a malformed precision triple; the one-line message lists what is allowed."""


def _allowed() -> str:
    return ", ".join(FORMATS) + " (MX formats also as <name>_b<block>, e.g. mxint4_b16)"


@dataclass(frozen=True)
class Format:
    """One numeric format; `bytes` is the storage per element including any shared block scale."""

    name: str
    family: str
    bits: int
    block: int = 0

    @property
    def scale_bits(self) -> float:
        return SCALE_BITS / self.block if self.block else 0.0

    @property
    def bits_per_element(self) -> float:
        return self.bits + self.scale_bits

    @property
    def bytes(self) -> float:
        return self.bits_per_element / 8.0


def parse_format(name: Any) -> Format:
    """'mxint4' → Format(mxint, 4 bits, block 32); a bad name raises a one-line PrecisionError."""
    m = re.fullmatch(r"([a-z0-9]+?)(?:_b(\d+))?", str(name).strip().lower())
    base = m.group(1) if m else None
    if base not in _BASE:
        raise PrecisionError(f"precision format {name!r} is unknown; allowed: {_allowed()}")
    family, bits = _BASE[base]
    block = int(m.group(2)) if m.group(2) else (MX_BLOCK if family.startswith("mx") else 0)
    if m.group(2) and (not family.startswith("mx") or block < 1):
        raise PrecisionError(f"precision format {name!r}: a block size applies to MX formats only (block >= 1); "
                             f"allowed: {_allowed()}")
    canon = base if block in (0, MX_BLOCK) else f"{base}_b{block}"
    return Format(canon, family, bits, block)


@dataclass(frozen=True)
class PrecisionGenes:
    """Per-genome formats of weights, activations and the KV cache (names, normalized on construction)."""

    weights: str = "bf16"
    acts: str = "bf16"
    kv: str = "bf16"

    def __post_init__(self) -> None:
        for t in TENSORS:
            object.__setattr__(self, t, parse_format(getattr(self, t)).name)

    def format(self, tensor: str) -> Format:
        return parse_format(getattr(self, tensor))

    def bytes(self) -> tuple[float, float, float]:
        """(weight, activation, KV) bytes per element, shared scales included."""
        return tuple(self.format(t).bytes for t in TENSORS)  # type: ignore[return-value]

    def to_dict(self) -> dict[str, str]:
        return {t: getattr(self, t) for t in TENSORS}

    def __str__(self) -> str:
        return "/".join(getattr(self, t) for t in TENSORS)

    @classmethod
    def from_any(cls, spec: Any) -> "PrecisionGenes":
        """A mapping {weights, acts, kv} (or w/a/kv), a 3-list, 'w/a/kv' text, or a PrecisionGenes."""
        if isinstance(spec, PrecisionGenes):
            return spec
        if isinstance(spec, str) and spec.count("/") == 2:
            spec = spec.split("/")
        if isinstance(spec, (list, tuple)) and len(spec) == 3:
            return cls(*spec)
        if isinstance(spec, Mapping):
            d = {_ALIASES.get(str(k), str(k)): v for k, v in spec.items()}
            bad = sorted(set(d) - set(TENSORS))
            if not bad and set(d) == set(TENSORS):
                return cls(**d)
        raise PrecisionError(f"precision = {spec!r} is invalid; allowed: a mapping with keys weights, acts, kv "
                             f"(or 'w/a/kv') whose values are formats: {_allowed()}")


# ---------------------------------------------------------------------------------------- the penalty
# Δ cross-entropy (nats) = ln(ppl_quantized / ppl_reference) at 4 bits, per family and tensor, from the
# WikiText-2 perplexities of LLaMA-3-8B in PLENA Table VI (baseline FP16 6.13). Each tensor's delta is
# the step its row adds on top of the previous setting (W4A16KV16 → W4A4KV16 → W4A4KV4):
#   mxint (PLENA ours): 6.45, 6.99, 7.17   mxfp (PLENA MXFP): 11.95, 91.71, 256.22
#   int (QuaRot, per-channel INT4 with rotation; * = reproduced by the authors): 6.52, 8.00, 8.16
# The plain-float family has no 4-bit point; fp8 borrows the mxfp row (both are minifloats).
PAPER_DELTA_4BIT = {
    "mxint": {"weights": math.log(6.45 / 6.13), "acts": math.log(6.99 / 6.45), "kv": math.log(7.17 / 6.99)},
    "mxfp": {"weights": math.log(11.95 / 6.13), "acts": math.log(91.71 / 11.95), "kv": math.log(256.22 / 91.71)},
    "int": {"weights": math.log(6.52 / 6.13), "acts": math.log(8.00 / 6.52), "kv": math.log(8.16 / 8.00)},
}
PAPER_DELTA_4BIT["float"] = PAPER_DELTA_4BIT["mxfp"]


@dataclass(frozen=True)
class QuantPenalty:
    """Loss increase of a genome's (W, A, KV) formats: Σ_tensor Δ_family,tensor(4 bit) · 4^(4 − bits).

    Why this shape: a b-bit quantizer's noise power falls as 2^(−2b), and a small perturbation raises the
    loss in proportion to its power (second order), so 8-bit costs 1/256 of the 4-bit step and 16-bit
    ~nothing. Only the 4-bit points are measured (PLENA Table VI, LLaMA-3-8B): the ratio carries over
    to our small models only as a first guess. `table` replaces the model with measured deltas,
    {format: {weights|acts|kv: Δ nats}}; formats missing from it fall back to the model. fp16/bf16/fp32
    are the reference (0). `scale` multiplies everything (0 turns the penalty off).
    """

    deltas: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: PAPER_DELTA_4BIT)
    table: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    scale: float = 1.0

    def tensor(self, fmt: str, tensor: str) -> float:
        f = parse_format(fmt)
        if f.name in self.table and tensor in self.table[f.name]:
            return float(self.table[f.name][tensor]) * self.scale
        if f.family == "float" and f.bits >= 16:
            return 0.0
        return float(self.deltas[f.family][tensor]) * 4.0 ** (4 - f.bits) * self.scale

    def __call__(self, genes: PrecisionGenes | None) -> float:
        if genes is None:
            return 0.0
        return sum(self.tensor(getattr(genes, t), t) for t in TENSORS)

    @classmethod
    def from_config(cls, cfg: Any) -> "QuantPenalty":
        """None → the paper model; a mapping {scale, table} (table: a mapping or a YAML file path)."""
        d = dict(cfg or {})
        bad = sorted(set(d) - {"scale", "table"})
        if bad:
            raise PrecisionError(f"quant_penalty.{bad[0]} is unknown; allowed: scale, table")
        table = d.get("table") or {}
        if isinstance(table, str):
            import yaml
            from pathlib import Path

            table = yaml.safe_load(Path(table).read_text()) or {}
        table = {parse_format(k).name: dict(v) for k, v in dict(table).items()}
        return cls(table=table, scale=float(d.get("scale", 1.0)))
