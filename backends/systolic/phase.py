"""Population evaluation for the systolic backends: operators → mapper rows → per-genome costs.

Per chunk of genomes: residency (do the weights / the KV cache fit the template's resident memories?),
prefill (one pass of L_p tokens), decode (non-attention operators × L_d; attention GEMMs summed over
every context by `sweep_costs`; softmax, whose elements and bytes are both ∝ context, summed in closed
form), and the LM head. Elementwise operators run on a vector unit of `vector_lanes` elements/cycle.
Operand widths of every mapper row are each genome's own W/A/KV bytes (`genome_bytes`: its precision
genes, else the workload's), so a population mixing formats maps each at its own width; the bytes are
part of the cached row key, so the shape cache still maps each (shape, widths) once.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from backends.interface import Workload
from backends.gpu.roofline import ALL_OPS
from backends.systolic.gemm import BIT, NCOL, gemm_costs, map_gemm, pad_to, sweep_costs
from backends.systolic.fusion import compulsory, fusion_savings, sweep_traffic
from forge.spaces.arrays import PopArrays
from forge.lm.workload import (ELEM_J, GEMM_J, OP_NAMES, OpTable, attended_keys, genome_bytes, head_ops, kv_cache_bytes,
                            layer_ops, layer_windows, sum_capped_steps, window_steps)

SCORE_J, VALUE_J, SOFTMAX_J = OP_NAMES.index("attn_score"), OP_NAMES.index("attn_value"), OP_NAMES.index("softmax")


def _scatter(shape: tuple, idx: tuple, vals: np.ndarray, scale: Any = 1.0) -> list[np.ndarray]:
    out = [np.zeros(shape) for _ in range(NCOL)]
    for i in range(NCOL):
        out[i][idx] = vals[:, i] * scale
    return out


def _gemms(b, tab: OpTable, gb: tuple, w_res: np.ndarray) -> list[np.ndarray]:
    """Projections and MLP GEMMs of every (genome, layer); operand widths are each genome's own bytes."""
    t, shape = b.t, tab.flops.shape
    mask = np.zeros(shape, bool)
    mask[:, :, GEMM_J] = tab.flops[:, :, GEMM_J] > 0
    idx = np.nonzero(mask)
    on = (BIT["input"] | BIT["output"]) if t.activations_on_chip else 0
    wb, ab, _ = (x[idx[0]] for x in gb)
    rows = np.column_stack([tab.M[idx], tab.K[idx], pad_to(tab.N[idx], b.counting.pad_d), ab, wb, ab,
                            np.full(len(wb), on), w_res[idx[0]].astype(float)])
    vals = gemm_costs(t, b.mode, rows)
    if b.counting.fusion and b.counting.fusion_traffic == "compulsory":
        vals = compulsory(vals, rows[:, 0] * rows[:, 1] * ab, rows[:, 0] * rows[:, 2] * ab)
    return _scatter(shape, idx, vals)


