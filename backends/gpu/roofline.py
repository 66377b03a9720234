"""Analytical GPU roofline (`backend=roofline`), vectorized over a whole population.

Per operator of `forge.lm.workload` (never recounted here):
    t = max(FLOPs / (peak · η_compute), bytes / (bandwidth · η_memory)) + launch overhead per kernel,
plus a per-layer overhead per active layer (PLAS Appendix E, Eq. 27, generalised to heterogeneous
per-layer IHA genomes). `ideal=True` sets η = 1 and both overheads to 0, which reproduces PLAS Eq. 29
(prefill) and Eq. 37 (decode) for dense homogeneous models (tests/backends/gpu/test_roofline.py).

TPOT is the exact mean over the L_d decode steps (context c = L_p + 1 … L_p + L_d): every operator's
FLOPs and bytes are affine in c, so Σ_c max(f(c), g(c)) is summed in closed form (`sum_max_affine`);
a sliding-window layer's are affine up to its window and constant after (`forge.lm.workload.window_steps`),
summed in two closed-form pieces.
Energy: e_flop · FLOPs + e_byte · bytes + P_static · time (the energy roofline, hardware.md).

Precision genes: every byte count comes from the analyzer's per-genome bytes (weights, activations, KV), the
memory check from `weight_storage`, and the peak FLOP/s per genome (`genome_bits`, `Hardware.peak_flops`).
`workload.batch=max` costs each genome at the largest batch whose weights + KV cache of prefill + decode
tokens fit `mem_usable` of the device memory (`max_batch`); extras["batch"] reports the batch used.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Sequence

import numpy as np

from backends.gpu.hardware import Hardware, load_hardware
from backends.interface import BackendError, CostTable, Workload, as_population
from forge.spaces.arrays import LAYER_KEYS, PopArrays
from forge.genomes.genes import ATTENTION_SHAPE
from forge.lm.workload import (HEAD_OP_NAMES, OP_NAMES, OpTable, head_ops, kv_cache_bytes, layer_ops, layer_windows,
                            max_batch, sum_capped_steps, weight_storage, window_steps)

ALL_OPS = OP_NAMES + HEAD_OP_NAMES


def sum_max_affine(f0: np.ndarray, fs: np.ndarray, g0: np.ndarray, gs: np.ndarray, n: int) -> np.ndarray:
    """Σ_{u=0}^{n-1} max(f0 + fs·u, g0 + gs·u), exactly, elementwise.

    max(f, g) = g + max(h, 0) with h = f − g affine; h > 0 on one contiguous run of u, summed in closed form.
    """
    a, c = f0 - g0, fs - gs
    base = n * g0 + gs * n * (n - 1) / 2.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # huge roots are clipped next
        root = np.where(c != 0, -a / np.where(c != 0, c, 1.0), 0.0)
    root = np.clip(root, -1.0, np.asarray(n, dtype=float))  # n may be an array (steps before a window)
    lo = np.where(c > 0, np.floor(root) + 1, 0.0)
    hi = np.where(c < 0, np.ceil(root) - 1, n - 1.0)
    flat = c == 0
    lo = np.where(flat, np.where(a > 0, 0.0, n), np.clip(lo, 0, n))
    hi = np.where(flat, n - 1.0, np.clip(hi, -1, n - 1))
    cnt = np.maximum(hi - lo + 1, 0.0)
    return base + cnt * a + c * (lo + hi) * cnt / 2.0


ATTN_KEYS = ("attn", *ATTENTION_SHAPE)  # the fields a decode step's context slope depends on (key bases below)


def genome_bits(pop: PopArrays, wl: Workload) -> tuple[np.ndarray, np.ndarray]:
    """(weight, activation) element bits per genome (P,): the workload's bits where a genome has no genes.

    Genes carry bytes per element (MX shared scale included): element bits = floor(8 · bytes), exact for
    plain formats and MX blocks > 8 (the default 32); a block ≤ 8 counts its scale as element bits.
    """
    with np.errstate(invalid="ignore"):
        own = [np.floor(b * 8 + 1e-9) for b in (pop.weight_bytes, pop.act_bytes)]
    return (np.where(np.isfinite(own[0]), own[0], wl.weight_bits),
            np.where(np.isfinite(own[1]), own[1], wl.act_bits))


def context_slopes(pop: PopArrays, context: int, wl: Workload, batch: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """d FLOPs / d context and d bytes / d context of every (genome, layer, op) of one decode step.

    Only attention operators depend on the context, and only through the attention fields, so the
    slopes are computed once per distinct (attn, n_h, n_kv, d_qk, d_v) — a few thousand rows instead of
    P × L — as the difference of two `layer_ops` calls one context apart, then gathered back. Genomes
    with their own bytes (precision genes) or a per-genome batch (`batch=max`) take the direct way on the
    population itself.
    """
    batch = wl.batch if batch is None else batch
    f = {k: getattr(pop, k).astype(np.int64) for k in ATTN_KEYS}
    if (pop.has_precision or np.ndim(batch) > 0 or layer_windows(pop) is not None  # windows: not in the key
            or max(f["n_h"].max(), f["n_kv"].max()) >= 256
            or max(f["d_qk"].max(), f["d_v"].max()) >= 65536):  # per-genome bytes/batch, or too wide for one key
        a, b = layer_ops(pop, 1, context, batch, wl.precision), layer_ops(pop, 1, context + 1, batch, wl.precision)
        return b.flops - a.flops, b.bytes - a.bytes
    key = (((f["attn"] * 256 + f["n_h"]) * 256 + f["n_kv"]) * 65536 + f["d_qk"]) * 65536 + f["d_v"]
    uniq, inv = np.unique(key, return_inverse=True)
    cols, rest = {}, uniq
    for k, base in zip(ATTN_KEYS[::-1], (65536, 65536, 256, 256, 2**62)):
        cols[k], rest = rest % base, rest // base
    n = len(uniq)
    one = lambda v: np.full(n, v)  # noqa: E731
    sub = PopArrays(active=np.ones((n, 1), np.int64), **{k: v[:, None] for k, v in cols.items()},
                    d_mlp=np.zeros((n, 1), np.int64), d_model=one(1), block_size=one(1), vocab_size=one(1),
                    swiglu=one(False), learned_pos=one(False), tied=one(True), bias_qkv=one(False),
                    bias_all=one(False), layernorm=one(False))
    a = layer_ops(sub, 1, context, batch, wl.precision)
    b = layer_ops(sub, 1, context + 1, batch, wl.precision)
    inv = inv.reshape(pop.P, pop.L)
    return (b.flops - a.flops)[:, 0][inv], (b.bytes - a.bytes)[:, 0][inv]


class RooflineBackend:
    """GPU roofline with efficiencies, launch/layer overheads and an energy roofline."""

    supports_batch_max = True

    def __init__(self, hardware: Any = "a100-40gb", eta_compute: float = 0.6, eta_memory: float = 0.8,
                 launch_us: float = 5.0, layer_us: float = 0.0, ideal: bool = False, mem_usable: float = 0.9,
                 precision: dict | None = None, breakdown_max: int = 32, chunk: int = 256,
                 name: str = "roofline") -> None:
        self.name = name
        self.hw = load_hardware(hardware)
        for k, v in (("eta_compute", eta_compute), ("eta_memory", eta_memory), ("mem_usable", mem_usable)):
            if not 0 < float(v) <= 1:
                raise BackendError(f"backend.{k} = {v!r} is invalid; allowed: a number in (0, 1]")
        for k, v in (("launch_us", launch_us), ("layer_us", layer_us)):
            if float(v) < 0:
                raise BackendError(f"backend.{k} = {v!r} is invalid; allowed: a number >= 0")
        self.ideal = bool(ideal)
        self.eta_compute, self.eta_memory = (1.0, 1.0) if ideal else (float(eta_compute), float(eta_memory))
        self.launch_us, self.layer_us = (0.0, 0.0) if ideal else (float(launch_us), float(layer_us))
        self.mem_usable = float(mem_usable)
        p = dict(precision or {})
        self.default_bits = (int(p.get("weight_bits", 16)), int(p.get("act_bits", 16)), int(p.get("kv_bits", 16)))
        self.breakdown_max, self.chunk = int(breakdown_max), int(chunk)

    # ------------------------------------------------------------------ public
    def evaluate(self, genomes: Sequence[Any] | PopArrays, workload: Workload | None = None) -> CostTable:
        pop = as_population(genomes)
        if workload is None:  # the backend's own default precision
            workload = Workload(**dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits)))
        parts = [self._evaluate_chunk(self.compact(pop.take(np.arange(s, min(s + self.chunk, pop.P)))), workload)
                 for s in range(0, pop.P, self.chunk)]
        cat = lambda k: np.concatenate([p[k] for p in parts])  # noqa: E731
        ttft, tpot, e_tok, feas = cat("ttft_ms"), cat("tpot_ms"), cat("energy_per_token_uj"), cat("feasible")
        reasons = [r for p in parts for r in p["reason"]]
        extras = [e for p in parts for e in p["extras"]]
        inf = np.where(feas, 1.0, np.inf)
        return CostTable(ttft * inf, tpot * inf, e_tok * inf, feas, reasons, extras)

    @staticmethod
    def compact(pop: PopArrays) -> PopArrays:
        """Move active layers to the front and drop all-pruned trailing slots (costs sum over layers)."""
        order = np.argsort(~pop.active.astype(bool), axis=1, kind="stable")
        L = max(int(pop.active.sum(axis=1).max()), 1)
        kw = {f.name: getattr(pop, f.name) for f in fields(PopArrays)}
        move = lambda a: np.take_along_axis(a, order, axis=1)[:, :L]  # noqa: E731
        for k in LAYER_KEYS:
            kw[k] = move(kw[k])
        kw["genes"] = {k: move(v) for k, v in pop.genes.items()}  # registered genes (forge.genomes.genes) move too
        return PopArrays(**kw)

    def rates(self, workload: Workload, pop: PopArrays | None = None) -> tuple[Any, float]:
        """Effective FLOP/s and bytes/s: under the workload's bits, or per genome (P,) with `pop`."""
        bits = (workload.weight_bits, workload.act_bits) if pop is None else genome_bits(pop, workload)
        return self.hw.peak_flops(*bits) * self.eta_compute, self.hw.mem_bw_gbs * 1e9 * self.eta_memory

    def batch(self, pop: PopArrays, wl: Workload) -> Any:
        """The workload's batch, or per genome (P,) the largest that fits `mem_usable` of the device (0: none)."""
        if not wl.batch_max:
            return wl.batch
        return max_batch(pop, wl.prefill + wl.decode, self.hw.mem_gb * 1e9 * self.mem_usable, wl.precision)

    # ------------------------------------------------------------------ internals
    def _op_seconds(self, t: OpTable, byt: np.ndarray, flops_s: float, bytes_s: float) -> np.ndarray:
        return np.maximum(t.flops / flops_s, byt / bytes_s) + t.exists * self.launch_us * 1e-6

    def _prefill(self, pop: PopArrays, wl: Workload, fs: np.ndarray, bs: float, B: Any) -> dict[str, np.ndarray]:
        prec, Lp = wl.precision, wl.prefill
        lay = layer_ops(pop, Lp, Lp, B, prec)
        head = head_ops(pop, Lp, 1, B, prec)  # logits of the last prompt token only
        lb, hb = lay.bytes, head.bytes
        ops = np.concatenate([self._op_seconds(lay, lb, fs, bs).sum(axis=1),
                              self._op_seconds(head, hb, fs, bs)[:, 0]], axis=1)
        seconds = ops.sum(axis=1) + pop.active.sum(axis=1) * self.layer_us * 1e-6
        return {"s": seconds, "ops": ops, "flops": lay.total("flops") + head.total("flops"),
                "bytes": lb.sum(axis=(1, 2)) + hb.sum(axis=(1, 2))}

    def _decode(self, pop: PopArrays, wl: Workload, fs: np.ndarray, bs: float, B: Any) -> dict[str, np.ndarray]:
        """Exact sums over decode steps c = L_p+1 … L_p+L_d of per-op max(compute, memory) times.

        Operators whose FLOPs/bytes do not change with the context (all but attention) are n × one step;
        the others are affine in c and go through `sum_max_affine`.
        """
        prec, n, lo = wl.precision, wl.decode, wl.prefill + 1
        t0 = layer_ops(pop, 1, lo, B, prec)
        b0 = t0.bytes
        df, db = context_slopes(pop, lo, wl, B)
        var = np.flatnonzero((df != 0).any(axis=(0, 1)) | (db != 0).any(axis=(0, 1)))
        f0, g0 = t0.flops / fs, b0 / bs
        sum_t = n * np.maximum(f0, g0)
        fs_var = np.broadcast_to(fs, f0.shape)[:, :, var]
        cap = window_steps(pop, lo)  # steps during which a windowed layer's keys still grow; inf = full
        if np.isfinite(cap).any():
            sum_t[:, :, var] = self._windowed_sum(f0[:, :, var], df[:, :, var] / fs_var, g0[:, :, var],
                                                  db[:, :, var] / bs, n, cap[:, :, None])
        else:
            sum_t[:, :, var] = sum_max_affine(f0[:, :, var], df[:, :, var] / fs_var, g0[:, :, var],
                                              db[:, :, var] / bs, n)
        sum_t += n * t0.exists * self.launch_us * 1e-6
        head = head_ops(pop, 1, 1, B, prec)
        hb = head.bytes
        ops = np.concatenate([sum_t.sum(axis=1), self._op_seconds(head, hb, fs, bs)[:, 0] * n], axis=1)
        seconds = ops.sum(axis=1) + n * pop.active.sum(axis=1) * self.layer_us * 1e-6
        if np.isfinite(cap).any():  # Σ min(u, cap) per layer: the slope stops at each window
            tri = sum_capped_steps(cap, n)[:, :, None]
            flops = n * t0.total("flops") + (tri * df).sum(axis=(1, 2)) + n * head.total("flops")
            byt = n * b0.sum(axis=(1, 2)) + (tri * db).sum(axis=(1, 2)) + n * hb.sum(axis=(1, 2))
        else:
            tri = n * (n - 1) / 2.0  # Σ u over the steps: quantities are affine in the context
            flops = n * t0.total("flops") + tri * df.sum(axis=(1, 2)) + n * head.total("flops")
            byt = n * b0.sum(axis=(1, 2)) + tri * db.sum(axis=(1, 2)) + n * hb.sum(axis=(1, 2))
        kv_per_token = t0.total("kv_write_bytes")  # per new token (all of the batch)
        return {"s": seconds, "ops": ops, "flops": flops, "bytes": byt, "kv_per_token": kv_per_token}

    @staticmethod
    def _windowed_sum(f0: np.ndarray, fs: np.ndarray, g0: np.ndarray, gs: np.ndarray, n: int,
                      cap: np.ndarray) -> np.ndarray:
        """Σ_u max(f(min(u, cap)), g(min(u, cap))): affine for the first min(cap + 1, n) steps, then constant."""
        k = np.minimum(cap, n - 1.0)  # finite; the last step of the affine piece
        n_aff = k + 1.0
        return sum_max_affine(f0, fs, g0, gs, n_aff) + (n - n_aff) * np.maximum(f0 + fs * k, g0 + gs * k)

    def _evaluate_chunk(self, pop: PopArrays, wl: Workload) -> dict[str, Any]:
        fs, bs = self.rates(wl, pop)
        B = self.batch(pop, wl)
        Bc = np.maximum(B, 1)  # batch=max: a genome that fits no sequence is costed at 1 and infeasible
        pre = self._prefill(pop, wl, fs[:, None, None], bs, Bc)
        dec = self._decode(pop, wl, fs[:, None, None], bs, Bc)
        hw = self.hw
        e_flop = hw.flop_energy_pj(hw.peak_flops(*genome_bits(pop, wl))) * 1e-12
        energy = (e_flop * (pre["flops"] + dec["flops"]) + hw.e_byte_pj * 1e-12 * (pre["bytes"] + dec["bytes"])
                  + hw.static_w * (pre["s"] + dec["s"]))
        ctx = wl.prefill + wl.decode  # one sequence's KV cache; a windowed layer holds min(w, ctx) positions
        kv1 = (kv_cache_bytes(pop, ctx, 1, wl.precision) if layer_windows(pop) is not None
               else dec["kv_per_token"] / Bc * ctx)
        mem_need, feas, reasons = self._memory(pop, wl, B, kv1)
        out = {"ttft_ms": pre["s"] * 1e3, "tpot_ms": dec["s"] / wl.decode * 1e3,
               "energy_per_token_uj": energy / (Bc * (wl.prefill + wl.decode)) * 1e6, "feasible": feas, "reason": reasons}
        out["extras"] = self._extras(pop, pre, dec, mem_need, wl, np.broadcast_to(B, (pop.P,)))
        return out

    def _memory(self, pop: PopArrays, wl: Workload, B: Any,
                kv1: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Weights (`weight_storage`, the genome's own bytes) + KV cache of prefill + decode tokens × batch, against
        `mem_usable` of the device; under batch=max a genome is infeasible when not even one sequence fits."""
        ctx, hw = wl.prefill + wl.decode, self.hw
        weights = weight_storage(pop, wl.precision)
        need = weights + kv1 * np.maximum(B, 1)
        budget = hw.mem_gb * 1e9 * self.mem_usable
        if not wl.batch_max:
            feas = need <= budget
            return need, feas, ["" if ok else f"needs {n / 1e9:.2f} GB (weights + KV cache) > {budget / 1e9:.2f} GB "
                                f"usable on {hw.name}" for ok, n in zip(feas, need)]
        feas = B >= 1
        return need, feas, ["" if ok else f"batch 1 does not fit: weights {w / 1e9:.2f} GB + KV cache {k / 1e9:.2f} GB "
                            f"of {ctx} tokens > {budget / 1e9:.2f} GB usable on {hw.name}"
                            for ok, w, k in zip(feas, weights, kv1)]

    def _extras(self, pop: PopArrays, pre: dict, dec: dict, mem: np.ndarray, wl: Workload,
                B: np.ndarray) -> list[dict[str, Any]]:
        """Small per-genome extras; the per-operator breakdown only for small populations (CLI, reports)."""
        base = [{"hardware": self.hw.name, "memory_gb": float(m / 1e9), "batch": int(b)} for m, b in zip(mem, B)]
        if pop.P <= self.breakdown_max:
            for i, e in enumerate(base):
                e["ttft_ops_ms"] = {k: float(v * 1e3) for k, v in zip(ALL_OPS, pre["ops"][i]) if v > 0}
                e["tpot_ops_ms"] = {k: float(v * 1e3 / wl.decode) for k, v in zip(ALL_OPS, dec["ops"][i]) if v > 0}
                e["ttft_layer_overhead_ms"] = float(pop.active[i].sum() * self.layer_us * 1e-3)
        return base

    def config(self) -> dict[str, Any]:
        """The constructor arguments, to write a (calibrated) backend YAML."""
        return {"_target_": "backends.gpu.roofline.RooflineBackend", "name": self.name,
                "hardware": {f.name: getattr(self.hw, f.name) for f in fields(Hardware)},
                "eta_compute": self.eta_compute, "eta_memory": self.eta_memory, "launch_us": self.launch_us,
                "layer_us": self.layer_us, "ideal": self.ideal, "mem_usable": self.mem_usable,
                "precision": dict(zip(("weight_bits", "act_bits", "kv_bits"), self.default_bits))}
