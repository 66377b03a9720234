"""Cost of a population on one PLENA array shape: prefill, the exact decode sum, energy (vectorized).

Per operator of `forge.lm.workload` (bytes from its OpTable, so the genomes' own precisions follow):
    t = max(compute cycles / (cores · clock), HBM bytes / bandwidth)
(the prefetch engines overlap loads with compute, §III-C). HBM bytes are weights, KV reads/writes and
the activations of linear operators; FlashAttention keeps scores and softmax on chip, so attention
moves only Q in, O out and the KV cache. Elementwise operators run on the VLEN-lane vector unit.

Decode sums the L_d steps at contexts c = L_p+1 … L_p+L_d: linear operators are n × one step;
attention compute sums ⌈c/BLEN⌉ (or ⌈c/HLEN⌉) in closed form and its bytes are affine in c (summed
from the two end points). Attention time is max(Σ compute, Σ memory): both grow ∝ c, so the same
bound holds at every step and this equals Σ max up to the ⌈·⌉ ripple (tested against a per-step loop).

Causal prefill (`causal`, default on): the analyzer's prefill attention is the full L_p × L_p square;
a LLaMA is a causal decoder and FlashAttention [13] skips the key tiles wholly above the diagonal, so
a query-row tile at context c visits ⌈c/BLEN⌉ key tiles: on average (⌈L_p/BLEN⌉ + 1)/2 of them (score),
(⌈L_p/HLEN⌉ + 1)/2 inner tiles (value), and softmax and the attention FLOPs scale by (L_p + 1)/(2 L_p).

Sliding-window layers (window w): the analyzer counts min(w, c) keys; here a query-row tile visits at most
⌈w/BLEN⌉ + 1 key tiles in prefill (a band of width w crosses that many), decode tiles sum ⌈min(w, c)/BLEN⌉,
softmax and FLOPs keep the windowed causal share (`causal_keys`), and decode sums of bytes split at each
window (`decode_sum`), all exact in the analyzer's terms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from backends.plena.array import Shape, attention_cycles, gemm_cycles, sum_ceil
from forge.spaces.arrays import PopArrays
from forge.lm.workload import (ELEM_J, GEMM_J, HEAD_OP_NAMES, OP_NAMES, OpTable, Precision, attended_keys, causal_keys,
                            decode_sum, head_ops, layer_ops, layer_windows)

SCORE_J, VALUE_J, SOFTMAX_J = (OP_NAMES.index(n) for n in ("attn_score", "attn_value", "softmax"))
ALL_OPS = OP_NAMES + HEAD_OP_NAMES


@dataclass(frozen=True)
class System:
    """Clock, replicated cores, HBM and energy constants of one PLENA system (conf/backend/plena.yaml)."""

    clock_ghz: float = 1.0
    cores: int = 16
    hbm_gb: float = 320.0
    hbm_gbs: float = 7960.0
    mac_pj: float = 0.08
    vector_pj: float = 0.2
    hbm_pj_per_byte: float = 31.2
    static_w: float = 10.0


@dataclass
class Tables:
    """The analyzer's tables of one population at its batch (shared by every shape)."""

    pop: PopArrays
    batch: np.ndarray  # (P,)
    pre: OpTable
    head_pre: OpTable
    dec_lo: OpTable
    dec_hi: OpTable
    head_dec: OpTable
    prefill: int
    decode: int
    causal: bool = True


def tables(pop: PopArrays, batch: np.ndarray, prefill: int, decode: int, prec: Precision,
           causal: bool = True) -> Tables:
    lo, hi = prefill + 1, prefill + decode
    return Tables(pop, batch, layer_ops(pop, prefill, prefill, batch, prec), head_ops(pop, prefill, 1, batch, prec),
                  layer_ops(pop, 1, lo, batch, prec), layer_ops(pop, 1, hi, batch, prec),
                  head_ops(pop, 1, 1, batch, prec), prefill, decode, causal)


def _half(n: Any, causal: bool) -> Any:
    """Mean key (or inner) tiles per query-row tile over a causal triangle of n tiles: (n + 1)/2."""
    return (n + 1) / 2.0 if causal else n


def _tiles(pop: PopArrays, lo: int, hi: int, b: int, causal: bool | None) -> Any:
    """Key (or inner) tiles per query-row tile of each layer: prefill (hi == lo, `causal`) or Σ over decode
    contexts lo … hi (causal None). A scalar without windows; (P, L) with them (min(w, c) keys)."""
    w = layer_windows(pop)
    if causal is not None:
        full = _half(np.ceil(lo / b), causal)
        if w is None:
            return full
        band = np.ceil(np.minimum(w, lo) / b) + (1.0 if causal else 0.0)
        return np.where((w > 0) & (w < lo), np.minimum(full, band), full)
    if w is None:
        return sum_ceil(lo, hi, b)
    c = np.minimum(np.where(w > 0, w, hi), hi)  # contexts lo … c grow, c+1 … hi sit at the window
    grow = np.vectorize(lambda top: sum_ceil(lo, int(top), b) if top >= lo else 0.0)(c)
    return grow + (hi - np.maximum(c, lo - 1)) * np.ceil(np.minimum(np.where(w > 0, w, hi), hi) / b)


