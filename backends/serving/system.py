"""A prefill pool + a decode pool serving one genome over one trace → serving time and cost (paper 003's f_t, f_c).

Latency models are fitted once per distinct instance (peak, bandwidth) and every system once (both cached),
so a search that revisits designs pays nothing. A system is infeasible when the weights fit no tensor-parallel
group of a server, or a request's KV cache cannot fit a decode instance.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from forge.errors import UserError
from backends.serving.batching import Instance, simulate
from backends.serving.latency import fit_models, grid_ops, systolic_models, tensor_parallel
from backends.serving.pool import col, device_perf, pool_cost
from backends.serving.trace import Trace
from forge.genomes.genome import Genome

SCHED_DEFAULTS = {"max_batch": 256, "max_prefill_tokens": 8192, "mem_usable": 0.9, "weights_share": 0.6}
LATENCY = ("roofline", "systolic")  # backends/serving/latency.py: the device latency model of both pools


class ServingModel:
    """f(prefill design, decode design) = serving time (s), cost ($), RPS, feasibility."""

    def __init__(self, genome: Genome, trace: Trace, cost: dict[str, Any], sched: dict[str, Any] | None = None,
                 latency: str = "roofline") -> None:
        if latency not in LATENCY:
            raise UserError(f"serve.pools.latency = {latency!r} is unknown; allowed: {', '.join(LATENCY)}")
        self.genome, self.trace, self.cost, self.latency = genome, trace, dict(cost), latency
        self.sched = {**SCHED_DEFAULTS, **dict(sched or {})}
        bad = sorted(set(self.sched) - set(SCHED_DEFAULTS))
        if bad:
            raise UserError(f"pools.sched.{bad[0]} is unknown; allowed: {', '.join(SCHED_DEFAULTS)}")
        g = grid_ops(genome)
        self.weights, self.kv_per_token = g["weights"], g["kv_per_token"]
        self._coef: dict[tuple[float, ...], dict[str, np.ndarray]] = {}
        self._sys: dict[tuple[float, ...], dict[str, Any]] = {}
        self.simulations = 0

    def instances(self, v: np.ndarray) -> dict[str, np.ndarray]:
        """Tensor-parallel degree, instance count, peak, bandwidth, memory and link bandwidth per pool row."""
        p = device_perf(v, self.cost)
        tp = tensor_parallel(col(v, "devices"), p["mem"], self.weights, self.sched["weights_share"])
        t = np.maximum(tp, 1)
        return {"tp": tp, "count": col(v, "servers") * col(v, "devices") // t, "flops": p["flops"] * t,
                "bw": p["bw"] * t, "mem": p["mem"] * t, "link": p["link"] * t}

    def _coefs(self, flops: np.ndarray, bw: np.ndarray, v: np.ndarray, tp: np.ndarray) -> list[dict[str, np.ndarray]]:
        if self.latency == "systolic":  # keyed by the whole device row and tp: buffers and vector width matter
            keys = [tuple(r) + (float(t),) for r, t in zip(v.tolist(), tp.tolist())]
            for k in dict.fromkeys(k for k in keys if k not in self._coef and k[-1] > 0):
                m = systolic_models(self.genome, np.array(k[:-1]), self.cost, int(k[-1]))
                self._coef[k] = {"prefill": m["prefill"][0], "decode": m["decode"][0]}
            return [self._coef.get(k, {"prefill": None, "decode": None}) for k in keys]
        keys = list(zip(flops.tolist(), bw.tolist()))
        todo = sorted({k for k in keys if k not in self._coef})
        if todo:
            m = fit_models(self.genome, np.array([k[0] for k in todo]), np.array([k[1] for k in todo]))
            for i, k in enumerate(todo):
                self._coef[k] = {"prefill": m["prefill"][i], "decode": m["decode"][i]}
        return [self._coef[k] for k in keys]

    def evaluate(self, pre: np.ndarray, dec: np.ndarray) -> dict[str, np.ndarray]:
        """Rows of prefill and decode value designs (n, 10) → objective arrays."""
        pre, dec = np.atleast_2d(pre), np.atleast_2d(dec)
        ip, idc = self.instances(pre), self.instances(dec)
        cp, cd = self._coefs(ip["flops"], ip["bw"], pre, ip["tp"]), self._coefs(idc["flops"], idc["bw"], dec, idc["tp"])
        rows = []
        for i in range(len(pre)):
            key = tuple(pre[i]) + tuple(dec[i])
            if key not in self._sys:
                self._sys[key] = self._one({k: v[i] for k, v in ip.items()}, {k: v[i] for k, v in idc.items()},
                                           cp[i]["prefill"], cd[i]["decode"])
            rows.append(self._sys[key])
        out = {k: np.array([r[k] for r in rows]) for k in ("serving_time_s", "rps", "ttft_mean_s", "tpot_mean_s", "feasible")}
        out["cost_usd"] = pool_cost(pre, self.cost) + pool_cost(dec, self.cost)
        out["reason"] = [r["reason"] for r in rows]
        return out

    def _one(self, p: dict[str, Any], d: dict[str, Any], cpre: np.ndarray, cdec: np.ndarray) -> dict[str, Any]:
        inf = {"serving_time_s": math.inf, "rps": 0.0, "ttft_mean_s": math.inf, "tpot_mean_s": math.inf, "feasible": False}
        if p["tp"] == 0 or d["tp"] == 0:
            return {**inf, "reason": f"weights ({self.weights / 1e9:.1f} GB) fit no tensor-parallel group of a server"}
        kv_tokens = (d["mem"] * self.sched["mem_usable"] - self.weights) / self.kv_per_token
        need = float((self.trace.prompt + self.trace.output).max())
        if need > kv_tokens:
            return {**inf, "reason": f"a request's KV cache ({need:.0f} tokens) exceeds a decode instance ({kv_tokens:.0f})"}
        s = self.sched
        pi = Instance(int(p["count"]), tuple(cpre), max_prefill_tokens=int(s["max_prefill_tokens"]))
        di = Instance(int(d["count"]), tuple(cdec), kv_tokens=kv_tokens, max_batch=int(s["max_batch"]))
        self.simulations += 1
        r = simulate(self.trace, pi, di, self.kv_per_token, min(p["link"], d["link"]))
        return {**r, "feasible": True, "reason": ""}
