"""Systolic accelerators (`backend=gemmini|eyeriss|flat|dxe`, or any YAML template): a Timeloop-like mapper.

Every operator of `forge.workload` becomes a GEMM or an elementwise pass: projections and MLP as
(B·tokens × K)·(K × N); attention score and value per KV group, the R = n_h/n_kv query heads of a
group stacked as rows — score (R·tokens × d_qk)·(d_qk × context), value (R·tokens × context)·(context × d_v),
batch = B·n_kv — so K/V are read once per group. `systolic_map.map_many` picks the best mapping per
shape; results are cached by (template, mode, shape, operand bytes, on-chip flags), so a population
only maps the shapes it has not seen. TPOT sums every decode step exactly: attention GEMMs are mapped
for each context L_p+1 … L_p+L_d once per (template, head shape) and cached as a sum.

The stable entry point is `map_gemm(template, M, K, N, mode="overlapped"|"scalesim")`.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from backends.interface import BackendError, CostTable, Workload, as_population
from backends.roofline import RooflineBackend
from backends.systolic_map import MODES, GemmCost, cost_from_row, map_many
from backends.systolic_template import Template, make_template
from forge.arrays import PopArrays

BIT = {"input": 1, "weight": 2, "output": 4}
RESIDENT = (None, "weight", "kv")
_CACHE: dict[tuple, dict[tuple, tuple]] = {}


def _flags(code: float) -> frozenset:
    return frozenset(k for k, b in BIT.items() if int(code) & b)


def map_gemm(template: Any, M: int, K: int, N: int, mode: str = "overlapped", batch: int = 1,
             a_bytes: float = 1.0, w_bytes: float = 1.0, o_bytes: float = 1.0,
             on_chip: Sequence[str] = (), resident: str | None = None) -> GemmCost:
    """Best mapping of `batch` GEMMs (M×K)·(K×N) on a template (a conf/backend name or a config/Template)."""
    t = make_template(template)
    bad = sorted(set(on_chip) - set(BIT))
    if bad or resident not in RESIDENT:
        raise BackendError(f"map_gemm: on_chip={list(on_chip)!r}, resident={resident!r}; "
                           f"allowed: on_chip ⊂ {list(BIT)}, resident in {list(RESIDENT)}")
    return _map_cached(t, int(M), int(K), int(N), mode, int(batch), float(a_bytes), float(w_bytes),
                       float(o_bytes), frozenset(on_chip), resident)


@lru_cache(maxsize=65536)
def _map_cached(t: Template, M, K, N, mode, batch, a_b, w_b, o_b, on_chip, resident) -> GemmCost:
    return cost_from_row(map_many(t, M, K, N, a_b, w_b, o_b, on_chip, resident, mode), 0, batch)


def gemm_costs(t: Template, mode: str, rows: np.ndarray) -> np.ndarray:
    """rows (n, 8) = M, K, N, a_b, w_b, o_b, on-chip bits, resident code → (n, 3) cycles, energy pJ, DRAM bytes."""
    cache = _CACHE.setdefault((t, mode, "gemm"), {})
    if len(rows) == 0:
        return np.zeros((0, 3))
    uniq, inv = np.unique(rows, axis=0, return_inverse=True)
    vals = np.array([cache.get(k, (np.nan,) * 3) for k in map(tuple, uniq.tolist())], dtype=float).reshape(-1, 3)
    miss = np.flatnonzero(np.isnan(vals[:, 0]))
    if len(miss):
        groups, ginv = np.unique(uniq[miss, 3:], axis=0, return_inverse=True)
        for g, flags in enumerate(groups):
            idx = miss[ginv.ravel() == g]
            u = uniq[idx]
            r = map_many(t, u[:, 0], u[:, 1], u[:, 2], *flags[:3], _flags(flags[3]), RESIDENT[int(flags[4])], mode)
            vals[idx] = np.stack([r["cycles"], r["energy"], r["dram"]], axis=1)
        cache.update(zip(map(tuple, uniq[miss].tolist()), map(tuple, vals[miss].tolist())))
    return vals[inv.ravel()]


def sweep_costs(t: Template, mode: str, rows: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Decode attention summed over contexts lo…hi. rows (n, 8) = kind (0 score, 1 value), R, d, bytes, flags."""
    cache = _CACHE.setdefault((t, mode, "sweep", lo, hi), {})
    if len(rows) == 0:
        return np.zeros((0, 3))
    uniq, inv = np.unique(rows, axis=0, return_inverse=True)
    vals = np.empty((len(uniq), 3))
    ctx = np.arange(lo, hi + 1, dtype=float)
    for i, key in enumerate(map(tuple, uniq.tolist())):
        if key not in cache:
            kind, R, d = key[:3]
            M, fixed = np.full_like(ctx, R), np.full_like(ctx, d)
            K, N = (fixed, ctx) if kind == 0 else (ctx, fixed)
            r = map_many(t, M, K, N, *key[3:6], _flags(key[6]), RESIDENT[int(key[7])], mode)
            cache[key] = (r["cycles"].sum(), r["energy"].sum(), r["dram"].sum())
        vals[i] = cache[key]
    return vals[inv.ravel()]


def clear_cache() -> None:
    _CACHE.clear()
    _map_cached.cache_clear()


class SystolicBackend:
    """A template + mapper mode; `evaluate` costs a population (prefill, exact decode sum, energy)."""

    def __init__(self, template: Any, mode: str = "overlapped", precision: dict | None = None,
                 name: str | None = None, breakdown_max: int = 32, chunk: int = 512) -> None:
        if mode not in MODES:
            raise BackendError(f"backend.mode = {mode!r} is unknown; allowed: {', '.join(MODES)}")
        self.t = make_template(template)
        self.name, self.mode = name or self.t.name, mode
        p = dict(precision or {})
        self.default_bits = (int(p.get("weight_bits", 8)), int(p.get("act_bits", 8)), int(p.get("kv_bits", 8)))
        self.breakdown_max, self.chunk = int(breakdown_max), int(chunk)

    def evaluate(self, genomes: Sequence[Any] | PopArrays, workload: Workload | None = None) -> CostTable:
        from backends.systolic_phase import evaluate_chunk

        pop = as_population(genomes)
        if workload is None:  # the backend's own default precision
            workload = Workload(**dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits)))
        parts = [evaluate_chunk(self, RooflineBackend.compact(pop.take(np.arange(s, min(s + self.chunk, pop.P)))), workload)
                 for s in range(0, pop.P, self.chunk)]
        cat = lambda k: np.concatenate([p[k] for p in parts])  # noqa: E731
        n = pop.P
        extras = [e for p in parts for e in p["extras"]]
        return CostTable(cat("ttft_ms"), cat("tpot_ms"), cat("energy_per_token_uj"), np.ones(n, bool), [""] * n, extras)