def _hbm_bytes(t: OpTable) -> np.ndarray:
    """Off-chip bytes per op: everything but the on-chip attention intermediates (scores, softmax)."""
    b = t.weight_bytes + t.kv_read_bytes + t.kv_write_bytes + t.act_bytes
    scores = t.M[:, :, SCORE_J] * t.N[:, :, SCORE_J] * t.batch[:, :, SCORE_J]  # never leave the chip
    ba = np.divide(t.act_bytes[:, :, SCORE_J], t.M[:, :, SCORE_J] * t.K[:, :, SCORE_J] * t.batch[:, :, SCORE_J] + scores,
                   out=np.zeros_like(scores), where=scores > 0)
    b[:, :, SCORE_J] -= scores * ba
    b[:, :, VALUE_J] -= scores * ba
    b[:, :, SOFTMAX_J] = 0.0
    return b


def _compute(s: Shape, T: Tables, t: OpTable, score_tiles: np.ndarray, value_tiles: np.ndarray) -> np.ndarray:
    """Array and vector-unit cycles of every (genome, layer, op) of one pass (before splitting over cores)."""
    pop = T.pop
    cyc = np.zeros(t.flops.shape)
    for j in GEMM_J:
        cyc[:, :, j] = gemm_cycles(s, t.M[:, :, j], t.K[:, :, j], t.N[:, :, j])
    inst = T.batch[:, None] * pop.n_kv
    rows = np.ceil(pop.n_h / np.maximum(pop.n_kv, 1)) * t.M[:, :, SCORE_J]
    att = t.flops[:, :, SCORE_J] > 0
    cyc[:, :, SCORE_J] = np.where(att, attention_cycles(s, inst, rows, score_tiles), 0.0)
    cyc[:, :, VALUE_J] = np.where(att, attention_cycles(s, inst, rows, value_tiles), 0.0)
    cyc[:, :, ELEM_J] = t.M[:, :, ELEM_J] / s.vlen
    return cyc


def _head_compute(s: Shape, h: OpTable) -> np.ndarray:
    cyc = np.zeros(h.flops.shape[::2])  # (P, 3)
    lm, fn = h.names.index("lm_head"), h.names.index("final_norm")
    cyc[:, lm] = gemm_cycles(s, h.M[:, 0, lm], h.K[:, 0, lm], h.N[:, 0, lm])
    cyc[:, fn] = h.M[:, 0, fn] / s.vlen
    return cyc


