"""Per-instance latency of a pool device: Forge's roofline with the template's numbers, fitted to the linear
forms the batching simulator sums in closed form.

The roofline is the one of `backends.gpu.roofline` (its efficiencies and launch overhead from
conf/backend/roofline.yaml): t = Σ_ops max(FLOPs / (peak·η_c), bytes / (bandwidth·η_m)) + launch per kernel,
operators from `forge.lm.workload`. The FLOPs and bytes of each grid point are computed once per genome and the
roofline is applied to all devices at once (tests check it equals `RooflineBackend.evaluate`). Fits (scipy
non-negative least squares, R² reported):
    prefill batch of prompts L_i:       t_P = a1·Σ L_i + a2·Σ L_i² + b_P     (attention is quadratic in L)
    one decode step over n requests:    t_D = a·Σ context_i + c·n + b_D
`latency=systolic` (serve.pools.latency) costs the same grid points with Forge's systolic mapper instead
(`backends.systolic.SystolicBackend`, mode overlapped, bf16). The instance's n = cores·lanes·tp arrays split
the work evenly: one array is a template (`systolic_template`) with rows = cols = array_height, vector lanes =
vector_width, its 1/n share of HBM bandwidth as DRAM bytes/cycle, and two buffer levels (assumptions): its share
of the global buffer (holds input, weight, output; 2·ah B/cycle) and its lane's share of the core's local buffer
(holds input, weight; 4·ah B/cycle, an ah-wide bf16 input and weight row per cycle). Attention is fused
(FlashAttention-style, scores stay on chip), and activations stay on chip between operators when a producer and
a consumer copy (2 · tokens · d_model · 2 B) fit the instance's global buffers: a batch that does not fit runs
in chunks of the most sequences that do (time scaled by batch / chunk; fewer sequences per chunk = less weight
reuse), and a single sequence that does not fit goes through HBM; so the global buffer decides long prefills. Device time = the array's time for the whole grid point / n. Cross-array reuse through the shared global buffer is not modelled, so
HBM-bound long prefills are pessimistic and then do not speed up with bigger arrays. Buffers and vector width
change latency here, not only cost; the roofline's launch/layer overheads are not added.
An instance is `tp` devices of a server in tensor parallel (the fewest, a divisor of the server's device
count, whose memory holds the weights in `weights_share` of it); its peak, bandwidth and memory add up
(the all-reduce traffic is not modelled).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from backends.serving.fit import fit_linear
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome
from forge.lm.workload import Precision, head_ops, layer_ops, weight_storage

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
    return fit_grid(tp, td)


def systolic_template(v: np.ndarray, c: dict[str, Any], tp: int, on_chip: bool) -> dict[str, Any]:
    """One systolic array of a pool device row `v` (Table I values) as a make_template config (module doc)."""
    from backends.serving.pool import col, device_perf

    ah, lanes, cores = int(col(v, "array_height")), float(col(v, "lanes")), float(col(v, "cores"))
    n, clock = cores * lanes * tp, float(c["clock_ghz"])
    return {"name": "pool-array", "rows": ah, "cols": ah, "clock_ghz": clock, "dataflows": ["ws", "os"],
            "dram_bytes_per_cycle": float(device_perf(v[None], c)["bw"][0]) * tp / (clock * 1e9 * n),
            "dram_pj_per_byte": 0.0, "mac_pj": 1.0, "fused_attention": True, "activations_on_chip": on_chip, "vector_lanes": int(col(v, "vector_width")),
            "buffers": [{"name": "global", "bytes": int(col(v, "global_buffer_mb") * 2**20 / (cores * lanes)),
                         "holds": ["input", "weight", "output"], "bytes_per_cycle": 2.0 * ah},
                        {"name": "local", "bytes": int(col(v, "local_buffer_kb") * 1024 / lanes),
                         "holds": ["input", "weight"], "bytes_per_cycle": 4.0 * ah}]}


def systolic_grid(genome: Genome, v: np.ndarray, c: dict[str, Any], tp: int) -> dict[str, np.ndarray]:
    """Seconds of every PREFILL_GRID and DECODE_GRID point on one instance from the systolic mapper."""
    from backends.interface import Workload
    from backends.serving.pool import col
    from backends.systolic import SystolicBackend

    bits = {"weight_bits": 16, "act_bits": 16, "kv_bits": 16}
    be = {on: SystolicBackend(systolic_template(v, c, tp, on), precision=bits) for on in (False, True)}
    n, glb = float(col(v, "cores") * col(v, "lanes") * tp), float(col(v, "global_buffer_mb")) * 2**20 * tp

    def ms(b: int, tokens: int, wl: dict[str, int], key: str) -> float:
        fit = int(glb // (4 * tokens * genome.d_model))  # sequences whose activations fit (module doc)
        bb = min(b, fit) if fit >= 1 else b
        t = be[fit >= 1].evaluate([genome], Workload(batch=bb, **wl, **bits))
        return float(getattr(t, key)[0]) * b / bb

    tp_s = [ms(b, L, {"prefill": L, "decode": 1}, "ttft_ms") for b, L in PREFILL_GRID]
    td_s = [ms(b, 1, {"prefill": ctx - 1, "decode": 1}, "tpot_ms") for b, ctx in DECODE_GRID]
    return {"prefill_s": np.array(tp_s) * 1e-3 / n, "decode_s": np.array(td_s) * 1e-3 / n}


def systolic_models(genome: Genome, v: np.ndarray, c: dict[str, Any], tp: int) -> dict[str, np.ndarray]:
    """fit_models' coefficients for one instance (device row v, tp devices) from the systolic mapper."""
    g = systolic_grid(genome, v, c, tp)
    return fit_grid(g["prefill_s"][:, None], g["decode_s"][:, None])


def fit_grid(tp: np.ndarray, td: np.ndarray) -> dict[str, np.ndarray]:
    """Least-squares forms of the module doc from grid times (G, D) in seconds."""
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
