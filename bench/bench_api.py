"""Figures: RESULTS.md "Issue 26: objectives and API" (cost of a workload-total objective; the API's overhead).

    nice -n 10 .venv/bin/python bench/bench_api.py

1. What a KV-bytes / peak-memory objective adds to one generation's model totals: `problem.totals` on a
   48-genome iha-paper batch with objectives [val_loss, kv_bytes, peak_memory_bytes] against the default
   objectives' (model totals only), both timed in this run (median of repeats); ratio = with / without.
2. The API's own cost before a search starts: `search.api_compose.compose("forge-search", ...)` per call, against
   Hydra's plain `compose` of the same overrides (what `search.cli.run`'s caller pays), in this run.
"""
from __future__ import annotations

import json
import statistics
import time

import numpy as np


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def totals_cost(repeats: int = 30) -> dict:
    from backends.interface import Workload
    from forge.spaces.space import load_space
    from search.problem import ForgeProblem

    space = load_space("iha-paper")
    X = space.sample_x(48, np.random.default_rng(0))
    arrays = space.arrays_from_values(space.values(X))
    probs = {name: ForgeProblem(space, None, None, Workload(), objs, [])  # totals only
             for name, objs in (("default", ["val_loss", "ttft_ms", "tpot_ms", "energy_per_token_uj"]),
                                ("kv", ["val_loss", "kv_bytes", "peak_memory_bytes"]))}
    ms = {k: _median_ms(lambda p=p: p.totals(arrays), repeats) for k, p in probs.items()}
    return {"batch": 48, "default_ms": ms["default"], "with_workload_totals_ms": ms["kv"],
            "ratio": ms["kv"] / ms["default"]}


def compose_cost(repeats: int = 10) -> dict:
    from hydra import compose, initialize_config_module

    from search.api_compose import compose as api_compose

    over = ["space=iha-tiny", "objectives=[val_loss,ttft_ms,params]"]

    def plain():
        with initialize_config_module(config_module="forge_conf", version_base="1.3"):
            compose("forge-search", overrides=over)

    api = _median_ms(lambda: api_compose("forge-search", space="iha-tiny",
                                         objectives=["val_loss", "ttft_ms", "params"]), repeats)
    base = _median_ms(plain, repeats)
    return {"hydra_compose_ms": base, "api_compose_ms": api, "ratio": api / base}


if __name__ == "__main__":
    print(json.dumps({"totals": totals_cost(), "compose": compose_cost()}, indent=2))
