"""Systolic accelerators (`backend=gemmini|eyeriss|simba|flat|dxe|dxe-relaxed`, or any YAML template):
a Timeloop-like mapper.

Every operator of `forge.lm.workload` becomes a GEMM or an elementwise pass: projections and MLP as
(B·tokens × K)·(K × N); attention score and value per KV group, the R = n_h/n_kv query heads of a
group stacked as rows — score (R·tokens × d_qk)·(d_qk × context), value (R·tokens × context)·(context × d_v),
batch = B·n_kv — so K/V are read once per group. `mapper.map_many` picks the best mapping per
shape; results are cached by (template, mode, shape, operand bytes, on-chip flags), so a population
only maps the shapes it has not seen. TPOT sums every decode step exactly: attention GEMMs are mapped
for each context L_p+1 … L_p+L_d once per (template, head shape) and cached as a sum.

The stable entry point is `map_gemm(template, M, K, N, mode="overlapped"|"scalesim")`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from backends.interface import BackendError, CostTable, Workload, as_population
from backends.gpu.roofline import RooflineBackend
from backends.systolic.gemm import clear_cache, map_gemm  # noqa: F401  (re-exported entry points)
from backends.systolic.conventions import resolve
from backends.systolic.mapper import MODES
from backends.systolic.phase import evaluate_chunk
from backends.systolic.template import Template, make_template
from forge.spaces.arrays import PopArrays


class SystolicBackend:
    """A template + mapper mode + counting conventions (physical | llmforge, see `conventions`); `evaluate` costs
    a population (prefill, decode sum, energy)."""

    def __init__(self, template: Any, mode: str = "overlapped", precision: dict | None = None,
                 name: str | None = None, breakdown_max: int = 32, chunk: int = 512,
                 conventions: str = "physical", llmforge: dict | None = None) -> None:
        if mode not in MODES:
            raise BackendError(f"backend.mode = {mode!r} is unknown; allowed: {', '.join(MODES)}")
        self.conventions = conventions
        self.counting, self.t = resolve(conventions, llmforge, make_template(template))
        self.name, self.mode = name or self.t.name, mode
        p = dict(precision or {})
        self.default_bits = (int(p.get("weight_bits", 8)), int(p.get("act_bits", 8)), int(p.get("kv_bits", 8)))
        self.breakdown_max, self.chunk = int(breakdown_max), int(chunk)

    def evaluate(self, genomes: Sequence[Any] | PopArrays, workload: Workload | None = None) -> CostTable:
        pop = as_population(genomes)
        if workload is None:  # the backend's own default precision
            workload = Workload(**dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits)))
        parts = [evaluate_chunk(self, RooflineBackend.compact(pop.take(np.arange(s, min(s + self.chunk, pop.P)))), workload)
                 for s in range(0, pop.P, self.chunk)]
        cat = lambda k: np.concatenate([p[k] for p in parts])  # noqa: E731
        n = pop.P
        extras = [e for p in parts for e in p["extras"]]
        return CostTable(cat("ttft_ms"), cat("tpot_ms"), cat("energy_per_token_uj"), np.ones(n, bool), [""] * n, extras)
