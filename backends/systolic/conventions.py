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
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from backends.interface import BackendError
from backends.systolic.template import Template, make_template

CONVENTIONS = ("physical", "llmforge")
DECODE_CONTEXT = ("exact", "decode_len")
TEMPLATE_FIELDS = ("spatial", "dataflows", "dram_write_bytes_per_cycle")


@dataclass(frozen=True)
class Counting:
    """What one evaluation counts (the physical defaults)."""

    mlp_gate: bool = True
    head_ops: bool = True
    elementwise_latency: bool = True
    decode_context: str = "exact"
    report_clock_ghz: float | None = None


LLMFORGE = {"mlp_gate": False, "head_ops": False, "elementwise_latency": False, "decode_context": "decode_len",
            "report_clock_ghz": 1.0, "spatial": "divisor"}


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
    over.setdefault("dram_write_bytes_per_cycle", t.dram_bytes_per_cycle)  # every release DRAM: write = read bandwidth
    tmpl = {k: (tuple(v) if k == "dataflows" else v) for k, v in over.items() if k in TEMPLATE_FIELDS}
    t = make_template({**_as_dict(t), **tmpl})  # re-validated, e.g. a bad `spatial`
    return Counting(**{k: v for k, v in over.items() if k not in TEMPLATE_FIELDS}), t


def _as_dict(t: Template) -> dict[str, Any]:
    d = {f.name: getattr(t, f.name) for f in fields(t)}
    d["buffers"] = [{f.name: getattr(b, f.name) for f in fields(b)} for b in t.buffers]
    d["resident"] = {k: {"bytes": n, "read_pj_per_byte": pj} for k, n, pj in t.resident}
    return d

