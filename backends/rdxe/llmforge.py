"""`backend.conventions=llmforge`: the public LLMForge release's rDXE ring conventions, one field each.

The release's ring simulator (`rDXE_sim`) is not public; these conventions were recovered from its
published outputs (Gemma-3-270M, Qwen2.5-0.5B, SmolLM2-360M at 256/256; README "rDXE") and the
release's packer (`hw_packer.py`), evaluator (`evaluators/hw_rdxe_inner.py`) and `dxe_relaxed` spec:

1. decode attention at a fixed ring context (`decode_context` = 2048) whatever the workload;
2. softmax (n_h·context) and the two norms (2·d_model) on a vector unit of `vector_elems_per_cycle`
   = 1, run after the matrix work (`vector_serial`);
3. a matrix kernel where each core's weight memory delivers `weight_port_bytes` = 16 B per cycle
   whatever n_MAC is, K is never split across spare cores (`k_split` false), the first weight tile's
   load (n_MAC weights over the port) is exposed (`first_tile_exposed`), and attention is costed as
   GEMMs per KV group with M = n_h/n_kv rows (`attention_group_gemm`): one GEMM (M, K, N) costs
   ⌈N/C⌉·⌈M·K·b_w/16⌉ + ⌈n_MAC/16⌉ cycles (no weight reuse across the M rows);
4. capacity-greedy packing: fill each chip to its weight memory / `capacity_overhead` (1.15) on the
   smallest power-of-two core count that needs at most n_chips_max chips (the fewest chips for that
   core count); KV does not bind the partition, but the core count then doubles, same partition,
   until every chip's KV at `kv_context` (2048) / 1.15 fits its KV memory. That last step is our
   reading of the public picks (Gemma-3-270M and SmolLM2-360M need 1024 cores for their KV; without
   it no energy-based rule picks the cores their TPOT implies);
5. selection of the lowest energy per token inside the envelope (`area_envelope_mm2` [0, 800],
   `power_envelope_mw` [0, 1e5]), energy ties broken by static energy (leakage × TPOT, `tie_break`),
   then grid order (n_MAC, n_chips_max, w_core as the release sweeps); energy and area do not depend
   on n_MAC (`energy_depends_on_n_mac` false: area counts 16 MACs per core);
6. the first active layer stands in for every active layer (`first_layer_stands_in`), the MLP has
   `mlp_matrices` = 2 for weights, ops and cycles, identity layers are costed as attention with the
   genome's first attention layer's heads (`identity_as_attention`), and d_v = d_qk (`v_equals_qk`);
7. S − 1 hops in TPOT (`tpot_wraparound_hop` false) and none in TTFT (`ttft_hops` false);
8. TTFT = one full decode pass + `prompt_scale`·L_p·(the busiest stage's prompt MACs)/(C·n_MAC):
   MAC-bound, batched over the prompt, 1/chip MACs. `prompt_scale` is the one constant fitted (scipy
   least squares on the three public points, backends/rdxe/calibrate.py); it is the least certain term.
   No constant-free form follows from the release: with hw_exp.py's prefill GEMMs, hw_packer's prefill ops
   or the gated MLP, on the busiest or the mean stage, the public points would each need a constant of
   0.28-0.45 and a different one per point (`calibrate.prompt_candidates`, README "Fidelity");
9. MAC utilization = useful MACs / (chip MACs × matrix cycles).

Energy per token: MACs at `decode_context` (0.2 pJ), weight bytes (0.243 pJ/B), one read of each KV
group (K + 1.2·V column-wise, 0.24 pJ/B), softmax 0.5 pJ and norms 0.3 pJ per element, links; no
leakage (at the release's leakage constants it would add 16-290 µJ to the published 55-143 µJ).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from backends.interface import BackendError
from backends.rdxe.profile import LayerProfile
from backends.rdxe.ring import RingConstants, chip_area_mm2, chip_leak_pj_per_cycle

REF_N_MAC = 16  # the DXE reference's MACs per core: the release's area and energy use it for every n_MAC


@dataclass(frozen=True)
class LLMForgeConventions:
    """The release's conventions; each field can be overridden (backend.llmforge.<field>=...)."""

    decode_context: int = 2048
    vector_elems_per_cycle: float = 1.0
    vector_serial: bool = True
    weight_port_bytes: float = 16.0
    k_split: bool = False
    first_tile_exposed: bool = True
    attention_group_gemm: bool = True
    kv_context: int = 2048
    capacity_overhead: float = 1.15
    area_envelope_mm2: tuple[float, float] = (0.0, 800.0)
    power_envelope_mw: tuple[float, float] = (0.0, 1.0e5)
    tie_break: str = "leakage"
    energy_depends_on_n_mac: bool = False
    first_layer_stands_in: bool = True
    mlp_matrices: int = 2
    identity_as_attention: bool = True
    v_equals_qk: bool = True
    tpot_wraparound_hop: bool = False
    ttft_hops: bool = False
    prompt_scale: float = 0.2868  # fitted by backends/rdxe/calibrate.py on the three public outputs only

    @classmethod
    def build(cls, kw: Any) -> "LLMForgeConventions":
        """Validated conventions from a config mapping (None = the release's defaults)."""
        kw = dict(kw or {})
        kinds = {f.name: type(f.default) for f in fields(cls)}
        bad = sorted(set(kw) - set(kinds))
        if bad:
            raise BackendError(f"backend.llmforge.{bad[0]} is unknown; allowed: {', '.join(kinds)}")
        for key, v in kw.items():
            kind = kinds[key]
            if kind is tuple:
                ok = hasattr(v, "__len__") and len(v) == 2 and all(isinstance(x, (int, float)) for x in v) and 0 <= v[0] <= v[1]
                v = tuple(float(x) for x in v) if ok else v
            elif kind is bool or kind is str:
                ok = isinstance(v, kind)
            else:
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            if not ok:
                allowed = {tuple: "[low, high] with 0 <= low <= high", bool: "true | false", str: "leakage | grid"}
                raise BackendError(f"backend.llmforge.{key} = {v!r} is invalid; allowed: {allowed.get(kind, 'a number >= 0')}")
            kw[key] = v
        c = cls(**kw)
        if c.tie_break not in ("leakage", "grid") or c.mlp_matrices not in (2, 3) or min(
                c.decode_context, c.kv_context, c.vector_elems_per_cycle, c.weight_port_bytes, c.capacity_overhead) <= 0:
            raise BackendError(f"backend.llmforge = {kw!r} is invalid; allowed: tie_break leakage | grid, mlp_matrices "
                               "2 | 3, positive contexts, rates and capacity_overhead")
        return c


