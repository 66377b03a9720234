"""`backend=plena`: PLENA's flattened systolic array (paper 004) for long-context agentic workloads.

Evaluates a population on one fixed array shape, or co-searches the shape per genome over a grid
(`shapes: {blen: [...], mlen: [...], vlen: [...], hlen: [...]}`) and returns the Pareto top-K shapes
(TTFT, TPOT, energy, area), ordered by `rank_by`, the first one used — as rDXE does for its chips.
`workload.batch=max` takes, per genome, the largest batch whose weights + KV cache fit the HBM
(`batch_round: pow2` then takes the largest power of two below it, as every BS of Table XII is);
constraint violations (Table III) and capacity misses are infeasible rows with their reasons.
TTFT is the prefill of the whole batch; TPOT one decode step of it; `energy_per_token_uj` is per processed
token (batch × (prefill + decode) tokens); `ms_per_token` / `tokens_per_s` are the decode throughput.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from backends.interface import BackendError, CostTable, Workload, as_population
from backends.plena.array import (Shape, bandwidth_reason, make_shape, matrix_area_mm2, peak_tops, shape_reasons)
from backends.plena.cost import ALL_OPS, System, shape_cost, tables
from forge.lm.workload import genome_bytes, kv_cache_bytes, max_batch, weight_storage

RANKS = ("balanced", "tpot", "ttft", "energy", "area", "throughput")
BATCH_ROUNDS = ("exact", "pow2")
FORMAT_KEYS = ("weight_format", "act_format", "kv_format")


class PlenaBackend:
    """A PLENA system: cores × one flattened array shape (fixed or co-searched) sharing an HBM."""

    supports_batch_max = True

    def __init__(self, name: str = "plena", shape: Any = None, shapes: Any = None, top_k: int = 3,
                 rank_by: str = "throughput", system: Any = None, precision: Any = None,
                 breakdown_max: int = 32, chunk: int = 512, batch_round: str = "exact",
                 causal_prefill: bool = True) -> None:
        self.name = name
        if batch_round not in BATCH_ROUNDS:
            raise BackendError(f"backend.batch_round = {batch_round!r} is invalid; allowed: {', '.join(BATCH_ROUNDS)}")
        self.batch_round, self.causal = batch_round, bool(causal_prefill)
        if rank_by not in RANKS:
            raise BackendError(f"backend.rank_by = {rank_by!r} is invalid; allowed: {', '.join(RANKS)}")
        self.rank_by, self.top_k = rank_by, max(int(top_k), 1)
        self.shapes = self._grid(shapes) if shapes else [make_shape(shape or {"blen": 32, "mlen": 2048, "vlen": 2048, "hlen": 128})]
        try:
            self.sys = System(**dict(system or {}))
        except TypeError as e:
            raise BackendError(f"backend.system: {e}; allowed: {', '.join(System.__dataclass_fields__)}") from None
        p = dict(precision or {})
        self.default_bits = tuple(int(p.get(k, 4)) for k in ("weight_bits", "act_bits", "kv_bits"))
        self.default_formats = {k: p[k] for k in FORMAT_KEYS if p.get(k)}
        self.breakdown_max, self.chunk = int(breakdown_max), int(chunk)

    @staticmethod
    def _grid(spec: Any) -> list[Shape]:
        d = dict(spec)
        if set(d) != {"blen", "mlen", "vlen", "hlen"}:
            raise BackendError(f"backend.shapes = {d!r} is invalid; allowed: lists for blen, mlen, vlen, hlen")
        vals = [[int(v) for v in (d[k] if isinstance(d[k], (list, tuple)) else [d[k]])] for k in ("blen", "mlen", "vlen", "hlen")]
        return [Shape(*c) for c in itertools.product(*vals)]

    # ------------------------------------------------------------------ public
    def evaluate(self, genomes: Sequence[Any] | Any, workload: Workload | None = None) -> CostTable:
        pop = as_population(genomes)
        wl = workload or Workload(**dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits)), **self.default_formats)
        names = [str(g.precision) if getattr(g, "precision", None) else None for g in genomes] \
            if not hasattr(genomes, "P") else [None] * pop.P
        parts = []
        for s in range(0, pop.P, self.chunk):
            idx = np.arange(s, min(s + self.chunk, pop.P))
            parts.append(self._chunk(pop.take(idx), wl, names[s:s + len(idx)]))
        cat = lambda k: np.concatenate([p[k] for p in parts])  # noqa: E731
        return CostTable(cat("ttft_ms"), cat("tpot_ms"), cat("energy_per_token_uj"), cat("feasible"),
                         [r for p in parts for r in p["reason"]], [e for p in parts for e in p["extras"]])

    # ------------------------------------------------------------------ internals
    def _batch(self, pop, wl: Workload) -> tuple[np.ndarray, list[str]]:
        """Per-genome batch and capacity reasons ('' = fits)."""
        prec, ctx, cap = wl.precision, wl.prefill + wl.decode, self.sys.hbm_gb * 1e9
        B = max_batch(pop, ctx, cap, prec) if wl.batch_max else np.full(pop.P, int(wl.batch))
        if wl.batch_max and self.batch_round == "pow2":  # the largest power of two that fits (Table XII's BS)
            B = np.where(B >= 1, 2 ** np.floor(np.log2(np.maximum(B, 1))), B).astype(B.dtype)
        need = weight_storage(pop, prec) + kv_cache_bytes(pop, ctx, np.maximum(B, 1), prec)
        w, kv1 = weight_storage(pop, prec), kv_cache_bytes(pop, ctx, 1, prec)
        reasons = ["" if (b >= 1 and nd <= cap) else
                   f"batch {max(int(b), 1)} does not fit: weights {wi / 1e9:.2f} GB + KV cache {max(int(b), 1)} × "
                   f"{k / 1e9:.2f} GB at {ctx} tokens > HBM {cap / 1e9:.0f} GB" for b, nd, wi, k in zip(B, need, w, kv1)]
        return np.maximum(B, 1), reasons

    def _chunk(self, pop, wl: Workload, names: list) -> dict[str, Any]:
        prec, P = wl.precision, pop.P
        B, cap_reason = self._batch(pop, wl)
        T = tables(pop, B.astype(float), wl.prefill, wl.decode, prec, causal=self.causal)
        kvb = genome_bytes(pop, prec)[2][:, 0]
        costs, ok = [], np.zeros((len(self.shapes), P), bool)
        why = [[""] * P for _ in self.shapes]
        for si, s in enumerate(self.shapes):
            fixed = "; ".join(shape_reasons(s))
            for i in range(P):
                why[si][i] = fixed or bandwidth_reason(s, float(kvb[i]), self.sys.clock_ghz, self.sys.hbm_gbs)
            ok[si] = [not r for r in why[si]]
            costs.append(shape_cost(s, self.sys, T) if ok[si].any() else None)
        return self._pick(pop, wl, B, cap_reason, costs, ok, why, names, prec)

    def _objectives(self, si: int, c: dict, wl: Workload, B: np.ndarray) -> np.ndarray:
        """(P, 4) ttft, per-sequence-token time, energy per token, area of shape si."""
        area = matrix_area_mm2(self.shapes[si]) * self.sys.cores
        return np.column_stack([c["ttft_s"], c["decode_s"] / wl.decode / B,
                                c["energy_j"] / (B * (wl.prefill + wl.decode)), np.full(len(B), area)])

    def _order(self, F: np.ndarray) -> list[int]:
        """Non-dominated rows of F (shapes of one genome), best first by rank_by, at most top_k."""
        from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

        front = NonDominatedSorting().do(F, only_non_dominated_front=True) if len(F) > 1 else np.arange(len(F))
        col = {"ttft": 0, "tpot": 1, "throughput": 1, "energy": 2, "area": 3}.get(self.rank_by)
        key = F[front, col] if col is not None else (F[front] / F[front].min(axis=0).clip(1e-30)).sum(axis=1)
        order = np.lexsort((F[front, 3], F[front, 2], np.round(key, 12)))  # ties: less energy, then less area
        return [int(front[j]) for j in order[: self.top_k]]

    def _pick(self, pop, wl, B, cap_reason, costs, ok, why, names, prec) -> dict[str, Any]:
        P = pop.P
        wl_name = "/".join(f or f"{b}bit" for f, b in ((wl.weight_format, wl.weight_bits), (wl.act_format, wl.act_bits),
                                                       (wl.kv_format, wl.kv_bits)))
        ttft, tpot, en = np.full(P, np.inf), np.full(P, np.inf), np.full(P, np.inf)
        feas, reasons, extras = np.zeros(P, bool), [""] * P, []
        F = {si: self._objectives(si, c, wl, B) for si, c in enumerate(costs) if c is not None}
        _, a_b, kv_b = (x[:, 0] for x in genome_bytes(pop, prec))
        for i in range(P):
            cand = [si for si in F if ok[si, i]]
            prec_name = names[i] or wl_name
            e = {"batch": int(B[i]), "precision": prec_name}
            if cap_reason[i] or not cand:
                reasons[i] = cap_reason[i] or f"no array shape is feasible: {why[0][i]}"
                extras.append(e)
                continue
            rank = self._order(np.array([F[si][i] for si in cand]))
            best = cand[rank[0]]
            s, c = self.shapes[best], costs[best]
            feas[i], ttft[i], tpot[i] = True, c["ttft_s"][i] * 1e3, c["decode_s"][i] / wl.decode * 1e3
            en[i] = F[best][i, 2] * 1e6
            e.update(self._extras(s, c, i, wl, B[i]))
            # Table XI "Peak Bandwidth": one MLEN-wide activation and one KV vector per cycle (its four
            # columns are MLEN 2048 · (A + KV bits) / 8 at 1 GHz: 8192, 8192, 5120, 2048 GB/s)
            e["peak_bandwidth_gbs"] = float(s.mlen * (a_b[i] + kv_b[i]) * self.sys.clock_ghz)
            e["top_shapes"] = [{**self.shapes[cand[r]].to_dict(), "tpot_ms": float(costs[cand[r]]["decode_s"][i] / wl.decode * 1e3),
                                "area_mm2": float(F[cand[r]][i, 3])} for r in rank]
            if P <= self.breakdown_max:
                e["ttft_ops_ms"] = {k: float(v * 1e3) for k, v in zip(ALL_OPS, c["pre_ops"][i]) if v > 0}
                e["tpot_ops_ms"] = {k: float(v * 1e3 / wl.decode) for k, v in zip(ALL_OPS, c["dec_ops"][i]) if v > 0}
            extras.append(e)
        return {"ttft_ms": ttft, "tpot_ms": tpot, "energy_per_token_uj": en, "feasible": feas, "reason": reasons,
                "extras": extras}

    def _extras(self, s: Shape, c: dict, i: int, wl: Workload, b: int) -> dict[str, Any]:
        area = matrix_area_mm2(s)
        return {"shape": s.label(), "blen": s.blen, "mlen": s.mlen, "vlen": s.vlen, "hlen": s.hlen,
                "area_mm2": area * self.sys.cores, "matrix_area_mm2": area,
                "tops_per_mm2": peak_tops(s, self.sys.clock_ghz) / area,
                "tokens_per_s": float(b * wl.decode / c["decode_s"][i]),
                "ms_per_token": float(c["decode_s"][i] / wl.decode / b * 1e3),
                **{k: float(c[k][i]) for k in ("util_prefill", "util_decode", "array_util_decode", "array_util_linear_decode",
                                               "array_util_attn_decode", "decode_memory_bound_share")}}