def _attention(b, pop: PopArrays, tab: OpTable, gb: tuple, kv_res: np.ndarray, batch: int, sweep: tuple | None):
    """Score and value GEMMs per KV group (R query heads stacked as rows), batch = B·n_kv. attention_rows=heads
    (the release): R = n_h // n_kv rows whatever the tokens (hw_exp.py evaluate_layer, Op 2/3)."""
    t, shape, heads = b.t, tab.flops.shape, b.counting.attention_rows == "heads"
    att = np.nonzero(tab.flops[:, :, SCORE_J] > 0)
    R = np.floor(pop.n_h[att] / pop.n_kv[att]) if heads else np.ceil(pop.n_h[att] / pop.n_kv[att])
    bkv = batch * pop.n_kv[att].astype(float)
    res = np.where(kv_res[att[0]], 2.0, 0.0)
    on_chip_act = t.activations_on_chip
    _, ab, kvb = (x[att[0]] for x in gb)
    win = layer_windows(pop)
    win = None if win is None else win[att].astype(float)  # sliding windows: a 9th sweep column
    out = [np.zeros(shape) for _ in range(NCOL)]
    for j, kind in ((SCORE_J, 0), (VALUE_J, 1)):
        fused = BIT["output"] if kind == 0 else BIT["input"]
        on = (fused if t.fused_attention else 0) | ((BIT["input"] | BIT["output"]) if on_chip_act else 0)
        n = len(R)
        common = [ab, kvb, ab, np.full(n, float(on)), res]
        if sweep is None:
            M = R if heads else tab.M[att + (j,)] * R
            rows = np.column_stack([M, tab.K[att + (j,)], pad_to(tab.N[att + (j,)], b.counting.pad_d)] + common)
            vals = gemm_costs(t, b.mode, rows)
            io = (M * rows[:, 1], M * rows[:, 2])
        else:
            d = pop.d_qk[att] if kind == 0 else pop.d_v[att]
            extra = [win] if win is not None else []
            rows = np.column_stack([np.full(n, float(kind)), R, d.astype(float)] + common + extra)
            vals = sweep_costs(t, b.mode, rows, *sweep, pad=b.counting.pad_d)
            io = sweep_traffic(kind, R, d.astype(float), *sweep, b.counting.pad_d, window=win)
        if b.counting.fusion and b.counting.fusion_traffic == "compulsory":
            vals = compulsory(vals, io[0] * ab, io[1] * ab)
        for i in range(NCOL):
            out[i][att + (j,)] = vals[:, i] * bkv
    return out


def _elementwise(b, tab: OpTable, w_res: np.ndarray, scale: float = 1.0, softmax_scale: float = 1.0):
    """Norms, softmax and activation on the vector unit; bytes from the workload analyzer."""
    t = b.t
    el = tab.M[:, :, ELEM_J]
    wbytes = np.where(w_res[:, None, None], 0.0, tab.weight_bytes[:, :, ELEM_J])
    abytes = 0.0 * el if t.activations_on_chip else tab.act_bytes[:, :, ELEM_J]
    if t.fused_attention:
        abytes = abytes.copy()
        abytes[:, :, ELEM_J.index(SOFTMAX_J)] = 0.0
    dram = wbytes + abytes
    cyc = np.maximum(el / t.vector_lanes, dram / t.dram_bytes_per_cycle)
    en = el * t.vector_pj + dram * t.dram_pj_per_byte + cyc * t.leak_pj_per_cycle
    cyc = cyc * float(b.counting.elementwise_latency)  # llmforge: no latency (run.py)
    en = en * float(b.counting.elementwise_energy)  # llmforge: nor energy (hw_exp.py evaluate_layer: GEMMs only)
    sc = np.full(tab.flops.shape[:2] + (len(ELEM_J),), float(scale))
    sc[:, :, ELEM_J.index(SOFTMAX_J)] = softmax_scale  # a scalar, or (P, L) under sliding windows
    out = [np.zeros(tab.flops.shape) for _ in range(3)]
    for i, v in enumerate((cyc, en, dram)):
        out[i][:, :, ELEM_J] = v * sc
    return out


def _head(b, head: OpTable, gb: tuple, w_res: np.ndarray) -> list[np.ndarray]:
    """embed (a gather), final norm (vector unit) and the LM head GEMM → (P, 3) each."""
    t, P = b.t, head.flops.shape[0]
    on = (BIT["input"] | BIT["output"]) if t.activations_on_chip else 0
    lm = head.names.index("lm_head")
    wb, ab, _ = gb
    rows = np.column_stack([head.M[:, 0, lm], head.K[:, 0, lm], pad_to(head.N[:, 0, lm], b.counting.pad_d), ab, wb, ab,
                            np.full(P, on), w_res * 1.0])
    g = gemm_costs(t, b.mode, rows)
    out = [np.zeros((P, 3)) for _ in range(3)]
    for k, name in enumerate(("embed", "final_norm")):
        j = head.names.index(name)
        el = np.where(name == "embed", head.weight_bytes[:, 0, j] / np.maximum(wb, 1e-9), head.M[:, 0, j])
        dram = np.where(w_res, 0.0, head.weight_bytes[:, 0, j]) + (0.0 if t.activations_on_chip else head.act_bytes[:, 0, j])
        cyc = np.maximum(el / t.vector_lanes, dram / t.dram_bytes_per_cycle)
        for i, v in enumerate((cyc, el * t.vector_pj + dram * t.dram_pj_per_byte + cyc * t.leak_pj_per_cycle, dram)):
            out[i][:, k] = v
    for i in range(3):
        out[i][:, 2] = g[:, i]
    return out