@dataclass(frozen=True)
class Homogeneous:
    """The release's per-layer numbers (N,) after conventions 1 and 6."""

    w: np.ndarray  # weight bytes
    kv: np.ndarray  # KV bytes per token
    ops: np.ndarray  # decode MACs at decode_context
    genes: np.ndarray  # (N, 5) n_h, n_kv, d_qk, d_v, d_mlp as costed
    prompt_macs: np.ndarray  # real MACs of one prompt token (the workload's profile)


def release_profile(prof: LayerProfile, c: LLMForgeConventions) -> Homogeneous:
    """Per-layer weights, KV, ops and genes as the release's `hw_packer.profile_layer` counts them.

    Identity layers carry no attention genes (PopArrays zeroes them), so `identity_as_attention`
    gives them those of the genome's first attention layer."""
    g = np.stack([prof.n_h, prof.n_kv, prof.d_qk, prof.d_v, prof.d_mlp], axis=-1)
    att = np.flatnonzero(prof.n_h > 0)
    if c.identity_as_attention and len(att):
        g[prof.n_h == 0, :4] = g[att[0], :4]
    macs = prof.macs_prefill.copy()
    if c.first_layer_stands_in:
        g, macs = np.repeat(g[:1], prof.n, axis=0), np.repeat(macs[:1], prof.n)
    if c.v_equals_qk:
        g[:, 3] = g[:, 2]
    nh, nkv, qk, v, mlp = g.T
    d, (wb, _, kvb) = prof.d_model, prof.bytes_wak
    proj = d * qk * (nh + nkv) + d * v * nkv + v * nh * d
    w = (proj + c.mlp_matrices * d * mlp) * wb
    ops = proj + c.mlp_matrices * d * mlp + c.decode_context * nh * (qk + v)
    return Homogeneous(np.ceil(w), nkv * (qk + v) * kvb, ops, g, macs)


def _gemm(M: np.ndarray, K: np.ndarray, N: np.ndarray, cores: np.ndarray, n_mac: np.ndarray, wb: float,
          c: LLMForgeConventions) -> np.ndarray:
    """(G, N) cycles of GEMMs (M, K, N) per layer on each chip: weight-port bound, first tile exposed."""
    C, nm = cores[:, None].astype(float), n_mac[:, None].astype(float)
    g = np.maximum(1.0, np.floor(C / np.maximum(N, 1.0))) if c.k_split else 1.0
    cyc = np.ceil(N / C) * np.ceil(M * K * wb / (g * c.weight_port_bytes))
    return (cyc + c.first_tile_exposed * np.ceil(nm / c.weight_port_bytes)) * (N > 0)


