"""Analytical GPU roofline (`backend=roofline`), vectorized over a whole population.

Per operator of `forge.workload` (never recounted here):
    t = max(FLOPs / (peak · η_compute), bytes / (bandwidth · η_memory)) + launch overhead per kernel,
plus a per-layer overhead per active layer (PLAS Appendix E, Eq. 27, generalised to heterogeneous
per-layer IHA genomes). `ideal=True` sets η = 1 and both overheads to 0, which reproduces PLAS Eq. 29
(prefill) and Eq. 37 (decode) for dense homogeneous models (tests/backends/test_roofline.py).

TPOT is the exact mean over the L_d decode steps (context c = L_p + 1 … L_p + L_d): every operator's
FLOPs and bytes are affine in c, so Σ_c max(f(c), g(c)) is summed in closed form (`sum_max_affine`).
Energy: e_flop · FLOPs + e_byte · bytes + P_static · time (the energy roofline, hardware.md).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Sequence

import numpy as np

from backends.interface import BackendError, CostTable, Workload, as_population
from forge.arrays import PopArrays
from forge.workload import HEAD_OP_NAMES, OP_NAMES, OpTable, head_ops, layer_ops

ALL_OPS = OP_NAMES + HEAD_OP_NAMES


@dataclass(frozen=True)
class Hardware:
    """One GPU preset (conf/hardware/<name>.yaml); units in the field names."""

    name: str
    peak_tflops_16: float
    peak_tops_8: float
    mem_bw_gbs: float
    mem_gb: float
    tdp_w: float
    static_w: float
    e_byte_pj: float
    e_flop_pj: float | None = None

    def peak_flops(self, weight_bits: int, act_bits: int) -> float:
        """int8 tensor-core peak when both operands are ≤ 8 bit; fp32 assumed at half the 16-bit peak."""
        if weight_bits <= 8 and act_bits <= 8:
            return self.peak_tops_8 * 1e12
        return self.peak_tflops_16 * 1e12 * (0.5 if act_bits > 16 else 1.0)

    def flop_energy_pj(self, peak: float) -> float:
        """Dynamic energy per FLOP: the configured value, else (TDP − P_static) / peak."""
        return self.e_flop_pj if self.e_flop_pj is not None else (self.tdp_w - self.static_w) / peak * 1e12


def hardware_names() -> list[str]:
    from forge.config import group_names

    return group_names("hardware")


def load_hardware(spec: Any) -> Hardware:
    """A preset name from conf/hardware or a mapping with the Hardware fields."""
    if isinstance(spec, Hardware):
        return spec
    if isinstance(spec, str):
        from forge.config import group_yaml

        name, spec = spec, group_yaml("hardware", spec)
        if spec is None:
            raise BackendError(f"hardware preset {name!r} is unknown; allowed: {', '.join(hardware_names())}")
    from forge.config import to_container

    d = dict(to_container(spec))
    allowed = {f.name for f in fields(Hardware)}
    bad = sorted(set(d) - allowed)
    if bad:
        raise BackendError(f"hardware.{bad[0]} is unknown; allowed: {', '.join(sorted(allowed))}")
    missing = sorted(allowed - set(d) - {"e_flop_pj"})
    if missing:
        raise BackendError(f"hardware.{missing[0]} is missing; required: {', '.join(sorted(allowed - {'e_flop_pj'}))}")
    return Hardware(**d)


def sum_max_affine(f0: np.ndarray, fs: np.ndarray, g0: np.ndarray, gs: np.ndarray, n: int) -> np.ndarray:
    """Σ_{u=0}^{n-1} max(f0 + fs·u, g0 + gs·u), exactly, elementwise.

    max(f, g) = g + max(h, 0) with h = f − g affine; h > 0 on one contiguous run of u, summed in closed form.
    """
    a, c = f0 - g0, fs - gs
    base = n * g0 + gs * n * (n - 1) / 2.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # huge roots are clipped next
        root = np.where(c != 0, -a / np.where(c != 0, c, 1.0), 0.0)
    root = np.clip(root, -1.0, float(n))
    lo = np.where(c > 0, np.floor(root) + 1, 0.0)
    hi = np.where(c < 0, np.ceil(root) - 1, n - 1.0)
    flat = c == 0
    lo = np.where(flat, np.where(a > 0, 0.0, n), np.clip(lo, 0, n))
    hi = np.where(flat, n - 1.0, np.clip(hi, -1, n - 1))
    cnt = np.maximum(hi - lo + 1, 0.0)
    return base + cnt * a + c * (lo + hi) * cnt / 2.0


ATTN_KEYS = ("attn", "n_h", "n_kv", "d_qk", "d_v")


def context_slopes(pop: PopArrays, context: int, wl: Workload) -> tuple[np.ndarray, np.ndarray]:
    """d FLOPs / d context and d bytes / d context of every (genome, layer, op) of one decode step.

    Only attention operators depend on the context, and only through the attention fields, so the
    slopes are computed once per distinct (attn, n_h, n_kv, d_qk, d_v) — a few thousand rows instead of
    P × L — as the difference of two `layer_ops` calls one context apart, then gathered back.
    """
    f = {k: getattr(pop, k).astype(np.int64) for k in ATTN_KEYS}
    if max(f["n_h"].max(), f["n_kv"].max()) >= 256 or max(f["d_qk"].max(), f["d_v"].max()) >= 65536:
        a, b = layer_ops(pop, 1, context, wl.batch, wl.precision), layer_ops(pop, 1, context + 1, wl.batch, wl.precision)
        return b.flops - a.flops, b.bytes - a.bytes  # too wide to pack into one key: the direct way
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
    a = layer_ops(sub, 1, context, wl.batch, wl.precision)
    b = layer_ops(sub, 1, context + 1, wl.batch, wl.precision)
    inv = inv.reshape(pop.P, pop.L)
    return (b.flops - a.flops)[:, 0][inv], (b.bytes - a.bytes)[:, 0][inv]


class RooflineBackend:
    """GPU roofline with efficiencies, launch/layer overheads and an energy roofline."""

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
        for k in ("active", "attn", "n_h", "n_kv", "d_qk", "d_v", "d_mlp"):
            kw[k] = np.take_along_axis(kw[k], order, axis=1)[:, :L]
        return PopArrays(**kw)

    def rates(self, workload: Workload) -> tuple[float, float]:
        """Effective FLOP/s and bytes/s under the workload's precision."""
        peak = self.hw.peak_flops(workload.weight_bits, workload.act_bits)
        return peak * self.eta_compute, self.hw.mem_bw_gbs * 1e9 * self.eta_memory

    # ------------------------------------------------------------------ internals
    def _op_seconds(self, t: OpTable, byt: np.ndarray, flops_s: float, bytes_s: float) -> np.ndarray:
        return np.maximum(t.flops / flops_s, byt / bytes_s) + t.exists * self.launch_us * 1e-6

    def _prefill(self, pop: PopArrays, wl: Workload, fs: float, bs: float) -> dict[str, np.ndarray]:
        prec, Lp = wl.precision, wl.prefill
        lay = layer_ops(pop, Lp, Lp, wl.batch, prec)
        head = head_ops(pop, Lp, 1, wl.batch, prec)  # logits of the last prompt token only
        lb, hb = lay.bytes, head.bytes
        ops = np.concatenate([self._op_seconds(lay, lb, fs, bs).sum(axis=1),
                              self._op_seconds(head, hb, fs, bs)[:, 0]], axis=1)
        seconds = ops.sum(axis=1) + pop.active.sum(axis=1) * self.layer_us * 1e-6
        return {"s": seconds, "ops": ops, "flops": lay.total("flops") + head.total("flops"),
                "bytes": lb.sum(axis=(1, 2)) + hb.sum(axis=(1, 2)),
                "weight_bytes": lay.total("weight_bytes") + head.op("lm_head")["weight_bytes"][:, 0]
                + head.op("final_norm")["weight_bytes"][:, 0]}

    def _decode(self, pop: PopArrays, wl: Workload, fs: float, bs: float) -> dict[str, np.ndarray]:
        """Exact sums over decode steps c = L_p+1 … L_p+L_d of per-op max(compute, memory) times.

        Operators whose FLOPs/bytes do not change with the context (all but attention) are n × one step;
        the others are affine in c and go through `sum_max_affine`.
        """
        prec, n, lo = wl.precision, wl.decode, wl.prefill + 1
        t0 = layer_ops(pop, 1, lo, wl.batch, prec)
        b0 = t0.bytes
        df, db = context_slopes(pop, lo, wl)
        var = np.flatnonzero((df != 0).any(axis=(0, 1)) | (db != 0).any(axis=(0, 1)))
        f0, g0 = t0.flops / fs, b0 / bs
        sum_t = n * np.maximum(f0, g0)
        sum_t[:, :, var] = sum_max_affine(f0[:, :, var], df[:, :, var] / fs, g0[:, :, var], db[:, :, var] / bs, n)
        sum_t += n * t0.exists * self.launch_us * 1e-6
        head = head_ops(pop, 1, 1, wl.batch, prec)
        hb = head.bytes
        ops = np.concatenate([sum_t.sum(axis=1), self._op_seconds(head, hb, fs, bs)[:, 0] * n], axis=1)
        seconds = ops.sum(axis=1) + n * pop.active.sum(axis=1) * self.layer_us * 1e-6
        tri = n * (n - 1) / 2.0  # Σ u over the steps: quantities are affine in the context
        flops = n * t0.total("flops") + tri * df.sum(axis=(1, 2)) + n * head.total("flops")
        byt = n * b0.sum(axis=(1, 2)) + tri * db.sum(axis=(1, 2)) + n * hb.sum(axis=(1, 2))
        kv_per_token = t0.total("kv_write_bytes")  # per new token (all of the batch)
        return {"s": seconds, "ops": ops, "flops": flops, "bytes": byt, "kv_per_token": kv_per_token}

    def _evaluate_chunk(self, pop: PopArrays, wl: Workload) -> dict[str, Any]:
        fs, bs = self.rates(wl)
        pre, dec = self._prefill(pop, wl, fs, bs), self._decode(pop, wl, fs, bs)
        hw = self.hw
        e_flop = hw.flop_energy_pj(hw.peak_flops(wl.weight_bits, wl.act_bits)) * 1e-12
        energy = (e_flop * (pre["flops"] + dec["flops"]) + hw.e_byte_pj * 1e-12 * (pre["bytes"] + dec["bytes"])
                  + hw.static_w * (pre["s"] + dec["s"]))
        embed_bytes = (pop.vocab_size * (1 + ~pop.tied) + pop.learned_pos * pop.block_size) * pop.d_model * wl.precision.weight_bytes
        weights = pre["weight_bytes"] - pop.vocab_size * pop.d_model * wl.precision.weight_bytes + embed_bytes
        kv = dec["kv_per_token"] * (wl.prefill + wl.decode)
        mem_need = weights + kv
        budget = hw.mem_gb * 1e9 * self.mem_usable
        feas = mem_need <= budget
        reasons = ["" if ok else f"needs {need / 1e9:.2f} GB (weights + KV cache) > {budget / 1e9:.2f} GB usable on {hw.name}"
                   for ok, need in zip(feas, mem_need)]
        out = {"ttft_ms": pre["s"] * 1e3, "tpot_ms": dec["s"] / wl.decode * 1e3,
               "energy_per_token_uj": energy / (wl.prefill + wl.decode) * 1e6, "feasible": feas, "reason": reasons}
        out["extras"] = self._extras(pop, pre, dec, mem_need, wl)
        return out

    def _extras(self, pop: PopArrays, pre: dict, dec: dict, mem: np.ndarray, wl: Workload) -> list[dict[str, Any]]:
        """Small per-genome extras; the per-operator breakdown only for small populations (CLI, reports)."""
        base = [{"hardware": self.hw.name, "memory_gb": float(m / 1e9)} for m in mem]
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
