"""`backend=roofline-afd` (or any inner backend): the inner backend's costs plus AFD extras for forge-search.

`AfdBackend.evaluate` returns the inner backend's CostTable for the search workload unchanged and adds,
per genome, the AFD ratio of paper 001 fitted from the inner backend's decode steps (backends/serving/fit.py):
    r_star                       optimal attention instances per FFN instance (Theorem 4.4)
    throughput_per_instance      output tokens/s per instance at r* (Eq. 20)
    afd_ms_per_token_instance    1000 / throughput_per_instance, a minimizable objective
    afd_r2_attention, afd_r2_ffn fit quality
so `objectives: [val_loss, afd_ms_per_token_instance]` or `constraints: ["r_star <= 8"]` need no change
to search/problem.py.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from backends.interface import CostTable, Workload, as_population
from backends.registry import build_backend
from backends.serving.afd import AfdWorkload, optimal_ratio
from backends.serving.fit import Link, fit_afd
from forge.spaces.arrays import PopArrays

DEFAULT_GRID = {"batch_scale": [0.5, 1, 2], "load_scale": [0.25, 0.5, 1, 1.5], "ffn_scale": [1, 2, 4, 8, 16, 32]}


class AfdBackend:
    """Wraps an inner backend (a name in conf/backend or a config mapping) and adds AFD extras."""

    def __init__(self, inner: Any = "roofline", B: int = 64, mu_P: float = 256, mu_D: float = 256,
                 N: float | None = 2000, tbar: str = "exact", link: dict | None = None,
                 grid: dict | None = None, head_side: str = "ffn", name: str | None = None) -> None:
        self.inner = build_inner(inner)
        self.name = name or f"{self.inner.name}-afd"
        self.default_bits = getattr(self.inner, "default_bits", (16, 16, 16))
        self.afd = AfdWorkload(B=int(B), mu_P=float(mu_P), mu_D=float(mu_D), N=N, tbar=tbar)
        self.link, self.grid, self.head_side = Link(**dict(link or {})), dict(grid or DEFAULT_GRID), head_side

    def evaluate(self, genomes: Sequence[Any] | PopArrays, workload: Workload | None = None) -> CostTable:
        pop = as_population(genomes)
        table = self.inner.evaluate(pop, workload)
        bits = (workload.weight_bits, workload.act_bits, workload.kv_bits) if workload else tuple(self.default_bits)
        params, quality = fit_afd(self.inner, pop, self.afd, bits, self.link, self.grid, self.head_side)
        opt = optimal_ratio(params, self.afd)
        thr = np.asarray(opt["throughput_star"]) * 1e3  # tokens per ms → per s
        extras = table.extras or [{} for _ in range(len(table))]
        for j, e in enumerate(extras):
            ok = bool(quality["feasible"][j])
            e.update({"r_star": float(opt["r_star"][j]) if ok else float("inf"),
                      "throughput_per_instance": float(thr[j]) if ok else 0.0,
                      "afd_ms_per_token_instance": float(1e3 / thr[j]) if ok and thr[j] > 0 else float("inf"),
                      "afd_r2_attention": float(quality["r2_attention"][j]), "afd_r2_ffn": float(quality["r2_ffn"][j])})
        table.extras = extras
        return table


def build_inner(spec: Any) -> Any:
    """The inner backend, with its per-operator breakdown on for any population size when it has one
    (roofline and the systolic backends take breakdown_max); the fit needs it."""
    import inspect

    from backends.registry import backend_config

    cfg = backend_config(spec) if isinstance(spec, str) else dict(spec)
    backend = build_backend(cfg)  # validates _target_ and options with the registry's messages
    if "breakdown_max" in inspect.signature(type(backend)).parameters:
        return build_backend(cfg, breakdown_max=1 << 30)
    return backend
