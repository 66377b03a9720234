"""Attention/FFN disaggregation (AFD): the closed-form optimal A/F ratio of paper 001 (§3-4, Appendix A).

An r A-1F bundle decodes in synchronized steps; per step
    t_A = α_A·T + β_A   (T = tokens in the KV caches of one microbatch of B requests),
    t_F = α_F·rB + β_F  (the shared FFN takes the r microbatches at once),
    t_C = α_C·B + β_C   (round-trip A↔F transfer of one microbatch),
τ = max(t_A, t_C, t_F) and the per-instance throughput is rB / ((r + 1)·τ) (Eq. 6).
Decode lengths are geometric with a per-step termination probability p, so the horizon-average load
T̄ (Eq. 13-14 and Appendix A.2) replaces T, and r* = max(r_A, r_C, r_peak) (Theorem 4.4, Eq. 19).

Every function broadcasts over numpy arrays (one row per genome in a search). Times are in whatever
unit the α/β carry (paper Table 2: cycles; fitted from a backend: ms).

The p convention: the paper's printed r* values (9.30, 7.08, 2.17, 17.25 and 10.22 for B = 512) are
reproduced with p = 1/μ_D, i.e. decode lengths on {1, 2, …} with mean μ_D as numpy's geometric draws
them, and T̄ using (1 − p)/p. Its text's μ_D = (1 − p)/p (support {0, 1, …}) would give
p = 1/(μ_D + 1) and r* = 9.32 at the baseline instead; `termination_p` keeps the first.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from forge.errors import ForgeError

TBAR_FORMS = ("exact", "asymptotic", "infinite")


class AfdError(ForgeError):
    """Bad AFD input; the message names the field and what is allowed."""


@dataclass(frozen=True)
class AfdParams:
    """Linear latency coefficients (paper Table 2 symbols); floats or per-genome arrays."""

    alpha_A: Any
    beta_A: Any
    alpha_F: Any
    beta_F: Any
    alpha_C: Any = 0.0
    beta_C: Any = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = np.asarray(getattr(self, f.name), dtype=float)
            if not np.all(np.isfinite(v)) or np.any(v < 0):
                raise AfdError(f"afd.params.{f.name} = {getattr(self, f.name)!r} is invalid; allowed: finite numbers >= 0")
        if np.any(np.asarray(self.alpha_F, dtype=float) <= 0):
            raise AfdError(f"afd.params.alpha_F = {self.alpha_F!r} is invalid; allowed: a number > 0")

    @classmethod
    def from_config(cls, d: Any) -> "AfdParams":
        d = dict(d)
        allowed = [f.name for f in fields(cls)]
        bad = sorted(set(d) - set(allowed))
        if bad:
            raise AfdError(f"afd.params.{bad[0]} is unknown; allowed: {', '.join(allowed)}")
        return cls(**{k: float(v) for k, v in d.items()})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class AfdWorkload:
    """Microbatch size B per attention instance, mean prefill/decode lengths, requests N per instance."""

    B: int = 256
    mu_P: float = 100.0
    mu_D: float = 500.0
    N: float | None = 10_000  # None = N → ∞ (Eq. 14)
    tbar: str = "exact"       # exact (Appendix A.2, first line) | asymptotic (its large-N limit) | infinite

    def __post_init__(self) -> None:
        if not (isinstance(self.B, (int, np.integer)) and self.B > 0):
            raise AfdError(f"afd.B = {self.B!r} is invalid; allowed: a positive integer")
        if not self.mu_P >= 0:
            raise AfdError(f"afd.mu_P = {self.mu_P!r} is invalid; allowed: a number >= 0")
        if not self.mu_D >= 1:
            raise AfdError(f"afd.mu_D = {self.mu_D!r} is invalid; allowed: a number >= 1 (mean decode length)")
        if self.N is not None and not self.N > 0:
            raise AfdError(f"afd.N = {self.N!r} is invalid; allowed: a positive number or null (N → ∞)")
        if self.tbar not in TBAR_FORMS:
            raise AfdError(f"afd.tbar = {self.tbar!r} is unknown; allowed: {', '.join(TBAR_FORMS)}")


def termination_p(mu_D: float) -> float:
    """Per-step termination probability for mean decode length μ_D (support {1, 2, …}; see module doc)."""
    return 1.0 / float(mu_D)


def mean_load(wl: AfdWorkload) -> float:
    """Horizon-average token load T̄(B; N) of one microbatch (paper Eq. 13-14, Appendix A.2)."""
    p, B = termination_p(wl.mu_D), wl.B
    m = (1 - p) / p  # E[decode index] at stationarity
    if wl.N is None or wl.tbar == "infinite":
        return B * (wl.mu_P + m)  # Eq. 14
    if wl.tbar == "asymptotic":
        return B * (wl.mu_P + m) - m * B * B / wl.N  # Appendix A.2, large-N form
    K = wl.N / (B * p)  # Eq. 12: expected number of steps
    return B * wl.mu_P + B * m - B * m * (1 - (1 - p) ** K) / (K * p)  # Appendix A.2, exact sum


def step_times(params: AfdParams, wl: AfdWorkload, r: Any = 1.0) -> dict[str, np.ndarray]:
    """t̄_A, t̄_C and t̄_F(r) (paper §4.3)."""
    B = wl.B
    return {"t_A": np.asarray(params.alpha_A) * mean_load(wl) + params.beta_A,
            "t_C": np.asarray(params.alpha_C) * B + params.beta_C,
            "t_F": np.asarray(params.alpha_F) * np.asarray(r, dtype=float) * B + params.beta_F}


def optimal_ratio(params: AfdParams, wl: AfdWorkload) -> dict[str, np.ndarray]:
    """r_A (Eq. 15), r_C (Eq. 16), r_peak (Eq. 18), r* (Eq. 19) and Throughput* (Eq. 20)."""
    t = step_times(params, wl)
    aFB = np.asarray(params.alpha_F, dtype=float) * wl.B
    r_A = (t["t_A"] - params.beta_F) / aFB
    r_C = (t["t_C"] - params.beta_F) / aFB
    r_peak = np.sqrt(np.asarray(params.beta_F, dtype=float) / aFB)
    r_star = np.maximum(np.maximum(r_A, r_C), r_peak)
    return {"T_bar": np.asarray(mean_load(wl)), "t_A": t["t_A"], "t_C": t["t_C"], "r_A": r_A, "r_C": r_C,
            "r_peak": r_peak, "r_star": r_star, "throughput_star": throughput_per_instance(params, wl, r_star)}


def check_ratio(r: Any) -> np.ndarray:
    r = np.asarray(r, dtype=float)
    if r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise AfdError(f"afd ratio r = {r.tolist()!r} is invalid; allowed: numbers > 0 (attention instances per FFN instance)")
    return r


def throughput_per_instance(params: AfdParams, wl: AfdWorkload, r: Any) -> np.ndarray:
    """rB / ((r + 1)·max(t̄_A, t̄_C, t̄_F(r))): output tokens per time unit per instance (Eq. 6)."""
    r = check_ratio(r)
    t = step_times(params, wl, r)
    tau = np.maximum(np.maximum(t["t_A"], t["t_C"]), t["t_F"])
    return r * wl.B / ((r + 1) * tau)


def idle_fractions(params: AfdParams, wl: AfdWorkload, r: Any) -> dict[str, np.ndarray]:
    """Theory's idle shares: each side waits for the bottleneck, η = 1 − t / τ (paper Eq. 23 in steady state)."""
    r = check_ratio(r)
    t = step_times(params, wl, r)
    tau = np.maximum(np.maximum(t["t_A"], t["t_C"]), t["t_F"])
    return {"eta_A": 1 - t["t_A"] / tau, "eta_F": 1 - t["t_F"] / tau}