def shape_cost(s: Shape, sys: System, T: Tables) -> dict[str, np.ndarray]:
    """TTFT, TPOT, energy and utilization of every genome on shape `s` (each (P,)).

    util_* = attained FLOP/s over peak (memory stalls included); array_util_* = useful MACs over the
    MACs of the cycles the array is busy (the mapping alone), for the linear (projection + MLP) and
    attention GEMMs of decode."""
    pop, hz, bw = T.pop, sys.clock_ghz * 1e9, sys.hbm_gbs * 1e9
    cores = float(sys.cores)
    dqk, dv = pop.d_qk.astype(float), pop.d_v.astype(float)
    # prefill: contexts = prompt length
    Lp, n, lo, hi = T.prefill, T.decode, T.prefill + 1, T.prefill + T.decode
    tri = (Lp + 1) / (2.0 * Lp) if T.causal else 1.0  # share of the score square under the diagonal
    if T.causal and layer_windows(pop) is not None:  # per layer: the windowed band's causal share
        tri = causal_keys(pop, Lp) / np.broadcast_to(attended_keys(pop, Lp), (pop.P, pop.L))
    c_pre = _compute(s, T, T.pre, np.ceil(dqk / s.hlen) * _tiles(pop, Lp, Lp, s.blen, T.causal),
                     _tiles(pop, Lp, Lp, s.hlen, T.causal) * np.ceil(dv / s.blen))
    c_pre[:, :, SOFTMAX_J] *= tri
    ch_pre = _head_compute(s, T.head_pre)
    pre_ops = np.concatenate([np.maximum(c_pre / cores / hz, _hbm_bytes(T.pre) / bw).sum(axis=1),
                              np.maximum(ch_pre / cores / hz, T.head_pre.bytes[:, 0] / bw)], axis=1)
    # decode: linear ops n × one step; attention summed over contexts lo … hi
    c_dec = _compute(s, T, T.dec_lo, np.ceil(dqk / s.hlen) * _tiles(pop, lo, hi, s.blen, None),
                     _tiles(pop, lo, hi, s.hlen, None) * np.ceil(dv / s.blen))
    b_lo, b_hi = _hbm_bytes(T.dec_lo), _hbm_bytes(T.dec_hi)
    b_dec = n * b_lo
    var = [SCORE_J, VALUE_J, SOFTMAX_J]
    b_dec[:, :, var] = decode_sum(pop, lo, hi, b_lo[:, :, var], b_hi[:, :, var])
    c_dec[:, :, GEMM_J + ELEM_J] *= n
    c_dec[:, :, SOFTMAX_J] = decode_sum(pop, lo, hi, T.dec_lo.M[:, :, SOFTMAX_J], T.dec_hi.M[:, :, SOFTMAX_J]) / s.vlen
    ch_dec = _head_compute(s, T.head_dec) * n
    dec_ops = np.concatenate([np.maximum(c_dec / cores / hz, b_dec / bw).sum(axis=1),
                              np.maximum(ch_dec / cores / hz, n * T.head_dec.bytes[:, 0] / bw)], axis=1)
    ttft, dec_s = pre_ops.sum(axis=1), dec_ops.sum(axis=1)
    att3 = T.pre.flops[:, :, [SCORE_J, VALUE_J, SOFTMAX_J]]
    if np.ndim(tri) == 0:
        skipped = (1 - tri) * att3.sum(axis=(1, 2))
    else:  # per layer (windows)
        skipped = ((1 - tri)[..., None] * att3).sum(axis=(1, 2))
    flops_pre = T.pre.total("flops") + T.head_pre.total("flops") - skipped
    windows = layer_windows(pop) is not None
    if windows:  # per-(layer, op) sums split at each window
        dsum = decode_sum(pop, lo, hi, T.dec_lo.flops, T.dec_hi.flops)
        flops_dec = dsum.sum(axis=(1, 2)) + n * T.head_dec.total("flops")
    else:
        flops_dec = n * (T.dec_lo.total("flops") + T.dec_hi.total("flops")) / 2.0 + n * T.head_dec.total("flops")
    peak = 2.0 * s.macs * cores * hz
    mat = GEMM_J + [SCORE_J, VALUE_J]
    if windows:
        mat_flops = dsum[:, :, mat].sum(axis=(1, 2))
    else:
        mat_flops = n * (T.dec_lo.flops[:, :, mat].sum(axis=(1, 2)) + T.dec_hi.flops[:, :, mat].sum(axis=(1, 2))) / 2.0
    att = [SCORE_J, VALUE_J]

    def array_util(js: list[int]) -> np.ndarray:  # mapping efficiency of the decode GEMMs in js
        if windows:
            return dsum[:, :, js].sum(axis=(1, 2)) / 2.0 / np.maximum(c_dec[:, :, js].sum(axis=(1, 2)) * s.macs, 1e-30)
        f = n * (T.dec_lo.flops[:, :, js].sum(axis=(1, 2)) + T.dec_hi.flops[:, :, js].sum(axis=(1, 2))) / 4.0
        return f / np.maximum(c_dec[:, :, js].sum(axis=(1, 2)) * s.macs, 1e-30)
    hbm = _hbm_bytes(T.pre).sum(axis=(1, 2)) + b_dec.sum(axis=(1, 2)) + T.head_pre.bytes[:, 0].sum(-1) \
        + n * T.head_dec.bytes[:, 0].sum(-1)
    vec = (c_pre[:, :, ELEM_J].sum(axis=(1, 2)) * s.vlen + c_dec[:, :, ELEM_J].sum(axis=(1, 2)) * s.vlen)
    energy_j = ((flops_pre + flops_dec) / 2 * sys.mac_pj + hbm * sys.hbm_pj_per_byte + vec * sys.vector_pj) * 1e-12 \
        + sys.static_w * (ttft + dec_s)
    dec_mem = (b_dec.sum(axis=(1, 2)) + n * T.head_dec.bytes[:, 0].sum(-1)) / bw
    return {"ttft_s": ttft, "decode_s": dec_s, "energy_j": energy_j, "pre_ops": pre_ops, "dec_ops": dec_ops,
            "util_prefill": flops_pre / np.maximum(ttft * peak, 1e-30),
            "util_decode": flops_dec / np.maximum(dec_s * peak, 1e-30),
            "array_util_decode": mat_flops / 2 / np.maximum(c_dec[:, :, mat].sum(axis=(1, 2)) * s.macs, 1e-30),
            "array_util_linear_decode": array_util(GEMM_J), "array_util_attn_decode": array_util(att),
            "decode_memory_bound_share": np.minimum(dec_mem / np.maximum(dec_s, 1e-30), 1.0)}
