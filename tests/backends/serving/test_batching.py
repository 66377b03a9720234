"""The event-skipping batching simulator against a naive step-by-step reference, and the pool latency
models against Forge's RooflineBackend."""
from __future__ import annotations

import heapq

import numpy as np
import pytest

from backends.gpu.roofline import RooflineBackend
from backends.interface import Workload
from backends.serving.batching import Instance, decode_instance, prefill, simulate
from backends.serving.latency import DECODE_GRID, PREFILL_GRID, fit_models, grid_ops, roofline_knobs, roofline_seconds
from backends.serving.trace import Trace
from forge.cli import resolve_arch


def naive_decode(ready, prompt, output, pool):
    """One loop iteration per decode step (the definition the event version must equal)."""
    a, c, b = pool.coef
    t, done, active, nxt = 0.0, np.empty(len(ready)), {}, 0
    need = prompt + output
    while nxt < len(ready) or active:
        while (nxt < len(ready) and ready[nxt] <= t and len(active) < pool.max_batch
               and sum(need[r] for r in active) + need[nxt] <= pool.kv_tokens):
            if output[nxt] <= 1:
                done[nxt] = t
            else:
                active[nxt] = [prompt[nxt], output[nxt] - 1]
            nxt += 1
        if not active:
            t = max(t, ready[nxt])
            continue
        t += a * sum(v[0] for v in active.values()) + c * len(active) + b
        for r in list(active):
            active[r][0] += 1
            active[r][1] -= 1
            if active[r][1] == 0:
                done[r] = t
                del active[r]
    return done


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_event_simulator_equals_step_by_step(seed):
    rng = np.random.default_rng(seed)
    n = 60
    ready = np.sort(rng.uniform(0, 2.0, n))
    prompt, output = rng.integers(5, 200, n).astype(float), rng.integers(1, 40, n).astype(float)
    pool = Instance(1, (1e-5, 1e-4, 2e-3), kv_tokens=1500.0, max_batch=8)
    assert np.allclose(decode_instance(ready, prompt, output, pool), naive_decode(ready, prompt, output, pool))


def test_prefill_batches_by_token_budget():
    tr = Trace(np.zeros(5), np.array([100, 100, 100, 300, 50]), np.ones(5, int))
    done = prefill(tr, Instance(1, (1e-3, 0.0, 0.5), max_prefill_tokens=300))
    assert done.tolist() == pytest.approx([0.8, 0.8, 0.8, 1.6, 2.15])  # [100,100,100] [300] [50]


def test_more_instances_serve_faster():
    rng = np.random.default_rng(0)
    tr = Trace(np.sort(rng.uniform(0, 1, 200)), rng.integers(50, 500, 200), rng.integers(2, 60, 200))
    one = simulate(tr, Instance(1, (1e-5, 0, 5e-3)), Instance(1, (1e-6, 1e-4, 5e-3), kv_tokens=1e5), 1e5, 1e11)
    four = simulate(tr, Instance(4, (1e-5, 0, 5e-3)), Instance(4, (1e-6, 1e-4, 5e-3), kv_tokens=1e5), 1e5, 1e11)
    assert four["serving_time_s"] < one["serving_time_s"] and four["ttft_mean_s"] < one["ttft_mean_s"]


def test_request_that_never_fits_raises():
    with pytest.raises(ValueError, match="KV tokens"):
        decode_instance(np.zeros(1), np.array([100.0]), np.array([50.0]), Instance(1, (0, 0, 1), kv_tokens=120.0))


def test_vectorized_roofline_equals_the_backend():
    g = resolve_arch("smollm2-135m")
    hw = dict(name="tmpl", peak_tflops_16=432.5, peak_tops_8=865, mem_bw_gbs=3352, mem_gb=80, tdp_w=700, static_w=100, e_byte_pj=10)
    ref = RooflineBackend(hardware=hw)
    go, k = grid_ops(g), roofline_knobs()
    F, B = np.array([432.5e12]), np.array([3352e9])
    (b, L), (bd, c) = PREFILL_GRID[2], DECODE_GRID[4]
    assert roofline_seconds(F, B, go["pre"][2], go["layers"], k)[0] * 1e3 == pytest.approx(
        ref.evaluate([g], Workload(prefill=L, decode=1, batch=b)).ttft_ms[0], rel=1e-9)
    assert roofline_seconds(F, B, go["dec"][4], go["layers"], k)[0] * 1e3 == pytest.approx(
        ref.evaluate([g], Workload(prefill=c - 1, decode=1, batch=bd)).tpot_ms[0], rel=1e-9)
    m = fit_models(g, F, B)
    assert m["r2_prefill"][0] > 0.999 and m["r2_decode"][0] > 0.99
