"""The release's inter-operator fusion savings (`backend.llmforge.fusion`), per (genome, layer).

LLMForge's per-layer driver (../shared/reference/llmforge-release/hw_exp.py, `evaluate_layer` with its default
`fused=True`, on every substrate) sums the GEMMs of a layer and then subtracts, for each producer → consumer
edge whose intermediate stays on chip, what `_estimate_saved_cycles` and `compute_fusion_savings` say:

    cycles  = producer DRAM output writes / write bw + (producer DRAM output reads + consumer DRAM input reads) / read bw
    energy  = producer DRAM output energy + consumer DRAM input energy

each × the larger of the two endpoints' scale factors (n_kv_groups for QK_attn and PV_attn, else 1: "use the
max scale since both endpoints contribute", so an edge touching attention counts its projection's traffic
n_kv times). Energy savings are capped at 90% of the layer's GEMM energy and the layer's cycles floored at 0.
Edges (attention layers): QK_gen→QK_attn, V_gen→PV_attn, QK_attn→PV_attn, PV_attn→ATTN_proj, ATTN_proj→FC1,
FC1→FC2; a layer without attention only FC1→FC2. Here QK_gen is `q_proj` (with `qk_fused`; an unfused
`k_proj` feeds QK_attn too), V_gen `v_proj`, QK_attn/PV_attn `attn_score`/`attn_value`, ATTN_proj `o_proj`,
FC1/FC2 `mlp_up`/`mlp_down`. Timeloop counts words; with 8-bit data (the release's) a word is a byte.

Which traffic (`backend.llmforge.fusion_traffic`): `compulsory` (default) — each producer writes its L × D
outputs once and each consumer reads its L × E inputs once; `mapper` — the DRAM traffic of the mapping our
mapper picked, as the driver takes Timeloop's stats. With compulsory traffic the savings reproduce the TTFT
ratio the issue reports against the release's outputs on gemmini and eyeriss (1.37 and 1.41); our mapper's
re-reads (eyeriss's 128 KB buffer, gemmini's FC2) and FLAT's partial-sum spills would subtract more, and those
depend on its tile menu rather than on anything the release fixes (the release's FLAT loop order, E innermost at
DRAM, never spills partial sums: backends/systolic/mapspace.py).
"""
from __future__ import annotations

import numpy as np

from backends.systolic.gemm import pad_to
from backends.systolic.template import Template
from forge.spaces.arrays import PopArrays
from forge.lm.workload import OP_NAMES

_J = {n: OP_NAMES.index(n) for n in OP_NAMES}
EDGES = (("q_proj", "attn_score"), ("k_proj", "attn_score"), ("v_proj", "attn_value"), ("attn_score", "attn_value"),
         ("attn_value", "o_proj"), ("o_proj", "mlp_up"), ("mlp_up", "mlp_down"))
SCALED = ("attn_score", "attn_value")  # hw_exp.py: scale_factors = {2: n_kv_groups, 3: n_kv_groups}
CYC, EN, IN_RD, OUT_WR, OUT_RD = 0, 1, 3, 4, 5  # columns of backends.systolic.gemm.COLS
TRAFFIC = ("compulsory", "mapper")


def sweep_traffic(kind: int, R: np.ndarray, d: np.ndarray, lo: int, hi: int, pad: int,
                  window: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Compulsory input and output elements of decode attention summed over contexts lo…hi: score (R × d)·(d × c)
    (kind 0) or value (R × c)·(c × d) (kind 1), output dims padded as `pad_to` does; with per-row `window`
    (0 = full) a row attends min(window, c) keys."""
    ctx = np.arange(lo, hi + 1, dtype=float)
    if window is not None and np.any(window > 0):
        keys = np.where(window[:, None] > 0, np.minimum(ctx[None, :], window[:, None]), ctx[None, :])
        if kind == 0:
            return R * d * len(ctx), R * pad_to(keys, pad).sum(axis=1)
        return R * keys.sum(axis=1), R * pad_to(d, pad) * len(ctx)
    if kind == 0:
        return R * d * len(ctx), R * pad_to(ctx, pad).sum()
    return R * ctx.sum(), R * pad_to(d, pad) * len(ctx)


def compulsory(vals: np.ndarray, in_bytes: np.ndarray, out_bytes: np.ndarray) -> np.ndarray:
    """Mapper rows (n, NCOL) with their DRAM split replaced by compulsory traffic: inputs read once, outputs
    written once, no partial sums read back."""
    vals = vals.copy()
    vals[:, IN_RD], vals[:, OUT_WR], vals[:, OUT_RD] = in_bytes, out_bytes, 0.0
    return vals


def fusion_savings(t: Template, pop: PopArrays, ops: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, energy pJ) saved per (genome, layer) of one pass; `ops` are the gemm.COLS arrays (P, L, O),
    attention already multiplied by its KV groups (as hw_exp.py multiplies Op 2/3 before aggregating)."""
    kv = np.maximum(pop.n_kv, 1).astype(float)
    att = pop.attn.astype(float)
    rbw = t.dram_bytes_per_cycle
    wbw = t.dram_write_bytes_per_cycle or rbw

    def unscaled(name: str, col: int) -> np.ndarray:
        v = ops[col][:, :, _J[name]]
        return v / kv if name in SCALED else v

    cyc = np.zeros(kv.shape)
    en = np.zeros(kv.shape)
    for prod, cons in EDGES:
        scale = kv if (prod in SCALED or cons in SCALED) else 1.0
        mask = att if prod != "mlp_up" else 1.0  # a layer without attention keeps FC1 → FC2 only
        wr, rd = unscaled(prod, OUT_WR), unscaled(prod, OUT_RD) + unscaled(cons, IN_RD)
        cyc += (wr / wbw + rd / rbw) * scale * mask
        en += (wr + rd) * t.dram_pj_per_byte * scale * mask
    gemm = [_J[n] for n in dict.fromkeys(sum(EDGES, ()))] + [_J["mlp_gate"]]
    total_cyc = ops[CYC][:, :, gemm].sum(axis=2)
    total_en = ops[EN][:, :, gemm].sum(axis=2)
    return np.minimum(cyc, total_cyc), np.minimum(en, 0.9 * total_en)
