"""Discrete-event simulator of an r A-1F decode bundle, to check the closed form of paper 001 (§5.1).

Each attention instance holds two microbatches of B request slots (paper §5.1: two batches in flight, so
one computes attention while the other is on the FFN). A microbatch step runs
    attention on its instance (t_A of its OWN current load T, so stragglers show)
    → A→F transfer (t_C / 2) → the FFN waits for all r microbatches of that group (barrier)
    → FFN over rB requests (t_F) → F→A transfer (t_C / 2) → the next step of that group.
Instances and the FFN serve one step at a time, in order; the two groups alternate. Continuous batching:
a slot whose request ends (probability p per step, p = 1/μ_D as in `afd.termination_p`) is refilled at
once from an infinite queue with a fresh prefill length (uniform on μ_P·[1 − spread, 1 + spread]).

The load process does not depend on timing, so it is drawn vectorized over all 2r·B slots per step; the
timing is a max-plus recursion vectorized over the r instances. Throughput counts the rB tokens every
group-step produces over the horizon K = N/(B·p) steps (N requests per microbatch, Eq. 12); idle shares
are 1 − busy / makespan (Eq. 23).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backends.serving.afd import AfdParams, AfdWorkload, check_ratio, termination_p


@dataclass(frozen=True)
class SimResult:
    r: int
    throughput_per_instance: float
    eta_A: float
    eta_F: float
    makespan: float
    steps: int


def _prefill(rng: np.random.Generator, shape: tuple[int, ...], mu_P: float, spread: float) -> np.ndarray:
    lo, hi = mu_P * (1 - spread), mu_P * (1 + spread)
    return rng.uniform(lo, hi, size=shape)


def simulate(params: AfdParams, wl: AfdWorkload, r: int, seed: int = 0, prefill_spread: float = 0.5,
             max_steps: int | None = None) -> SimResult:
    """One seeded run of the r:1 bundle (scalar α/β); r must be a positive integer here."""
    r = int(check_ratio(r))
    rng = np.random.default_rng(seed)
    p, B = termination_p(wl.mu_D), wl.B
    K = int(np.ceil((wl.N or 10_000) / (B * p))) if max_steps is None else int(max_steps)
    s = _prefill(rng, (2, r, B), wl.mu_P, prefill_spread)  # prefill length per slot
    i = np.zeros((2, r, B))                                   # decode index per slot (D_0 = 0)
    aA, bA, aF, bF = (float(params.alpha_A), float(params.beta_A), float(params.alpha_F), float(params.beta_F))
    half_c = (float(params.alpha_C) * B + float(params.beta_C)) / 2
    t_F = aF * r * B + bF
    attn_free, ffn_free = np.zeros(r), 0.0
    back = np.zeros(2)  # when each group's F→A results arrive
    busy_A, busy_F = np.zeros(r), 0.0
    for k in range(K):
        loads = s.sum(axis=2) + i.sum(axis=2)  # T of every microbatch at this step, (2, r)
        for g in (0, 1):
            t_A = aA * loads[g] + bA
            start = np.maximum(attn_free, back[g])
            attn_free = start + t_A
            busy_A += t_A
            f_start = max(ffn_free, float(attn_free.max()) + half_c)
            ffn_free = f_start + t_F
            busy_F += t_F
            back[g] = ffn_free + half_c
        cont = rng.random((2, r, B)) >= p
        i = np.where(cont, i + 1, 0.0)
        ended = ~cont
        s[ended] = _prefill(rng, (int(ended.sum()),), wl.mu_P, prefill_spread)
    makespan = float(back.max())
    tokens = 2 * K * r * B
    return SimResult(r, tokens / makespan / (r + 1), float(np.mean(1 - busy_A / makespan)),
                     float(1 - busy_F / makespan), makespan, K)