def _phase(b, pop, tab, head, gb, w_res, kv_res, batch, n_steps=1, sweep=None, softmax_scale=1.0, att_scale=1.0):
    """Per-op cycles, energy pJ, DRAM bytes (each (P, O + 3)) and the fusion savings (cycles, pJ; each (P,))."""
    g, a = _gemms(b, tab, gb, w_res), _attention(b, pop, tab, gb, kv_res, batch, sweep)
    e = _elementwise(b, tab, w_res, scale=n_steps, softmax_scale=softmax_scale)
    h = _head(b, head, gb, w_res)
    per_op = []
    for i in range(3):
        lay = g[i] * n_steps + a[i] * att_scale + e[i]
        per_op.append(np.concatenate([lay.sum(axis=1), h[i] * n_steps * float(b.counting.head_ops)], axis=1))
    saved = (np.zeros(pop.P), np.zeros(pop.P))
    if b.counting.fusion:  # per step (attention summed over `steps` contexts), × steps
        steps = 1 if sweep is None else sweep[1] - sweep[0] + 1
        cyc, en = fusion_savings(b.t, pop, [gi + ai / steps for gi, ai in zip(g, a)])
        saved = (cyc.sum(axis=1) * n_steps, en.sum(axis=1) * n_steps)
    return per_op, saved


def _mappings(b, tab: OpTable, gb: tuple, i: int, w_res: bool) -> dict[str, dict]:
    """The selected mapping of each projection/MLP GEMM of genome i's first active layer (prefill)."""

    layer = int(np.argmax(tab.flops[i].sum(axis=1) > 0))
    on = ("input", "output") if b.t.activations_on_chip else ()
    out = {}
    for j in GEMM_J:
        if tab.flops[i, layer, j] > 0:
            c = map_gemm(b.t, tab.M[i, layer, j], tab.K[i, layer, j], tab.N[i, layer, j], b.mode,
                         a_bytes=gb[1][i], w_bytes=gb[0][i], o_bytes=gb[1][i], on_chip=on,
                         resident="weight" if w_res else None)
            out[OP_NAMES[j]] = {**c.mapping, "utilization": round(c.utilization, 4)}
    return out


def _drop_gate(*tabs: OpTable) -> None:
    """llmforge: a 2-matrix MLP (FF1, FF2), the SwiGLU gate not costed."""
    j = OP_NAMES.index("mlp_gate")
    for tab in tabs:
        for f in ("flops", "M", "weight_bytes", "act_bytes"):
            getattr(tab, f)[:, :, j] = 0.0


def _fuse_qk(*tabs: OpTable) -> None:
    """llmforge: Q and K projections as one GEMM QK_gen of D = (n_h + n_kv)·d_qk (hw_exp.py Op 0)."""
    q, k = OP_NAMES.index("q_proj"), OP_NAMES.index("k_proj")
    for tab in tabs:
        tab.N[:, :, q] += tab.N[:, :, k]
        for f in ("flops", "weight_bytes"):  # k's KV-cache writes stay: they size the cache
            getattr(tab, f)[:, :, q] += getattr(tab, f)[:, :, k]
            getattr(tab, f)[:, :, k] = 0.0
        tab.M[:, :, k] = 0.0


