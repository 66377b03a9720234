"""Per-layer resource profiles for the rDXE ring (LLMForge App. E.3, step 1), from `forge.lm.workload`.

Every *active* layer is profiled on its own, so heterogeneous IHA genomes are costed layer by layer
(the public release costed every layer like the first active one: a known defect we avoid). For
layer ℓ under a workload of L_p prompt and L_d decode tokens, at batch 1:

- w: weight bytes (projections, biases, norm weights); identity-attention layers have no attention
  weights, because `layer_ops` zeroes them.
- kappa: KV bytes written per token (n_kv·(d_qk + d_v)·kv_bytes; 0 for identity attention).
  The packer needs κ·T with T = L_p + L_d, the maximum context (κ·min(w, T) for a sliding window w:
  its rolling cache); `window` goes to the ring, which counts min(w, c) keys at context c.
- o: decode MACs of one token at the mean decode context c̄ = L_p + (L_d + 1)/2 (projections plus
  the score and value products), rounded to an integer: the quantity the packer balances.
- a: peak activation bytes: the largest input+output activation footprint of any one operator of a
  decode step at the maximum context T (the score row of all heads dominates for wide attention).

Besides the packer's four numbers a profile keeps what the ring simulation needs (projection
shapes, attention shapes, dynamic energy per token), so the backend touches `layer_ops` once per
population. The dynamic energy uses the per-access constants of `RingConstants` (ring.py).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from forge.spaces.arrays import PopArrays
from forge.lm.workload import OpTable, Precision, attended_keys, genome_bytes, layer_ops, layer_windows

GEMM_OPS = ("q_proj", "k_proj", "v_proj", "o_proj", "mlp_gate", "mlp_up", "mlp_down")
HEAD_BUFFER_OPS = ("attn_score", "softmax", "attn_value")  # per-head data lives in the tile's head buffer
NORM_OPS = ("norm_attn", "norm_mlp")


@dataclass(frozen=True)
class LayerProfile:
    """Profiles of a genome's N active layers, in order; arrays are (N,) unless noted."""

    slots: np.ndarray  # original layer-slot index of each active layer
    w: tuple[int, ...]
    kT: tuple[int, ...]  # κ·T: KV bytes of the layer at the maximum context
    o: tuple[int, ...]
    a: tuple[int, ...]
    kappa: np.ndarray  # KV bytes per token
    proj_K: np.ndarray  # (N, 7) reduction dim of each projection (0 = absent)
    proj_N: np.ndarray  # (N, 7) output dim of each projection
    n_h: np.ndarray
    d_qk: np.ndarray
    d_v: np.ndarray
    macs_decode: np.ndarray  # float MACs per decode token at c̄ (exact mean)
    macs_prefill: np.ndarray  # float MACs per prompt token at the mean prompt context (L_p + 1)/2
    e_decode_pj: np.ndarray  # dynamic energy of one decode token at c̄ (pJ)
    e_prefill_pj: np.ndarray  # dynamic energy of one prompt token at the mean prompt context (pJ)
    hop_bytes: int  # one d_model activation passed between chips
    key: str  # hash of the packer inputs: packings are cached by (key, chip)
    n_kv: np.ndarray  # (N,) KV groups (0 for identity attention)
    d_mlp: np.ndarray  # (N,) MLP width
    d_model: int
    swiglu: bool  # three-matrix MLP (gate, up, down)
    bytes_wak: tuple[float, float, float]  # weight, activation, KV bytes per element
    window: np.ndarray | None = None  # (N,) attention window per layer, 0 = full; None = all full

    @property
    def n(self) -> int:
        return len(self.w)


def _idx(table: OpTable, names: tuple[str, ...]) -> list[int]:
    return [table.names.index(n) for n in names]


def _macs(t: OpTable) -> np.ndarray:
    """(P, L) MACs: half the FLOPs of the GEMM-like operators."""
    mac_kinds = np.array([k != "elementwise" for k in t.kinds])
    return t.flops[:, :, mac_kinds].sum(-1) / 2


def dynamic_energy(t: OpTable, e) -> np.ndarray:
    """(P, L) dynamic pJ of one token: MACs, weight/KV memory, buffers, fused softmax/norm/activation."""
    gi, hi, ni = _idx(t, GEMM_OPS + NORM_OPS + ("mlp_act",)), _idx(t, HEAD_BUFFER_OPS), _idx(t, NORM_OPS)
    sc, sm, av, act = (t.names.index(n) for n in ("attn_score", "softmax", "attn_value", "mlp_act"))
    kv_read = t.kv_read_bytes[:, :, sc] + e.v_colwise * t.kv_read_bytes[:, :, av]
    return (e.mac_pj * _macs(t) + e.wmem_pj_per_byte * t.weight_bytes.sum(-1)
            + e.kvmem_pj_per_byte * (kv_read + t.kv_write_bytes.sum(-1))
            + e.gbuf_pj_per_byte * t.act_bytes[:, :, gi].sum(-1) + e.hbuf_pj_per_byte * t.act_bytes[:, :, hi].sum(-1)
            + e.softmax_pj_per_elem * t.M[:, :, sm] + e.norm_pj_per_elem * t.M[:, :, ni].sum(-1)
            + e.act_pj_per_elem * t.M[:, :, act])


