"""Batching simulator of a disaggregated serving system (Splitwise-style, the scheduler paper 003 uses).

Prefill pool: one FCFS queue; a free instance takes the waiting requests in order up to `max_prefill_tokens`
(at least one) and runs them as one batch, t_P = a1·ΣL + a2·ΣL² + b_P (backends/serving/latency.py).
KV transfer: the prompt's KV cache goes to the decode pool over the links, at the slower side's link bandwidth.
Decode pool: requests are dealt round-robin to instances in the order they become ready; each instance runs
iteration-level continuous batching: a request joins at a step boundary when its whole KV cache
(prompt + output tokens) fits the instance's free KV memory and the batch is below `max_batch`, and
generates output − 1 tokens (the prefill made the first). One step costs t_D = a·Σcontext + c·n + b_D.
Between events (a join or a completion) the batch is fixed and its context sum grows by n per step, so
the time of m steps is summed in closed form and the simulator only visits events.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from forge.errors import UserError
from backends.serving.trace import Trace


@dataclass(frozen=True)
class Instance:
    """Latency coefficients (seconds) and limits of one pool's instances."""

    count: int
    coef: tuple[float, float, float]
    kv_tokens: float = math.inf      # decode: KV cache capacity in tokens
    max_batch: int = 256
    max_prefill_tokens: int = 8192


def prefill(trace: Trace, pool: Instance) -> np.ndarray:
    """Finish time of every request's prefill (FCFS token-budget batching over `count` instances)."""
    a1, a2, b = pool.coef
    arr, L = trace.arrival_s.tolist(), trace.prompt.astype(float).tolist()  # plain floats: the loop is scalar
    done = np.empty(len(trace))
    free = [0.0] * pool.count
    heapq.heapify(free)
    i, n = 0, len(trace)
    while i < n:
        t_free = heapq.heappop(free)
        start = max(t_free, arr[i])
        j, tok, sq = i + 1, L[i], L[i] * L[i]
        while j < n and arr[j] <= start and tok + L[j] <= pool.max_prefill_tokens:
            tok, sq = tok + L[j], sq + L[j] * L[j]
            j += 1
        end = start + a1 * tok + a2 * sq + b
        done[i:j] = end
        heapq.heappush(free, end)
        i = j
    return done


def _steps_until(dt: float, base: float, growth: float) -> int:
    """Fewest steps m ≥ 1 whose summed time m·base + growth·m(m−1)/2 reaches dt."""
    if dt <= base:
        return 1
    if growth <= 0:
        return max(1, math.ceil(dt / base))
    h = base - growth / 2  # growth/2·m² + h·m − dt = 0
    return max(1, math.ceil((-h + math.sqrt(h * h + 2 * growth * dt)) / growth))


def decode_instance(ready: np.ndarray, prompt: np.ndarray, output: np.ndarray, pool: Instance) -> np.ndarray:
    """Completion time of each request (given in ready order) on one continuous-batching instance."""
    a, c, b = pool.coef
    done = np.empty(len(ready))
    active: list[tuple[int, int]] = []  # (finish step, request)
    t, k, S, n, used, nxt = 0.0, 0, 0.0, 0, 0.0, 0
    need = (prompt + output).tolist()  # plain floats: the loop is scalar
    ready, prompt, output = ready.tolist(), prompt.tolist(), output.tolist()
    while nxt < len(ready) or active:
        while nxt < len(ready) and ready[nxt] <= t and n < pool.max_batch and used + need[nxt] <= pool.kv_tokens:
            steps = int(output[nxt]) - 1
            if steps <= 0:
                done[nxt] = t
            else:
                heapq.heappush(active, (k + steps, nxt))
                S, n, used = S + prompt[nxt], n + 1, used + need[nxt]
            nxt += 1
        if not active:
            if ready[nxt] <= t:  # ready, nothing running, and still not admitted: it can never fit
                raise UserError(f"a request needs {need[nxt]:.0f} KV tokens > {pool.kv_tokens:.0f} per decode instance")
            t = ready[nxt]
            continue
        base, growth = a * S + c * n + b, a * n
        m = active[0][0] - k
        if nxt < len(ready) and n < pool.max_batch and used + need[nxt] <= pool.kv_tokens and ready[nxt] > t:
            m = min(m, _steps_until(ready[nxt] - t, base, growth))
        t += m * base + growth * m * (m - 1) / 2
        k, S = k + m, S + n * m
        while active and active[0][0] <= k:
            _, r = heapq.heappop(active)
            done[r] = t
            S, n, used = S - need[r] + 1, n - 1, used - need[r]
    return done


def simulate(trace: Trace, pre: Instance, dec: Instance, kv_bytes_per_token: float, link_bps: float) -> dict[str, Any]:
    """Serving time of the whole trace and per-request latencies."""
    p_done = prefill(trace, pre)
    ready = p_done + trace.prompt * kv_bytes_per_token / link_bps
    order = np.argsort(ready, kind="stable")
    done = np.empty(len(trace))
    for inst in range(dec.count):
        idx = order[inst::dec.count]
        done[idx] = decode_instance(ready[idx], trace.prompt[idx].astype(float), trace.output[idx].astype(float), dec)
    t0 = float(trace.arrival_s[0])
    span = float(done.max()) - t0
    return {"serving_time_s": span, "rps": len(trace) / span if span > 0 else math.inf,
            "ttft_mean_s": float((p_done - trace.arrival_s).mean()), "latency_mean_s": float((done - trace.arrival_s).mean()),
            "tpot_mean_s": float(((done - ready) / np.maximum(trace.output - 1, 1)).mean())}
