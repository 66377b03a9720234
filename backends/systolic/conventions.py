"""Counting conventions of the systolic backends: `physical` (ours) or `llmforge` (the LLMForge release's pipeline).

The release costs a model with Timeloop on each substrate and aggregates it in `evaluators/hw_timeloop.py`
(../shared/reference/llmforge-release). Where it counts differently from the physical model, `llmforge`
follows it; every difference is its own field so a user sees (and can undo) each one, e.g.
`backend.conventions=llmforge backend.llmforge.head_ops=true`:

    mlp_gate             cost the SwiGLU gate GEMM. Release: no — its matmuls are KQV, KTQ, VScores, Out, FF1, FF2
                         (hw_eval/run.py `matmuls`), a 2-matrix MLP.
    head_ops             cost the embedding, final norm and LM head. Release: no — none is among those matmuls.
    elementwise_latency  norms, softmax and the MLP activation take vector-unit cycles. Release: no — its
                         normalization ops are costed for energy only (run.py: "only energy is a valid estimate").
    decode_context       exact: each decode step attends to its own context L_p+1 … L_p+L_d | decode_len: every step
                         at context L_d (hw_timeloop.py runs the decode pass with block_size = decode_len).
    report_clock_ghz     clock for cycles → ms; null = the template's. Release: 1 GHz for every substrate
                         (hw_timeloop.py: ttft = cycles / 1e9, also for DXE's 200 MHz).
    spatial              ceil | divisor (template field). Release: divisor — Timeloop's 'uber' mapspace (run.py)
                         factorizes dimensions exactly; hw_timeloop.py notes shapes that do not tile fail to map.
    dataflows            the template's allowed spatial mappings, as the release's constraints YAML fixes them.
    dram_write_bytes_per_cycle  (template field) DRAM writes on their own channel. Release: yes — Timeloop's
                         DRAM has read_bandwidth and write_bandwidth each (a half-duplex LPDDR4 bus shares one).

The per-layer driver `hw_exp.py` (`evaluate_layer`, `compute_fusion_savings`, `_pad_D_for_arch`, `ARCH_CONFIGS`):

    qk_fused             Q and K projections as one GEMM of D = (n_h + n_kv)·d_qk, V as its own (hw_exp.py:462
                         Op 0 QK_gen, :466 Op 1 V_gen). Physical: q, k, v as three GEMMs.
    attention_rows       tokens | heads: rows of the score and value GEMMs. Release: heads — Op 2/3 run with
                         seq_length = n_head // n_kv_groups in prefill as in decode (hw_exp.py:470, :475; the
                         prompt length is the context only), × n_kv_groups (:500). Not physical: prefill
                         attention has R·L_p rows; projections have L = prompt (proj_seq, :457).
    fusion               subtract the inter-operator fusion savings: per edge QK_gen→QK_attn, V_gen→PV_attn,
                         QK_attn→PV_attn, PV_attn→ATTN_proj, ATTN_proj→FC1, FC1→FC2 (FC1→FC2 only on a layer
                         without attention) the producer's DRAM output writes / write bw + (its output reads +
                         the consumer's DRAM input reads) / read bw in cycles, and their DRAM energy, × the
                         larger endpoint scale (n_kv on edges touching attention); energy capped at 90% of the
                         layer's; a layer's cycles floored at 0 (hw_exp.py:352 _estimate_saved_cycles, :368
                         compute_fusion_savings, :418 edge_scale, :424 cap, :516/:559 edges, :538 floor;
                         evaluate_layer fused=True on every substrate). Not physical:
                         DRAM time is subtracted from compute-bound GEMMs too.
    fusion_traffic       compulsory | mapper: the DRAM traffic those savings count. Release: Timeloop's stats of its
                         mapping; we default to compulsory (outputs written once, inputs read once), which
                         reproduces the TTFT ratio reported against its outputs on gemmini and eyeriss, where
                         our mapper's re-reads would not (backends/systolic/fusion.py). On simba and flat it is
                         also the least-traffic mapping the release's constraints allow for every prefill GEMM
                         of SmolLM2-135M and Gemma-3-270M (DRAM loop order simba/constraints.yaml:17, flat_edge/
                         constraints.yaml:19; backends/systolic/mapspace.py); their remaining TTFT gap to the
                         release is the mapping its search returned (docs/concepts/fidelity.md, issue 29).
    elementwise_energy   norms, softmax and activation carry energy. Release: no — evaluate_layer (hw_exp.py:434)
                         costs GEMMs only (no norms, softmax, activation, embedding or LM head energy).
    pad_d                round a GEMM's output dim D up to a multiple of pad_d when D > pad_d and ragged, inside
                         the problem (padded weights are read, padded outputs written): hw_exp.py:190
                         `_pad_D_for_arch`, d_axis_spatial = 128 on the DXE variants (:129-167), 0 elsewhere.
    rank                 (template field) the mapper's objective. Release: edp (hw_eval/mapper/mapper.yaml:6
                         `optimization_metrics: [edp, delay, energy]`, same in every substrate's mapper.yaml).
    buffers              (template field) the buffers of the architecture file ARCH_CONFIGS really loads
                         (gemmini: hw_exp.py:72 loads hw_eval/arch/system_gemmini.yaml, not gemmini/arch.yaml).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from backends.interface import BackendError
from backends.systolic.fusion import TRAFFIC
from backends.systolic.template import Template, make_template

CONVENTIONS = ("physical", "llmforge")
DECODE_CONTEXT = ("exact", "decode_len")
TEMPLATE_FIELDS = ("spatial", "dataflows", "dram_write_bytes_per_cycle", "rank", "buffers")
ATTENTION_ROWS = ("tokens", "heads")


@dataclass(frozen=True)
class Counting:
    """What one evaluation counts (the physical defaults)."""

    mlp_gate: bool = True
    head_ops: bool = True
    elementwise_latency: bool = True
    decode_context: str = "exact"
    report_clock_ghz: float | None = None
    qk_fused: bool = False
    attention_rows: str = "tokens"
    fusion: bool = False
    fusion_traffic: str = "compulsory"
    elementwise_energy: bool = True
    pad_d: int = 0


LLMFORGE = {"mlp_gate": False, "head_ops": False, "elementwise_latency": False, "decode_context": "decode_len",
            "report_clock_ghz": 1.0, "spatial": "divisor", "qk_fused": True, "attention_rows": "heads",
            "fusion": True, "fusion_traffic": "compulsory", "elementwise_energy": False, "pad_d": 0, "rank": "edp"}


def resolve(conventions: str, llmforge: dict | None, t: Template) -> tuple[Counting, Template]:
    """(counting, template) for a conventions name and its llmforge overrides."""
    if conventions not in CONVENTIONS:
        raise BackendError(f"backend.conventions = {conventions!r} is unknown; allowed: {', '.join(CONVENTIONS)}")
    over = {**LLMFORGE, **dict(llmforge or {})}
    allowed = [f.name for f in fields(Counting)] + list(TEMPLATE_FIELDS)
    bad = sorted(set(over) - set(allowed))
    if bad:
        raise BackendError(f"backend.llmforge.{bad[0]} is unknown; allowed: {', '.join(allowed)}")
    if conventions == "physical":
        return Counting(), t
    if over["decode_context"] not in DECODE_CONTEXT:
        raise BackendError(f"backend.llmforge.decode_context = {over['decode_context']!r} is invalid; "
                           f"allowed: {', '.join(DECODE_CONTEXT)}")
    if (over["attention_rows"] not in ATTENTION_ROWS or over["fusion_traffic"] not in TRAFFIC
            or not (isinstance(over["pad_d"], int) and over["pad_d"] >= 0)):
        raise BackendError(f"backend.llmforge attention_rows = {over['attention_rows']!r}, fusion_traffic = "
                           f"{over['fusion_traffic']!r}, pad_d = {over['pad_d']!r}; allowed: attention_rows "
                           f"{' | '.join(ATTENTION_ROWS)}, fusion_traffic {' | '.join(TRAFFIC)}, pad_d an integer >= 0")
    over.setdefault("dram_write_bytes_per_cycle", t.dram_bytes_per_cycle)  # every release DRAM: write = read bandwidth
    tmpl = {k: (tuple(v) if k == "dataflows" else v) for k, v in over.items() if k in TEMPLATE_FIELDS and v is not None}
    t = make_template({**_as_dict(t), **tmpl})  # re-validated, e.g. a bad `spatial`
    return Counting(**{k: v for k, v in over.items() if k not in TEMPLATE_FIELDS}), t


def _as_dict(t: Template) -> dict[str, Any]:
    d = {f.name: getattr(t, f.name) for f in fields(t)}
    d["buffers"] = [{f.name: getattr(b, f.name) for f in fields(b)} for b in t.buffers]
    d["resident"] = {k: {"bytes": n, "read_pj_per_byte": pj} for k, n, pj in t.resident}
    return d

