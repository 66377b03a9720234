"""α/β of the AFD model (paper 001 Eq. 2-4) fitted by least squares from a backend's own decode steps.

A decode step at context c and batch b is one `evaluate` with `Workload(prefill=c - 1, decode=1, batch=b)`;
its per-operator breakdown (`tpot_ops_ms`, already summed over layers by the backend) is split into
    attention side: norm_attn, q/k/v_proj, attn_score, softmax, attn_value, o_proj
    FFN side:       norm_mlp, mlp_gate, mlp_up, mlp_act, mlp_down
and the head (embed, final_norm, lm_head) goes to the side `head_side` names.

How per-layer costs combine: a step runs every active layer once, so the step's attention (FFN) time is
the SUM over layers of each layer's attention (FFN) time — a heterogeneous IHA genome's layers each add
their own slope and intercept, identity-attention layers add nothing to the attention side and pruned
layers nothing at all. Sums of per-layer linear models are linear, so one (α, β) per side is exact when
each layer is; the fit's R² reports how linear the backend really is (roofline kinks, mapper tiling).
The paper's model is per step (τ = max of the step sums); a layer-by-layer A/F ping-pong would instead
cost Σ_l max(t_A,l, t_F,l) ≥ max(Σ t_A,l, Σ t_F,l) — equal for homogeneous layers.

Communication is not in any backend: one round trip per active layer moves B·d_model activations each
way over the A↔F link, t_C = 2·L·B·d_model·act_bytes / bandwidth + 2·L·latency, which is exactly linear.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.optimize import lsq_linear

from backends.interface import Backend, BackendError, Workload
from backends.serving.afd import AfdParams, AfdWorkload
from forge.spaces.arrays import PopArrays

ATTN_OPS = ("norm_attn", "q_proj", "k_proj", "v_proj", "attn_score", "softmax", "attn_value", "o_proj")
FFN_OPS = ("norm_mlp", "mlp_gate", "mlp_up", "mlp_act", "mlp_down")
HEAD_OPS = ("embed", "final_norm", "lm_head")
HEAD_SIDES = ("ffn", "attention")


@dataclass(frozen=True)
class Link:
    """The A↔F link of one attention instance."""

    gbs: float = 50.0
    latency_us: float = 10.0


def fit_linear(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative least squares of Y (n, P) on X (n, k), one fit per column → (coef (k, P), R² (P,))."""
    coef = np.stack([lsq_linear(X, Y[:, j], bounds=(0, np.inf)).x for j in range(Y.shape[1])], axis=1)
    resid = Y - X @ coef
    tot = ((Y - Y.mean(axis=0)) ** 2).sum(axis=0)
    r2 = 1 - (resid ** 2).sum(axis=0) / np.where(tot > 0, tot, 1.0)
    return coef, r2


def step_split(backend: Backend, pop: Any, batch: int, context: int, bits: tuple[int, int, int],
               head_side: str = "ffn") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Attention-side and FFN-side ms of one decode step per genome, and feasibility."""
    wl = Workload(prefill=max(int(context) - 1, 1), decode=1, batch=int(batch),
                  **dict(zip(("weight_bits", "act_bits", "kv_bits"), bits)))
    table = backend.evaluate(pop, wl)
    n = len(table)
    if not table.extras or "tpot_ops_ms" not in (table.extras[0] or {}):
        raise BackendError(f"backend {getattr(backend, 'name', backend)!r} reports no per-operator decode breakdown "
                           "(extras.tpot_ops_ms) for this population; allowed: roofline, gemmini, eyeriss, flat, dxe "
                           "with breakdown_max >= the population size")
    attn_ops = ATTN_OPS + (HEAD_OPS if head_side == "attention" else ())
    ffn_ops = FFN_OPS + (HEAD_OPS if head_side == "ffn" else ())
    a = np.array([sum(e.get("tpot_ops_ms", {}).get(k, 0.0) for k in attn_ops) for e in table.extras])
    f = np.array([sum(e.get("tpot_ops_ms", {}).get(k, 0.0) for k in ffn_ops) for e in table.extras])
    return a, f, np.asarray(table.feasible, bool).reshape(n)


def comm_coefficients(pop: PopArrays, link: Link, act_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """α_C (ms per request) and β_C (ms) of the per-layer round trip (module doc)."""
    layers = pop.active.sum(axis=1).astype(float)
    alpha = 2 * layers * pop.d_model * (act_bits / 8) / (link.gbs * 1e9) * 1e3
    return alpha, 2 * layers * link.latency_us * 1e-3


def fit_afd(backend: Backend, pop: PopArrays, wl: AfdWorkload, bits: tuple[int, int, int], link: Link,
            grid: dict[str, Sequence[float]], head_side: str = "ffn") -> tuple[AfdParams, dict[str, np.ndarray]]:
    """Per-genome AfdParams (ms) and fit quality: attention on (T, 1) over a batch × load grid, FFN on (n, 1)."""
    if head_side not in HEAD_SIDES:
        raise BackendError(f"afd.head_side = {head_side!r} is unknown; allowed: {', '.join(HEAD_SIDES)}")
    ctx0 = wl.mu_P + wl.mu_D
    pts = [(max(int(round(wl.B * b)), 1), max(int(round(ctx0 * s)), 2))
           for b in grid["batch_scale"] for s in grid["load_scale"]]
    att, ok = [], np.ones(pop.P, bool)
    for b, c in pts:
        a, _, feas = step_split(backend, pop, b, c, bits, head_side)
        att.append(a), np.logical_and(ok, feas, out=ok)
    ffn_n = [max(int(round(wl.B * s)), 1) for s in grid["ffn_scale"]]
    ffn = []
    for n in ffn_n:
        _, f, feas = step_split(backend, pop, n, 2, bits, head_side)
        ffn.append(f), np.logical_and(ok, feas, out=ok)
    XA = np.array([[b * c, 1.0] for b, c in pts])
    XF = np.array([[n, 1.0] for n in ffn_n])
    ca, r2a = fit_linear(XA, np.nan_to_num(np.array(att), posinf=0.0))
    cf, r2f = fit_linear(XF, np.nan_to_num(np.array(ffn), posinf=0.0))
    cf[0] = np.maximum(cf[0], 1e-12)  # α_F > 0 keeps the ratios finite
    ac, bc = comm_coefficients(pop, link, bits[1])
    params = AfdParams(alpha_A=ca[0], beta_A=ca[1], alpha_F=cf[0], beta_F=cf[1], alpha_C=ac, beta_C=bc)
    return params, {"r2_attention": r2a, "r2_ffn": r2f, "feasible": ok}