def pop_key_rows(pop: PopArrays) -> list[bytes]:
    """A stable per-row key of a PopArrays (the network it builds, at its own W/A/KV bytes), for inputs
    without genome ids: two genomes of one architecture at different formats must not share a profile."""
    m = pop.masked()
    lay = np.stack([m.active, m.attn, m.n_h, m.n_kv, m.d_qk, m.d_v, m.d_mlp], axis=-1).astype(np.int64)
    glob = np.stack([m.d_model, m.block_size, m.vocab_size, m.swiglu, m.learned_pos, m.tied, m.bias_qkv,
                     m.bias_all, m.layernorm], axis=-1).astype(np.int64)
    own = np.stack([m.weight_bytes, m.act_bytes, m.kv_bytes], axis=-1).astype(np.float64)
    own = np.where(np.isfinite(own), own, -1.0)  # one canonical "the workload's" (NaN payloads may differ)
    win = layer_windows(pop)
    if win is not None:  # a window changes the network's cost: part of the key (absent when none, as before)
        lay = np.concatenate([lay, win[..., None]], axis=-1)
    out = []
    for p in range(m.P):
        act = lay[p, :, 0] > 0
        out.append(lay[p, act].tobytes() + b"|" + glob[p].tobytes() + b"|" + own[p].tobytes())
    return out


def profile_population(pop: PopArrays, prefill: int, decode: int, prec: Precision, energy) -> list[LayerProfile]:
    """Profile every genome of a population with three vectorized `layer_ops` calls."""
    pop = pop.masked()
    T = prefill + decode
    win = layer_windows(pop)
    kv_pos = np.broadcast_to(attended_keys(pop, T), (pop.P, pop.L))  # positions cached per layer: min(w, T)
    c_dec, c_pre = prefill + (decode + 1) / 2, (prefill + 1) / 2
    t_dec = layer_ops(pop, tokens=1, context=c_dec, prec=prec)
    t_pre = layer_ops(pop, tokens=1, context=c_pre, prec=prec)
    t_max = layer_ops(pop, tokens=1, context=T, prec=prec)
    gi = _idx(t_dec, GEMM_OPS)
    w_all = np.ceil(t_dec.weight_bytes.sum(-1))
    kappa_all = t_dec.kv_write_bytes.sum(-1)
    mac_d, mac_p = _macs(t_dec), _macs(t_pre)
    a_all = np.ceil(t_max.act_bytes.max(-1))
    e_d, e_p = dynamic_energy(t_dec, energy), dynamic_energy(t_pre, energy)
    wb, ab, kvb = (x[:, 0] for x in genome_bytes(pop, prec))
    hop = np.ceil(pop.d_model * ab).astype(np.int64)
    out = []
    for p in range(pop.P):
        act = np.flatnonzero(pop.active[p])
        w = tuple(int(x) for x in w_all[p, act])
        kT = tuple(int(x) for x in np.ceil(kappa_all[p, act] * (T if win is None else kv_pos[p, act])))
        o = tuple(int(x) for x in np.rint(mac_d[p, act]))
        a = tuple(int(x) for x in a_all[p, act])
        key = hashlib.blake2b(repr((w, kT, o, a)).encode(), digest_size=10).hexdigest()
        out.append(LayerProfile(
            slots=act, w=w, kT=kT, o=o, a=a, kappa=kappa_all[p, act],
            proj_K=t_dec.K[p][act][:, gi], proj_N=t_dec.N[p][act][:, gi],
            n_h=pop.n_h[p, act].astype(float), d_qk=pop.d_qk[p, act].astype(float), d_v=pop.d_v[p, act].astype(float),
            macs_decode=mac_d[p, act], macs_prefill=mac_p[p, act], e_decode_pj=e_d[p, act], e_prefill_pj=e_p[p, act],
            hop_bytes=int(hop[p]), key=key, n_kv=pop.n_kv[p, act].astype(float), d_mlp=pop.d_mlp[p, act].astype(float),
            d_model=int(pop.d_model[p]), swiglu=bool(pop.swiglu[p]),
            bytes_wak=(float(wb[p]), float(ab[p]), float(kvb[p])),
            window=None if win is None else win[p, act].astype(np.int64)))
    return out