def evaluate_chunk(b, pop: PopArrays, wl: Workload) -> dict[str, Any]:
    prec, B, Lp, n, cnt = wl.precision, wl.batch, wl.prefill, wl.decode, b.counting
    t, lo, hi = b.t, Lp + 1, Lp + n
    if cnt.decode_context == "decode_len":  # every step at context L_d (hw_timeloop.py: block_size = decode_len)
        lo = hi = n
    pre, dec = layer_ops(pop, Lp, Lp, B, prec), layer_ops(pop, 1, lo, B, prec)
    if not cnt.mlp_gate:
        _drop_gate(pre, dec)
    if cnt.qk_fused:
        _fuse_qk(pre, dec)
    hp, hd = head_ops(pop, Lp, 1, B, prec), head_ops(pop, 1, 1, B, prec)
    weights = pre.total("weight_bytes") + hp.op("lm_head")["weight_bytes"][:, 0]
    windows = layer_windows(pop) is not None
    kv_total = kv_cache_bytes(pop, Lp + n, B, prec) if windows else dec.total("kv_write_bytes") * (Lp + n)
    w_res = (weights <= t.resident_bytes("weight")) & (t.resident_bytes("weight") > 0)
    kv_res = (kv_total <= t.resident_bytes("kv")) & (t.resident_bytes("kv") > 0)
    gb = tuple(x[:, 0] for x in genome_bytes(pop, prec))  # (P,) W/A/KV bytes: the genome's, else the workload's
    (p_cyc, p_en, p_dr), (p_fc, p_fe) = _phase(b, pop, pre, hp, gb, w_res, kv_res, B)
    ctx_sum = (lo + hi) * n / 2.0  # Σ c: softmax elements and bytes are ∝ context
    soft = ctx_sum / lo
    if windows and hi > lo:  # Σ_c min(w, c) / min(w, lo) per layer (the table is at context lo)
        k0 = np.broadcast_to(attended_keys(pop, lo), (pop.P, pop.L))
        soft = (n * k0 + sum_capped_steps(window_steps(pop, lo), n)) / np.where(k0 > 0, k0, 1.0)
    (d_cyc, d_en, d_dr), (d_fc, d_fe) = _phase(b, pop, dec, hd, gb, w_res, kv_res, B, n_steps=n, sweep=(lo, hi),
                                               softmax_scale=soft, att_scale=n / (hi - lo + 1))
    hz = (cnt.report_clock_ghz or t.clock_ghz) * 1e9
    ttft, tpot = (p_cyc.sum(axis=1) - p_fc) / hz * 1e3, (d_cyc.sum(axis=1) - d_fc) / hz / n * 1e3
    energy = (p_en.sum(axis=1) + d_en.sum(axis=1) - p_fe - d_fe) * 1e-6 / (B * (Lp + n))  # pJ → µJ per token
    extras = [{"template": t.name, "mode": b.mode, "conventions": b.conventions, "area_mm2": t.area_mm2,
               "weights_resident": bool(w_res[i]),
               "kv_resident": bool(kv_res[i]), "decode_dram_mb_per_token": float(d_dr[i].sum() / n / 1e6),
               **({"fusion_saved": {"ttft_ms": float(p_fc[i] / hz * 1e3), "tpot_ms": float(d_fc[i] / hz / n * 1e3),
                                    "energy_uj": float((p_fe[i] + d_fe[i]) * 1e-6)}} if cnt.fusion else {})}
              for i in range(pop.P)]
    if pop.P <= b.breakdown_max:
        for i, e in enumerate(extras):
            e["prefill_mappings"] = _mappings(b, pre, gb, i, bool(w_res[i]))
            e["ttft_ops_ms"] = {k: float(v / hz * 1e3) for k, v in zip(ALL_OPS, p_cyc[i]) if v > 0}
            e["tpot_ops_ms"] = {k: float(v / hz / n * 1e3) for k, v in zip(ALL_OPS, d_cyc[i]) if v > 0}
    return {"ttft_ms": ttft, "tpot_ms": tpot, "energy_per_token_uj": energy, "extras": extras}
