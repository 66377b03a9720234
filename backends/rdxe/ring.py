"""Token-level pipelined simulation of an rDXE ring (LLMForge App. E.3 step 4; hardware.md "rDXE").

A ring of S identical DXE chips holds a model's active layers as S contiguous stages with
stationary weights (preloaded at boot; DRAM idle). Modelling choices, all vectorized over the chip
configurations of one genome:

Chip. C = n_DXT·n_VAC cores (a power of two, split n_DXT = 2^⌊log2 C / 2⌋ tiles of n_VAC ≥ n_DXT
cores), n_MAC INT8 MACs per core, w_core weight and k_core KV memory per core, a head buffer per
tile and one global input buffer, clocked at `clock_mhz` (the release's DXE runs at 200 MHz).

Compute (cycles of one token through one layer at context c). Every operator costs the largest of
the bounds of the units it uses (they run as a pipeline, so the slowest one sets the pace):
- Projection K×N (GEMV): output columns are spread over the C cores; when N < C the spare cores
  split K too (g = max(1, ⌊C/N⌋) cores per column, partial sums reduced by the tile adder tree).
  MAC bound ⌈N/C⌉·⌈K/(g·n_MAC)⌉; weight-port bound ⌈N/C⌉·⌈K·b_w/(g·P_w)⌉ with P_w the per-core
  weight-memory read port (dxe_relaxed `wmem`: 128 bit = 16 B/cycle, whatever n_MAC is), divided by
  the rows that share one weight read (1 in decode, the whole prompt in a batched prefill); global
  buffer bound ⌈(K + N)·b_a/P_g⌉ (input broadcast and output collection through the 16 B/cycle
  `global_sram`).
- Attention: heads are processed in rounds of n_DXT (one head per tile); a head's c cached positions
  are spread over the tile's n_VAC cores: MAC bound ⌈n_h/n_DXT⌉·⌈c/n_VAC⌉·(⌈d_qk/n_MAC⌉ + ⌈d_v/n_MAC⌉),
  averaged exactly over the contexts of the phase; KV-port bound n_kv·c·(d_qk + d_v)·b_kv/(P_kv·C)
  (each KV group read once over its own per-core port); head-buffer bound n_h·(d_qk + 2c + d_v)·b_a/
  (P_h·n_DXT) (query in, scores out and back for the softmax, head output; 16 B/cycle `head_sram`).
  Identity-attention layers have none.
- Vector unit: softmax over n_h·c scores, the two norms over d_model and the MLP activation over
  d_mlp (×2 inputs for a gated MLP) at `vector_elems_per_cycle`; `vector_overlap` = 1 hides it behind
  the matrix work of the layer (max), 0 runs it after (sum). `layer_overhead_cycles` (default 0) adds
  a fixed cost per layer.
- MAC utilization = useful MACs / (cycles of the busy stages × C·n_MAC) for a decode token.

Ring. One d_model activation (d_model·act_bytes) crosses each hop; a hop costs
`link_latency_cycles` + ⌈bytes/link_bytes_per_cycle⌉ cycles. A token visits all S stages and S hops
(S−1 forward hops plus the wrap-around that returns the hidden state to chip 0, which hosts I/O).
- TPOT: one stream's token traverses every stage and hop in turn:
  TPOT = Σ_s t_s^dec + S·t_hop (t_s^dec at the mean decode context; pipelining does not help a
  single stream).
- TTFT: the L_p prompt tokens flow through the pipeline, one token per stage at a time; a stage keeps
  each weight word it reads for the whole prompt (a batched prefill), so the weight-port bound of a
  prompt token is 1/L_p of a decode step's while its MAC, buffer and vector bounds are not: fill plus
  steady state, TTFT = Σ_s t̄_s^pre + S·t_hop + (L_p − 1)·max(max_s t̄_s^pre, link transfer), with
  t̄^pre the stage time at the mean prompt context (exact when stage times do not depend on context).
  The embedding lookup and the LM head run on the host and are excluded (the ring models the
  decoder stack, as the paper's packer does).

Energy per token (decode, the metric reported): dynamic energy of all layers (MACs 0.20 pJ, weight
memory 0.243 pJ/B, KV reads and writes 0.24 pJ/B with V read column-wise at 1.2×, head/global
buffer traffic 0.14/0.17 pJ/B, fused softmax 0.5 pJ and norms 0.3 pJ per element, MLP activation
0.5 pJ per element; computed in profile.py) + links (S hops · bytes · 8 · pJ/bit) + leakage of all
S chips during the whole TPOT (SRAM per byte, accumulators per core, head buffers per tile, the
global buffer per chip and every MAC, per cycle: more MACs leak more, so they are not free). Prefill energy (extras) is the same at prompt contexts over TTFT.
Per-access energies do not depend on memory size (the release's constants).

Area per chip (µm², linear in SRAM, anchored to the DXE reference of 8×16 cores × 16 MACs with
24 KB + 8 KB per core ≈ 3.98 mm²): MACs + accumulators per core + SRAM per byte of weight and KV
memory + head buffer per tile + global buffer. Ring area = S × chip area.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from backends.rdxe.profile import LayerProfile


@dataclass(frozen=True)
class RingConstants:
    """Every constant of the chip and ring model; defaults from shared/reference/hardware.md (rDXE)."""

    clock_mhz: float = 200.0  # release DXE clock
    # per-access energies (release constants; INT8 MAC from the 16 nm table)
    mac_pj: float = 0.20
    wmem_pj_per_byte: float = 0.243
    kvmem_pj_per_byte: float = 0.24
    hbuf_pj_per_byte: float = 0.14
    gbuf_pj_per_byte: float = 0.17
    softmax_pj_per_elem: float = 0.5
    norm_pj_per_elem: float = 0.3
    act_pj_per_elem: float = 0.5  # assumption: GELU/SiLU costed like the fused softmax
    v_colwise: float = 1.2  # reading V column-wise (multi-bank)
    # inter-chip link
    link_pj_per_bit: float = 1.0
    link_bytes_per_cycle: float = 16.0
    link_latency_cycles: float = 10.0
    # buffers (bytes)
    hbuf_bytes: int = 2048  # per tile
    gbuf_bytes: int = 8192  # per chip
    # area (µm²)
    mac_um2: float = 135.685
    acc_um2_per_core: float = 5474.79
    sram_um2_per_byte: float = 0.711316
    hbuf_um2_per_tile: float = 1453.80
    gbuf_um2_per_chip: float = 4824.14
    # leakage (pJ per cycle)
    leak_sram_pj_per_byte: float = 5.907e-7
    leak_acc_pj_per_core: float = 1.7709e-3
    leak_hbuf_pj_per_tile: float = 1.7442e-3
    leak_gbuf_pj_per_chip: float = 5.3914e-3
    layer_overhead_cycles: float = 0.0  # calibration knob (assumption: 0)
    # read ports, bytes per cycle (hw_eval/arch/dxe_relaxed/arch.yaml: 128-bit wmem, head_sram, global_sram)
    wmem_port_bytes: float = 16.0  # per core, independent of n_MAC
    kvmem_port_bytes: float = 16.0  # per core (assumption: the KV memory has the same 128-bit port)
    hbuf_port_bytes: float = 16.0  # per tile
    gbuf_port_bytes: float = 16.0  # per chip (broadcast to every tile)
    vector_elems_per_cycle: float = 16.0  # softmax/norm/activation unit (assumption: one 128-bit lane per chip)
    vector_overlap: float = 1.0  # 1: overlapped with the MAC array; 0: serial after it
    # MAC leakage per MAC per cycle: the accumulator's leakage density (1.7709e-3 pJ / 5474.79 µm²)
    # times the INT8 MAC area (135.685 µm²) (assumption: logic leaks per area like the accumulator)
    leak_mac_pj: float = 4.389e-5

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def split_cores(cores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Power-of-two cores → (n_DXT tiles, n_VAC cores per tile) with n_VAC ≥ n_DXT."""
    m = np.log2(np.asarray(cores)).round().astype(np.int64)
    n_dxt = 2 ** (m // 2)
    return n_dxt, np.asarray(cores) // n_dxt


def scratchpad_bytes(cores: int, k: RingConstants) -> int:
    """Global input buffer + one head buffer per tile: the activation capacity A of the packer."""
    return int(k.gbuf_bytes + (1 << ((int(cores).bit_length() - 1) // 2)) * k.hbuf_bytes)


def chip_area_mm2(cores, n_mac, w_core_b, k_core_b, k: RingConstants) -> np.ndarray:
    n_dxt, _ = split_cores(cores)
    um2 = (cores * n_mac * k.mac_um2 + cores * k.acc_um2_per_core + cores * (w_core_b + k_core_b) * k.sram_um2_per_byte
           + n_dxt * k.hbuf_um2_per_tile + k.gbuf_um2_per_chip)
    return um2 * 1e-6


def chip_leak_pj_per_cycle(cores, w_core_b, k_core_b, k: RingConstants, n_mac=0) -> np.ndarray:
    """Static pJ per cycle of one chip: SRAM, accumulators, buffers and (when n_mac > 0) the MACs."""
    n_dxt, _ = split_cores(cores)
    return (cores * (w_core_b + k_core_b) * k.leak_sram_pj_per_byte + cores * k.leak_acc_pj_per_core
            + n_dxt * k.leak_hbuf_pj_per_tile + k.leak_gbuf_pj_per_chip + cores * n_mac * k.leak_mac_pj)


@lru_cache(maxsize=4096)
def mean_ceil(div: int, lo: int, hi: int, window: int = 0) -> float:
    """Mean of ⌈k/div⌉ over the integer contexts c in [lo, hi], k = c or, under a window, min(window, c)."""
    c = np.arange(lo, hi + 1)
    if window > 0:
        c = np.minimum(c, window)
    return float(np.ceil(c / div).mean())


def mean_keys(prof: LayerProfile, lo: int, hi: int) -> Any:
    """Mean keys a query attends over the contexts [lo, hi]: (lo + hi)/2, or per layer (N,) the mean of
    min(w, c) on sliding-window layers (affine up to w, constant after: closed form)."""
    c = (lo + hi) / 2
    w = prof.window
    if w is None or not w.any():
        return c
    top = np.clip(w, lo - 1, hi).astype(float)  # contexts lo … top grow, top+1 … hi sit at w
    grown = (top - lo + 1) * (lo + top) / 2.0 + (hi - top) * w
    return np.where(w > 0, grown / (hi - lo + 1), c)


def _projection_bounds(prof: LayerProfile, nm: np.ndarray, C: np.ndarray, rows: float,
                       k: RingConstants) -> np.ndarray:
    """(3, G, N, 7) MAC, weight-port and global-buffer cycle bounds of the seven projections."""
    K, N = prof.proj_K[None], prof.proj_N[None]
    wb, ab, _ = prof.bytes_wak
    g = np.maximum(1.0, np.floor(C / np.maximum(N, 1.0)))
    cols = np.ceil(N / C)
    mac = cols * np.ceil(K / (g * nm))
    port = cols * np.ceil(K * wb / (g * k.wmem_port_bytes)) / rows
    gbuf = np.ceil((K + N) * ab / k.gbuf_port_bytes) * (N > 0)
    return np.stack(np.broadcast_arrays(mac, port, gbuf))


def _attention_bounds(prof: LayerProfile, n_mac: np.ndarray, cores: np.ndarray, ctx: tuple[int, int],
                      k: RingConstants) -> np.ndarray:
    """(3, G, N) MAC, KV-port and head-buffer cycle bounds of the score and value products."""
    G = len(cores)
    n_dxt, n_vac = split_cores(cores)
    if prof.window is None or not prof.window.any():
        pos = np.array([mean_ceil(int(v), ctx[0], ctx[1]) for v in n_vac]).reshape(G, 1)
    else:
        pos = np.array([[mean_ceil(int(v), ctx[0], ctx[1], int(w)) for w in prof.window] for v in n_vac])
    nm2 = n_mac.reshape(G, 1).astype(float)
    c = mean_keys(prof, *ctx)
    _, ab, kvb = prof.bytes_wak
    mac = np.ceil(prof.n_h[None] / n_dxt.reshape(G, 1)) * pos * (np.ceil(prof.d_qk[None] / nm2) + np.ceil(prof.d_v[None] / nm2))
    kv = prof.n_kv[None] * c * (prof.d_qk + prof.d_v)[None] * kvb / (k.kvmem_port_bytes * cores.reshape(G, 1))
    hbuf = prof.n_h[None] * (prof.d_qk + 2 * c + prof.d_v)[None] * ab / (k.hbuf_port_bytes * n_dxt.reshape(G, 1))
    return np.stack(np.broadcast_arrays(mac, kv, hbuf))


def vector_elems(prof: LayerProfile, c: float) -> np.ndarray:
    """(N,) vector-unit elements of one token: softmax over n_h·c, two norms, the MLP activation."""
    return prof.n_h * c + 2.0 * prof.d_model * (prof.d_mlp > 0) + prof.d_mlp * (1 + prof.swiglu)


def layer_cycles(prof: LayerProfile, n_mac: np.ndarray, cores: np.ndarray, ctx: tuple[int, int],
                 k: RingConstants, rows: float = 1.0, serial: bool = False) -> np.ndarray:
    """(G, N) cycles of one token through each layer for G chip configs, mean over contexts ctx=[lo, hi].

    `rows`: tokens that share one weight read (1 in decode; the prompt length in a batched prefill).
    `serial`: no unit overlaps any other (the sum of every bound: the ceiling the README quotes)."""
    G = len(cores)
    nm, C = n_mac.reshape(G, 1, 1).astype(float), cores.reshape(G, 1, 1).astype(float)
    proj, att = _projection_bounds(prof, nm, C, rows, k), _attention_bounds(prof, n_mac, cores, ctx, k)
    vec = vector_elems(prof, mean_keys(prof, *ctx))[None] / k.vector_elems_per_cycle
    if serial:
        return proj.sum((0, -1)) + att.sum(0) + vec + k.layer_overhead_cycles
    matrix = proj.max(0).sum(-1) + att.max(0)
    both = np.maximum(matrix, vec) if k.vector_overlap else matrix + vec
    return both + k.layer_overhead_cycles


def decode_bounds(prof: LayerProfile, n_mac: np.ndarray, cores: np.ndarray, n_stages: np.ndarray, prefill: int,
                  decode: int, k: RingConstants) -> tuple[np.ndarray, np.ndarray]:
    """(G,) TPOT floor and ceiling in ms: every weight and KV byte over all the ports of one chip at a
    time (the stream visits one stage at a time), and every bound of every unit run back to back."""
    G, c = len(cores), mean_keys(prof, prefill + 1, prefill + decode)
    wb, _, kvb = prof.bytes_wak
    w_bytes = (prof.proj_K * prof.proj_N).sum(-1) * wb
    kv_bytes = prof.n_kv * c * (prof.d_qk + prof.d_v) * kvb
    hop = n_stages * (k.link_latency_cycles + np.ceil(prof.hop_bytes / k.link_bytes_per_cycle))
    floor = (w_bytes / k.wmem_port_bytes + kv_bytes / k.kvmem_port_bytes).sum() / cores + hop
    ceil_ = layer_cycles(prof, n_mac, cores, (prefill + 1, prefill + decode), k, serial=True).sum(1) + hop
    per_ms = k.clock_mhz * 1e3
    return floor / per_ms, ceil_.reshape(G) / per_ms


def stage_sums(cyc: np.ndarray, parts: Sequence[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """(G, N) per-layer values + G partitions → (G, S_max) stage sums (zero padded) and (G,) stage counts."""
    G, N = cyc.shape
    S = np.array([len(p) for p in parts])
    ends = np.full((G, S.max()), N)
    for i, p in enumerate(parts):
        ends[i, :len(p)] = p
    starts = np.concatenate([np.zeros((G, 1), dtype=ends.dtype), ends[:, :-1]], axis=1)
    cum = np.concatenate([np.zeros((G, 1)), np.cumsum(cyc, axis=1)], axis=1)
    rows = np.arange(G)[:, None]
    return cum[rows, ends] - cum[rows, starts], S


def simulate(prof: LayerProfile, n_mac: np.ndarray, cores: np.ndarray, w_core_b: np.ndarray, k_core_b: float,
             parts: Sequence[tuple[int, ...]], prefill: int, decode: int, k: RingConstants) -> dict[str, np.ndarray]:
    """Ring metrics for G chip configs of one profile → dict of (G,) arrays (see module docstring)."""
    dec = layer_cycles(prof, n_mac, cores, (prefill + 1, prefill + decode), k)
    pre = layer_cycles(prof, n_mac, cores, (1, prefill), k, rows=prefill)
    dec_s, S = stage_sums(dec, parts)
    pre_s, _ = stage_sums(pre, parts)
    xfer = np.ceil(prof.hop_bytes / k.link_bytes_per_cycle)
    hop = k.link_latency_cycles + xfer
    tpot_cyc = dec_s.sum(1) + S * hop
    ttft_cyc = pre_s.sum(1) + S * hop + (prefill - 1) * np.maximum(pre_s.max(1), xfer)
    leak = chip_leak_pj_per_cycle(cores, w_core_b, k_core_b, k, n_mac)
    link_pj = S * prof.hop_bytes * 8 * k.link_pj_per_bit
    e_tok = prof.e_decode_pj.sum() + link_pj + S * leak * tpot_cyc
    e_pre = prefill * (prof.e_prefill_pj.sum() + link_pj) + S * leak * ttft_cyc
    per_ms = k.clock_mhz * 1e3  # cycles per millisecond
    util = prof.macs_decode.sum() / (dec_s.sum(1) * cores * n_mac)
    area = S * chip_area_mm2(cores, n_mac, w_core_b, k_core_b, k)
    tpot_ms = tpot_cyc / per_ms
    return {"ttft_ms": ttft_cyc / per_ms, "tpot_ms": tpot_ms, "energy_per_token_uj": e_tok * 1e-6,
            "prefill_energy_uj": e_pre * 1e-6, "area_mm2": area, "mac_utilization": util, "n_chips": S,
            "power_mw": e_tok * 1e-6 / tpot_ms, "stage_cycles": dec_s}
