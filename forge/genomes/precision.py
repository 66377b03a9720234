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
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from forge.errors import ForgeError

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


class PrecisionError(ForgeError):
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
# PLENA Table VI: WikiText-2 perplexity of LLaMA-2 7B/13B/70B and LLaMA-3 8B/70B at FP16 and at the
# cumulative settings W4A16KV16 → W4A4KV16 → W4A4KV4 (None = not reported; * = reproduced by the authors).
# Columns: llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b.
TABLE_VI_BASE = (5.47, 4.83, 3.31, 6.13, 2.85)
TABLE_VI = {  # family: rows W4, W4A4, W4A4KV4, one value per model
    "mxint": ((5.59, 4.98, 3.40, 6.45, 3.25), (5.82, 5.14, 3.56, 6.99, 3.87), (5.87, 5.18, 3.58, 7.17, 4.09)),  # PLENA
    "mxfp": ((7.09, 5.91, None, 11.95, None), (15.89, 10.30, None, 91.71, None), (67.35, 27.44, None, 256.22, None)),
    "int": ((5.60, 5.00, 3.41, 6.52, 3.53), (6.02, 5.36, 3.78, 8.00, 6.33), (6.10, 5.40, 3.79, 8.16, 6.66)),  # QuaRot
}


@lru_cache(maxsize=1)
def paper_deltas() -> dict[str, dict[str, float]]:
    """Δ nats per tensor at 4 bits, per family: a non-negative least-squares fit (scipy nnls) of
    ln(ppl / ppl_FP16) = Σ over the quantized tensors of Δ_tensor, over every reported (model, setting)
    of Table VI. Plain floats have no 4-bit point: fp8 borrows the mxfp fit (both are minifloats)."""
    from scipy.optimize import nnls

    out = {}
    for fam, rows in TABLE_VI.items():
        A, y = [], []
        for k, row in enumerate(rows):  # setting k quantizes the first k + 1 tensors (W, then A, then KV)
            for ppl, base in zip(row, TABLE_VI_BASE):
                if ppl is not None:
                    A.append([1.0 if j <= k else 0.0 for j in range(3)])
                    y.append(math.log(ppl / base))
        out[fam] = dict(zip(TENSORS, map(float, nnls(np.array(A), np.array(y))[0])))
    out["float"] = out["mxfp"]
    return out


@dataclass(frozen=True)
class QuantPenalty:
    """Loss increase of a genome's (W, A, KV) formats: Σ_tensor Δ_family,tensor(4 bit) · 4^(4 − bits).

    Why this shape: a b-bit quantizer's noise power falls as 2^(−2b), and a small perturbation raises the
    loss in proportion to its power (second order), so 8-bit costs 1/256 of the 4-bit step and 16-bit
    ~nothing. Only 4-bit points are published (`paper_deltas`, fitted on Table VI's 0.5–70 B LLaMAs):
    they carry over to our small models only as a first guess. `table` replaces the model with measured deltas,
    {format: {weights|acts|kv: Δ nats}}; formats missing from it fall back to the model. fp16/bf16/fp32
    are the reference (0). `scale` multiplies everything (0 turns the penalty off).
    """

    deltas: Mapping[str, Mapping[str, float]] | None = None  # None = paper_deltas()
    table: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    scale: float = 1.0

    def tensor(self, fmt: str, tensor: str) -> float:
        f = parse_format(fmt)
        if f.name in self.table and tensor in self.table[f.name]:
            return float(self.table[f.name][tensor]) * self.scale
        if f.family == "float" and f.bits >= 16:
            return 0.0
        deltas = self.deltas if self.deltas is not None else paper_deltas()
        return float(deltas[f.family][tensor]) * 4.0 ** (4 - f.bits) * self.scale

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
            from forge.disk.io import load_yaml, read_text

            table = load_yaml(read_text(table, "quantization table"), table) or {}
        table = {parse_format(k).name: dict(v) for k, v in dict(table).items()}
        return cls(table=table, scale=float(d.get("scale", 1.0)))