def matrix_cycles(h: Homogeneous, d: int, wb: float, cores: np.ndarray, n_mac: np.ndarray,
                  c: LLMForgeConventions) -> np.ndarray:
    """(G, N) matrix cycles of one decode token per layer: projections plus grouped attention GEMMs."""
    nh, nkv, qk, v, mlp = h.genes.T
    one, ctx = np.ones_like(nh), float(c.decode_context)
    gemms = [(one, d, nh * qk), (one, d, nkv * qk), (one, d, nkv * v), (one, nh * v, d), (one, mlp, d)]
    gemms += [(one, d, mlp)] * (c.mlp_matrices - 1)
    groups = nkv if c.attention_group_gemm else nh
    rows = nh / np.maximum(groups, 1)
    att = [(rows, qk, ctx), (rows, ctx, v)]
    total = sum(_gemm(M, K, N * one, cores, n_mac, wb, c) for M, K, N in gemms)
    return total + sum(groups * _gemm(M, K, N * one, cores, n_mac, wb, c) for M, K, N in att)


def simulate(prof: LayerProfile, h: Homogeneous, n_mac: np.ndarray, cores: np.ndarray, w_core_b: np.ndarray,
             k_core_b: float, parts: list[tuple[int, ...]], prefill: int, k: RingConstants,
             c: LLMForgeConventions) -> dict[str, np.ndarray]:
    """The release's ring metrics for G chip configs of one genome → dict of (G,) arrays."""
    d, (wb, ab, kvb) = prof.d_model, prof.bytes_wak
    nh, nkv, qk, v, _ = h.genes.T
    mat = matrix_cycles(h, d, wb, cores, n_mac, c)
    vec = (nh * c.decode_context + 2 * d) / c.vector_elems_per_cycle
    layer = mat + vec[None] if c.vector_serial else np.maximum(mat, vec[None])
    S = np.array([len(p) for p in parts])
    hop = k.link_latency_cycles + np.ceil(prof.hop_bytes / k.link_bytes_per_cycle)
    decode = layer.sum(1)
    tpot_cyc = decode + (S - (0 if c.tpot_wraparound_hop else 1)) * hop
    stage_macs = np.array([max(h.prompt_macs[a:b].sum() for a, b in zip((0,) + p[:-1], p)) for p in parts])
    prompt = c.prompt_scale * prefill * stage_macs / (cores * n_mac)
    ttft_cyc = decode + prompt + (S * hop if c.ttft_hops else 0.0)
    hops_tpot = S - (0 if c.tpot_wraparound_hop else 1)
    e_layer = (k.mac_pj * h.ops + k.wmem_pj_per_byte * h.w
               + k.kvmem_pj_per_byte * nkv * c.decode_context * (qk + k.v_colwise * v) * kvb
               + k.softmax_pj_per_elem * nh * c.decode_context + k.norm_pj_per_elem * 2 * d)
    e_tok = e_layer.sum() + hops_tpot * prof.hop_bytes * 8 * k.link_pj_per_bit
    nm_cost = n_mac if c.energy_depends_on_n_mac else np.full_like(n_mac, REF_N_MAC)
    per_ms = k.clock_mhz * 1e3
    tpot_ms = tpot_cyc / per_ms
    leak_uj = S * chip_leak_pj_per_cycle(cores, w_core_b, k_core_b, k) * tpot_cyc * 1e-6
    return {"ttft_ms": ttft_cyc / per_ms, "tpot_ms": tpot_ms, "energy_per_token_uj": np.full(len(S), e_tok * 1e-6),
            "prefill_energy_uj": np.full(len(S), prefill * e_tok * 1e-6), "leakage_uj": leak_uj,
            "area_mm2": S * chip_area_mm2(cores, nm_cost, w_core_b, k_core_b, k), "n_chips": S,
            "mac_utilization": h.ops.sum() / (mat.sum(1) * cores * n_mac),
            "power_mw": e_tok * 1e-6 / tpot_ms}


def select(sim: dict[str, np.ndarray], c: LLMForgeConventions) -> tuple[np.ndarray, int]:
    """Index order of the configs inside the envelope: lowest energy, tie-break, grid order; and their count."""
    a, p = sim["area_mm2"], sim["power_mw"]
    ok = np.flatnonzero((a >= c.area_envelope_mm2[0]) & (a <= c.area_envelope_mm2[1])
                        & (p >= c.power_envelope_mw[0]) & (p <= c.power_envelope_mw[1]))
    e = np.round(sim["energy_per_token_uj"][ok], 9)
    tie = sim["leakage_uj"][ok] if c.tie_break == "leakage" else np.zeros(len(ok))
    return ok[np.lexsort((ok, tie, e))], len(ok)
