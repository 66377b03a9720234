"""Per-instance latency of a pool device: Forge's roofline with the template's numbers, fitted to the linear
forms the batching simulator sums in closed form.

The roofline is the one of `backends.gpu.roofline` (its efficiencies and launch overhead from
conf/backend/roofline.yaml): t = Σ_ops max(FLOPs / (peak·η_c), bytes / (bandwidth·η_m)) + launch per kernel,
operators from `forge.workload`. The FLOPs and bytes of each grid point are computed once per genome and the
roofline is applied to all devices at once (tests check it equals `RooflineBackend.evaluate`). Fits (scipy
non-negative least squares, R² reported):
    prefill batch of prompts L_i:       t_P = a1·Σ L_i + a2·Σ L_i² + b_P     (attention is quadratic in L)
    one decode step over n requests:    t_D = a·Σ context_i + c·n + b_D
An instance is `tp` devices of a server in tensor parallel (the fewest, a divisor of the server's device
count, whose memory holds the weights in `weights_share` of it); its peak, bandwidth and memory add up
(the all-reduce traffic is not modelled).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from backends.serving.fit import fit_linear
from forge.arrays import PopArrays
from forge.genome import Genome
from forge.workload import Precision, head_ops, layer_ops, weight_storage

PREFILL_GRID = ((1, 128), (1, 512), (1, 2048), (4, 256), (4, 1024), (8, 512), (16, 2048))   # (batch, prompt)
DECODE_GRID = ((1, 256), (1, 2048), (16, 512), (64, 256), (64, 2048), (256, 1024))         # (batch, context)


def roofline_knobs() -> dict[str, float]:
    """η_compute, η_memory and launch overhead of the shipped roofline config (one source of truth)."""
    from backends.registry import backend_config

    c = backend_config("roofline")
    return {"eta_c": float(c["eta_compute"]), "eta_m": float(c["eta_memory"]), "launch_s": float(c["launch_us"]) * 1e-6,
            "layer_s": float(c.get("layer_us", 0.0)) * 1e-6}


def _ops(pop: PopArrays, tokens: int, context: int, batch: int, prec: Precision) -> tuple[np.ndarray, np.ndarray, float]:
    lay = layer_ops(pop, tokens, context, batch, prec)
    head = head_ops(pop, tokens, 1, batch, prec)  # logits of the last token only
    f = np.concatenate([lay.flops[0].ravel(), head.flops[0].ravel()])
    b = np.concatenate([lay.bytes[0].ravel(), head.bytes[0].ravel()])
    return f, b, float((f > 0).sum())


@lru_cache(maxsize=16)
def grid_ops(genome: Genome, bits: tuple[int, int, int] = (16, 16, 16)) -> dict[str, Any]:
    """FLOPs/bytes per operator at every prefill and decode grid point (cached per genome)."""
    pop, prec = PopArrays.from_genomes([genome]), Precision.from_bits(*bits)
    pre = [_ops(pop, L, L, b, prec) for b, L in PREFILL_GRID]
    dec = [_ops(pop, 1, c, b, prec) for b, c in DECODE_GRID]
    kv = layer_ops(pop, 1, 1, 1, prec).total("kv_write_bytes")[0]
    return {"pre": pre, "dec": dec, "layers": float(pop.active.sum()), "kv_per_token": float(kv),
            "weights": float(weight_storage(pop, prec)[0])}


def roofline_seconds(flops: np.ndarray, bw: np.ndarray, ops: tuple[np.ndarray, np.ndarray, float],
                     layers: float, k: dict[str, float]) -> np.ndarray:
    """Roofline time of one grid point on every device (flops, bw: (D,) peak FLOP/s and bytes/s)."""
    f, b, kernels = ops
    t = np.maximum(f[None, :] / (flops[:, None] * k["eta_c"]), b[None, :] / (bw[:, None] * k["eta_m"])).sum(axis=1)
    return t + kernels * k["launch_s"] + layers * k["layer_s"]


def fit_models(genome: Genome, flops: np.ndarray, bw: np.ndarray, bits: tuple[int, int, int] = (16, 16, 16)) -> dict[str, np.ndarray]:
    """Prefill (a1, a2, b_P) and decode (a, c, b_D) coefficients in seconds for each instance (D rows)."""
    g, k = grid_ops(genome, bits), roofline_knobs()
    tp = np.array([roofline_seconds(flops, bw, o, g["layers"], k) for o in g["pre"]])   # (G, D)
    td = np.array([roofline_seconds(flops, bw, o, g["layers"], k) for o in g["dec"]])
    Xp = np.array([[b * L, b * L * L, 1.0] for b, L in PREFILL_GRID])
    Xd = np.array([[b * c, b, 1.0] for b, c in DECODE_GRID])
    cp, r2p = fit_linear(Xp, tp)
    cd, r2d = fit_linear(Xd, td)
    return {"prefill": cp.T, "decode": cd.T, "r2_prefill": r2p, "r2_decode": r2d}


def tensor_parallel(devices: np.ndarray, mem: np.ndarray, weights: float, share: float = 0.6) -> np.ndarray:
    """Fewest devices per instance (a divisor of the server's count) holding the weights; 0 if none does."""
    out = np.zeros(len(devices), dtype=np.int64)
    for i, (d, m) in enumerate(zip(devices.astype(int), mem)):
        fits = [t for t in range(1, d + 1) if d % t == 0 and weights <= share * t * m]
        out[i] = fits[0] if fits else 0
    return out
