"""The flattened systolic array of PLENA (paper 004 §III-B, Fig. 5-6): shape, constraints, area, tile cycles.

A matrix unit of MLEN·BLEN MACs is MLEN/BLEN square BLEN×BLEN sub-arrays plus a result adder tree.
Output-stationary: one tile (BLEN, MLEN)×(MLEN, BLEN) streams its MLEN-long reduction through the
sub-arrays (each takes a BLEN slice) in BLEN cycles, then the adder tree sums the MLEN/BLEN partial
(BLEN×BLEN) outputs (one M_SUM, pipelined). So a GEMM (M×K)·(K×N) takes
    ⌈M/BLEN⌉·⌈K/MLEN⌉·⌈N/BLEN⌉ tiles × BLEN cycles   (+ one pipeline fill, 2·BLEN + log2(MLEN/BLEN)).
FlashAttention maps per head: the array splits into MLEN/HLEN cores of HLEN·BLEN MACs, each running
(BLEN, HLEN)×(HLEN, BLEN) tiles of one (batch, KV-group) instance; scores never leave the chip.
A square array of the same MACs is the special case BLEN = MLEN (= HLEN): one sub-array, no tree.

Constraints (Table III): MLEN·KV_WIDTH within the memory bandwidth, MLEN mod BLEN = 0, MLEN ≥ HLEN ≥ BLEN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from backends.interface import BackendError

# Area at the paper's node (7 nm OpenROAD predictive PDK, 1 GHz; §V-A c). The only published area of the
# matrix unit is Table XIII: 4096 MACs as 4×1024 → 0.237 mm² compute area at 34.49 TOPS/mm², i.e.
# 2·4096·1 GHz / 34.49 = 0.23752 mm². It holds 4096 PEs plus (MLEN/BLEN − 1)·BLEN² = 4080 tree adders.
# Assumption: one INT adder of the tree costs a quarter of an MX PE (multiplier + accumulator), so
# 0.23752 mm² = PE · (4096 + 0.25 · 4080) → PE = 46.43 µm². A square array has no tree (Fig. 12: the
# flattened array is "slightly" larger at equal MACs).
TOPS_PER_MM2_4x1024 = 34.49
ADDER_PER_PE = 0.25
PE_UM2 = 2 * 4096 * 1e-3 / TOPS_PER_MM2_4x1024 * 1e6 / (4096 + ADDER_PER_PE * 4080)
ADDER_UM2 = ADDER_PER_PE * PE_UM2


@dataclass(frozen=True)
class Shape:
    """BLEN (block, sub-array side), MLEN (matrix-unit width), VLEN (vector lanes), HLEN (head slice)."""

    blen: int
    mlen: int
    vlen: int
    hlen: int

    def __post_init__(self) -> None:
        for k in ("blen", "mlen", "vlen", "hlen"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise BackendError(f"backend.shape.{k} = {v!r} is invalid; allowed: a positive integer")

    @property
    def macs(self) -> int:
        return self.mlen * self.blen

    @property
    def heads(self) -> int:
        """Attention instances the array runs at once (MLEN/HLEN cores)."""
        return max(self.mlen // self.hlen, 1)

    def label(self) -> str:
        return f"BLEN={self.blen} MLEN={self.mlen} VLEN={self.vlen} HLEN={self.hlen}"

    def to_dict(self) -> dict[str, int]:
        return {"blen": self.blen, "mlen": self.mlen, "vlen": self.vlen, "hlen": self.hlen}


def make_shape(spec: Any) -> Shape:
    if isinstance(spec, Shape):
        return spec
    d = dict(spec or {})
    bad = sorted(set(d) - {"blen", "mlen", "vlen", "hlen"})
    if bad or len(d) != 4:
        raise BackendError(f"backend.shape = {d!r} is invalid; allowed: a mapping with blen, mlen, vlen, hlen")
    return Shape(**{k: int(v) for k, v in d.items()})


def shape_reasons(s: Shape) -> list[str]:
    """Violations of the two structural constraints of Table III (independent of the genome)."""
    out = []
    if s.mlen % s.blen:
        out.append(f"MLEN % BLEN = {s.mlen} % {s.blen} = {s.mlen % s.blen} != 0 (sub-arrays must tile MLEN)")
    if not s.mlen >= s.hlen >= s.blen:
        out.append(f"MLEN >= HLEN >= BLEN fails ({s.mlen}, {s.hlen}, {s.blen})")
    return out


def bandwidth_reason(s: Shape, kv_bytes: float, clock_ghz: float, hbm_gbs: float) -> str:
    """Table III constraint (1): one MLEN-wide KV vector per cycle must come from memory (MX scale counted)."""
    need = s.mlen * kv_bytes * clock_ghz
    if need > hbm_gbs * (1 + 1e-12):
        return (f"MLEN·KV width = {s.mlen}·{kv_bytes * 8:g} bit = {need:g} GB/s at {clock_ghz:g} GHz "
                f"> memory bandwidth {hbm_gbs:g} GB/s")
    return ""


def matrix_area_mm2(s: Shape) -> float:
    """Compute area of the matrix unit (Table XIII's "Comp Area"): PEs plus the result adder tree."""
    tree = max(s.mlen // s.blen - 1, 0) * s.blen ** 2
    return (s.macs * PE_UM2 + tree * ADDER_UM2) / 1e6


def peak_tops(s: Shape, clock_ghz: float = 1.0) -> float:
    return 2 * s.macs * clock_ghz / 1e3


# ---------------------------------------------------------------------------------------- cycles
def _ceil(a: Any, b: Any) -> np.ndarray:
    return np.ceil(np.asarray(a, dtype=float) / b)


def gemm_cycles(s: Shape, M: Any, K: Any, N: Any) -> np.ndarray:
    """Output-stationary tiles of a linear GEMM (0 where M = 0), pipeline fill once per GEMM."""
    M = np.asarray(M, dtype=float)
    tiles = _ceil(M, s.blen) * _ceil(K, s.mlen) * _ceil(N, s.blen)
    fill = 2 * s.blen + np.log2(max(s.mlen // s.blen, 1))
    return np.where(M > 0, tiles * s.blen + fill, 0.0)


def attention_cycles(s: Shape, instances: Any, rows: Any, tiles: Any) -> np.ndarray:
    """FlashAttention: `instances` (batch·KV groups) of `rows` query rows (R heads × tokens), MLEN/HLEN at once.

    `tiles` = ⌈inner/HLEN⌉·⌈outer/BLEN⌉ per BLEN rows: score ⌈d_qk/HLEN⌉·⌈c/BLEN⌉, value ⌈c/HLEN⌉·⌈d_v/BLEN⌉,
    or their sums over the decode contexts (`sum_ceil`)."""
    waves = _ceil(instances, s.heads)
    return waves * _ceil(rows, s.blen) * np.asarray(tiles, float) * s.blen


def sum_ceil(lo: int, hi: int, b: int) -> float:
    """Σ_{c=lo}^{hi} ⌈c/b⌉ in closed form (decode contexts lo … hi)."""
    def upto(n: int) -> float:
        q, r = divmod(n, b)
        return b * q * (q + 1) / 2 + r * (q + 1)
    return upto(hi) - upto(lo - 1)
