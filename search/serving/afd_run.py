"""`forge-serve command=afd`: the optimal attention/FFN ratio of one genome on one backend (or given α/β),
checked against the discrete-event simulator; writes summary.json and afd.png."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from backends.registry import resolve_workload
from backends.serving.afd import (AfdParams, AfdWorkload, check_ratio, idle_fractions, optimal_ratio, step_times,
                                  throughput_per_instance)
from backends.serving.afd_backend import build_inner
from backends.serving.afd_sim import simulate
from backends.serving.fit import Link, fit_afd
from forge.spaces.arrays import PopArrays
from forge.cli import resolve_arch
from forge.runtime.config import to_container
from forge.disk import run_folder


def afd_workload(a: dict[str, Any]) -> AfdWorkload:
    return AfdWorkload(B=int(a["B"]), mu_P=float(a["mu_P"]), mu_D=float(a["mu_D"]),
                       N=None if a.get("N") is None else float(a["N"]), tbar=str(a.get("tbar", "exact")))


def afd_params(cfg: Any, a: dict[str, Any], wl: AfdWorkload) -> tuple[AfdParams, dict[str, Any]]:
    """Given α/β (a preset such as Table 2), or fitted from `arch` on `backend` (backends/serving/fit.py)."""
    if a.get("params") is not None:
        return AfdParams.from_config(a["params"]), {"source": "config", "unit": a.get("unit", "cycles")}
    genome = resolve_arch(str(cfg["arch"]))
    backend = build_inner(to_container(cfg["backend"]))
    w = resolve_workload(cfg["workload"], backend)
    bits = (w.weight_bits, w.act_bits, w.kv_bits)
    p, q = fit_afd(backend, PopArrays.from_genomes([genome]), wl, bits, Link(**a.get("link", {})), a["grid"],
                   a.get("head_side", "ffn"))
    scalar = AfdParams(**{k: float(np.asarray(v).reshape(-1)[0]) for k, v in p.as_dict().items()})
    return scalar, {"source": f"fit on {backend.name}", "unit": "ms", "arch": genome.name, "genome_id": genome.id,
                    "bits": list(bits), "r2_attention": float(q["r2_attention"][0]), "r2_ffn": float(q["r2_ffn"][0]),
                    "feasible": bool(q["feasible"][0])}


def sweep(params: AfdParams, wl: AfdWorkload, ratios: list[float], sim: dict[str, Any]) -> list[dict[str, float]]:
    """Theory and simulation at each r (the simulator needs integer r)."""
    rows = []
    for r in ratios:
        th = float(throughput_per_instance(params, wl, r))
        idle = idle_fractions(params, wl, r)
        row = {"r": float(r), "theory": th, "theory_eta_A": float(idle["eta_A"]), "theory_eta_F": float(idle["eta_F"])}
        if float(r).is_integer():
            s = simulate(params, wl, int(r), seed=int(sim.get("seed", 0)), prefill_spread=float(sim.get("prefill_spread", 0.5)))
            row.update(sim=s.throughput_per_instance, sim_eta_A=s.eta_A, sim_eta_F=s.eta_F, rel_gap=s.throughput_per_instance / th - 1)
        rows.append(row)
    return rows


def run_afd(cfg: Any, out: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    a = to_container(cfg["serve"]["afd"])
    wl = afd_workload(a)
    check_ratio(a["ratios"])  # before any fitting: bad r is reported at once
    params, source = afd_params(cfg, a, wl)
    opt = {k: float(np.asarray(v)) for k, v in optimal_ratio(params, wl).items()}
    rows = sweep(params, wl, [float(r) for r in a["ratios"]], {**a.get("sim", {}), "seed": int(cfg.get("seed", 0))})
    gaps = [abs(r["rel_gap"]) for r in rows if "rel_gap" in r]
    rs = np.linspace(min(float(min(a["ratios"])), 1.0) * 0.5, max(float(max(a["ratios"])), opt["r_star"]) * 1.05, 200)
    idle = idle_fractions(params, wl, rs)
    curve = {"r": rs.tolist(), "theory": throughput_per_instance(params, wl, rs).tolist(),
             "eta_A": idle["eta_A"].tolist(), "eta_F": idle["eta_F"].tolist()}
    per_s = 1e3 if source["unit"] == "ms" else None
    summary = {"command": "afd", **source, "params": {k: float(v) for k, v in params.as_dict().items()},
               "workload": {"B": wl.B, "mu_P": wl.mu_P, "mu_D": wl.mu_D, "N": wl.N, "tbar": wl.tbar}, **opt,
               "throughput_star_per_s": opt["throughput_star"] * per_s if per_s else None,
               # paper 001 §5.2 calls the round trip hidden when t_A, t_F >= 2 t_C; with two microbatches in flight a
               # group's loop still needs (t_A + t_F + t_C) / 2 per step, so near r* the simulator loses about this share:
               "comm_hidden": bool(min(opt["t_A"], _t_F(params, wl, opt["r_star"])) >= 2 * opt["t_C"]),
               "pipeline_loss_at_r_star": _pipeline_loss(opt["t_A"], _t_F(params, wl, opt["r_star"]), opt["t_C"]),
               "sweep": rows, "curve": curve, "sim_max_rel_gap": max(gaps) if gaps else None,
               "seconds": time.perf_counter() - t0}
    from search.serving.plots import plot_afd

    plot_afd(summary, out / run_folder.AFD_PNG)
    summary["plot"] = str(out / run_folder.AFD_PNG)
    return summary


def _t_F(params: AfdParams, wl: AfdWorkload, r: float) -> float:
    return float(step_times(params, wl, r)["t_F"])


def _pipeline_loss(t_A: float, t_F: float, t_C: float) -> float:
    """Relative step-time excess of the two-batch loop bound over the closed form's max(t_A, t_C, t_F)."""
    tau = max(t_A, t_C, t_F)
    return max(0.0, (t_A + t_F + t_C) / 2 / tau - 1)
