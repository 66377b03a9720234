"""Keys attended per layer under the sliding-window gene, in closed form over contexts (forge.lm.workload's seam).

A layer with window w > 0 attends min(w, context) keys; decode sums over a growing context are affine in it up
to the window and constant after it. forge.lm.workload re-exports every name here.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from forge.spaces.arrays import PopArrays


def layer_windows(pop: PopArrays) -> np.ndarray | None:
    """(P, L) attention window per layer (0 = full) on attention layers, or None when no layer has one.

    Populations built before the window gene (forge.genomes.genes) carry no `window` array: all full."""
    w = getattr(pop, "window", None)
    if w is None:
        return None
    w = np.where(np.asarray(pop.attn).astype(bool), np.asarray(w, dtype=np.int64), 0)
    return w if w.any() else None


def attended_keys(pop: PopArrays, context: Any, dtype: Any = np.float64) -> np.ndarray:
    """Keys each query attends per layer: min(window, context) on windowed layers, else the context.

    (P, 1) when no layer has a window (the historical broadcast shape), else (P, L)."""
    C = _bcast(context, pop.P, dtype)
    w = layer_windows(pop)
    return C if w is None else np.where(w > 0, np.minimum(w.astype(dtype), C), C)


def window_steps(pop: PopArrays, first_context: Any) -> np.ndarray:
    """(P, L) decode steps after the first (at `first_context`) during which a layer's attended keys still
    grow: w - first_context (clipped at 0) on windowed layers, inf on full ones. Step u (context
    first_context + u) costs the affine value at min(u, window_steps): sums split there in closed form."""
    c0 = _bcast(first_context, pop.P)
    w = layer_windows(pop)
    if w is None:
        return np.full((pop.P, pop.L), np.inf)
    return np.where(w > 0, np.maximum(w - c0, 0.0), np.inf)


def sum_capped_steps(cap: np.ndarray, n: Any) -> np.ndarray:
    """Σ_{u=0}^{n-1} min(u, cap) elementwise (cap >= 0, inf = uncapped): the decode sum of a windowed slope."""
    n = np.asarray(n, dtype=float)
    k = np.minimum(cap, n - 1.0)
    return k * (k + 1) / 2.0 + (n - 1.0 - k) * k


def decode_sum(pop: PopArrays, lo: int, hi: int, x_lo: np.ndarray, x_hi: np.ndarray) -> np.ndarray:
    """Σ_{c=lo}^{hi} x(c) of per-layer quantities (P, L, ...) affine in each layer's attended keys, from their
    values at contexts lo and hi: the endpoints' mean × steps without windows, split at each window with."""
    n = hi - lo + 1
    if layer_windows(pop) is None or hi == lo:
        return n * (x_lo + x_hi) / 2.0
    k_lo, k_hi = (np.broadcast_to(attended_keys(pop, c), (pop.P, pop.L)) for c in (lo, hi))
    extra = (1,) * (np.ndim(x_lo) - 2)
    dk = (k_hi - k_lo).reshape(pop.P, pop.L, *extra)
    slope = np.divide(x_hi - x_lo, dk, out=np.zeros(np.broadcast_shapes(np.shape(x_lo), dk.shape)), where=dk > 0)
    return n * x_lo + slope * sum_capped_steps(window_steps(pop, lo), n).reshape(dk.shape)


def causal_keys(pop: PopArrays, tokens: Any) -> np.ndarray:
    """Mean keys per query of a causal prefill of `tokens` (P, L): (T+1)/2 on full layers and
    Σ_{i=1}^{T} min(w, i) / T under a window w (the analyzer's prefill counts the full min(w, T) square)."""
    T = np.broadcast_to(_bcast(tokens, pop.P), (pop.P, pop.L))
    w = layer_windows(pop)
    if w is None:
        return (T + 1) / 2.0
    k = np.where(w > 0, np.minimum(w, T), T)
    return (k * (k + 1) / 2.0 + (T - k) * k) / T


def _bcast(x: Any, P: int, dtype: Any = np.float64) -> np.ndarray:
    """Scalar or (P,) → (P, 1) float array, broadcastable against (P, L)."""
    return np.broadcast_to(np.asarray(x, dtype=dtype), (P,)).reshape(P, 1)
