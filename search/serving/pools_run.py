"""`forge-serve command=pools`: prefill/decode pool co-search for one genome over one trace (paper 003);
memory-centric vs random initialization in one run, HV/ADRS against brute force when the space is small.
With `archs=[a,b,...]` the search is joint over (genome, pools): the genome is one more integer gene and its
loss proxy a third objective (parameters: `params_ref / params`, i.e. bigger is assumed to learn better; no
loss predictor is applied to a fixed list). Writes summary.json and pools.png."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from pymoo.core.sampling import Sampling
from pymoo.operators.sampling.rnd import IntegerRandomSampling

from backends.serving.pool import FIELDS, PoolError, PoolSpace, design
from backends.serving.system import ServingModel
from backends.serving.trace import resolve_trace
from forge.cli import resolve_arch
from forge.runtime.config import to_container
from search.serving.pools import (JointProblem, MemoryCentricSampling, PoolProblem, enumerate_all, front_of, nsga,
                                  quality, settled)
from forge.disk import run_folder

INITS = ("memory", "random")


def sampler(name: str, p: dict[str, Any]) -> Sampling:
    if name == "memory":
        return MemoryCentricSampling(u=int(p.get("u", 5)), n_candidates=int(p.get("n_candidates", 20000)))
    if name == "random":
        return IntegerRandomSampling()
    raise PoolError(f"serve.pools.inits entry {name!r} is unknown; allowed: {', '.join(INITS)}")


def points(problem: PoolProblem, X: np.ndarray, front: np.ndarray) -> list[dict[str, Any]]:
    """Front members with their designs (the first X row reaching each front point)."""
    F = problem.objectives(X)["F"]
    out = []
    for f in front:
        i = int(np.flatnonzero(np.all(np.isclose(F, f), axis=1))[0])
        pre, dec = problem.systems(X[i:i + 1])
        pt = {"time_norm": float(f[0]), "cost_norm": float(f[1]), "rps_norm": float(1 / f[0]),
              "prefill": dict(zip(FIELDS, pre[0].tolist())), "decode": dict(zip(FIELDS, dec[0].tolist()))}
        if isinstance(problem, JointProblem):
            pt.update(arch=problem.models[int(problem.genome_index(X[i:i + 1])[0])].genome.name, loss_proxy=float(f[2]))
        out.append(pt)
    return out


def build_problem(cfg: Any, serve: dict[str, Any], space: PoolSpace, trace: Any) -> tuple[PoolProblem, dict[str, Any]]:
    """The pools-only problem for `arch`, or the joint one over `archs`; baseline = the (first) arch's."""
    archs = cfg.get("archs")
    names = [str(a) for a in archs] if archs else [str(cfg["arch"])]
    if archs is not None and len(names) < 2:
        raise PoolError(f"archs = {names} must list at least two genomes for a joint search; allowed: null or a list")
    lat = str(serve["pools"].get("latency", "roofline"))
    models = [ServingModel(resolve_arch(a), trace, serve["cost"], serve["pools"].get("sched"), lat) for a in names]
    b = models[0].evaluate(design(serve["baseline"]["prefill"]), design(serve["baseline"]["decode"]))
    if not b["feasible"][0]:
        raise PoolError(f"the baseline system cannot serve {models[0].genome.name}: {b['reason'][0]}")
    b = settled(b)
    base = (float(b["serving_time_s"][0]), float(b["cost_usd"][0]))
    info = {"serving_time_s": base[0], "cost_usd": base[1], "rps": float(b["rps"][0]), "arch": models[0].genome.name}
    if not archs:
        return PoolProblem(space, models[0], base), info
    weights = np.array([m.weights for m in models])
    joint = {"archs": [m.genome.name for m in models], "params": (weights / 2).tolist(),  # bf16 weights: 2 B/param
             "loss_objective": "params proxy: params(archs[0]) / params (no predictor for a fixed list)"}
    return JointProblem(space, models, base, weights[0] / weights), {**info, "joint": joint}


def run_pools(cfg: Any, out: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    serve, seed = to_container(cfg["serve"]), int(cfg.get("seed", 0))
    p = dict(serve["pools"])
    trace = resolve_trace(str(cfg["trace"]), serve["trace"], seed)
    space = PoolSpace.from_config(serve["space"])
    problem, base = build_problem(cfg, serve, space, trace)
    genome, joint = problem.model.genome, base.pop("joint", None)
    n_sys = int(np.prod(problem.xu.astype(np.int64) + 1))
    summary: dict[str, Any] = {"command": "pools", "arch": genome.name, "genome_id": genome.id, "trace": trace.summary(),
                               "space_size_per_pool": space.size, "systems": n_sys, "baseline": base,
                               "latency": problem.model.latency}
    if joint:
        summary["joint"] = joint
    true_front, tb = None, time.perf_counter()
    if n_sys <= int(p["brute_force_max"]):
        allX = enumerate_all(problem)
        r = problem.objectives(allX)
        true_front = front_of(r["F"], np.where(r["feasible"], -1.0, 1.0))
        summary["brute_force"] = {"front": points(problem, allX, true_front), "seconds": time.perf_counter() - tb}
    if joint and true_front is not None:
        summary["brute_force"]["front_archs"] = sorted({x["arch"] for x in summary["brute_force"]["front"]})
    runs, seen = {}, []
    from forge.runtime.steps import Steps

    with Steps("forge-serve", "pool co-searches", len(p["inits"]), enabled=not cfg.get("quiet", False)) as st:
        for name in p["inits"]:
            ts = time.perf_counter()
            res = nsga(problem, sampler(name, p), int(p["pop_size"]), int(p["generations"]), seed)
            runs[name] = {**res, "seconds": time.perf_counter() - ts}
            seen.append(problem.objectives(res["X"])["F"])
            st.step(f"NSGA-II from the {name} init, {int(p['generations'])} generations")
    allF = np.vstack(seen + ([true_front] if true_front is not None else []))
    if not np.any(np.all(allF < 1e6, axis=1)) or (true_front is not None and len(true_front) == 0):
        raise PoolError(f"no system found can serve {genome.name} on this trace (weights or KV cache never fit); "
                        "allowed: a space with more HBM or devices per server")
    ref = 1.1 * allF[np.all(allF < 1e6, axis=1)].max(axis=0) if p.get("hv_ref") is None else np.asarray(p["hv_ref"], float)
    summary["hv_ref"] = ref.tolist()
    summary["runs"] = {n: _report(problem, r, ref, true_front) for n, r in runs.items()}
    if true_front is not None:
        summary["brute_force"].update(quality(true_front, ref, true_front))
    summary.update(simulations=sum(m.simulations for m in getattr(problem, "models", [problem.model])), seconds=time.perf_counter() - t0)
    from search.serving.plots import plot_pools

    plot_pools(summary, out / run_folder.POOLS_PNG)
    summary["plot"] = str(out / run_folder.POOLS_PNG)
    return summary


def _report(problem: PoolProblem, r: dict[str, Any], ref: np.ndarray, true_front: np.ndarray | None) -> dict[str, Any]:
    final = r["fronts"][-1]
    pts = points(problem, r["X"], final)
    cheap = [x for x in pts if x["cost_norm"] <= 1.0]
    archs = {"front_archs": sorted({x["arch"] for x in pts})} if isinstance(problem, JointProblem) else {}
    return {**archs, **quality(final, ref, true_front), "evaluations": r["evaluations"], "seconds": r["seconds"],
            "hv_per_generation": [quality(f, ref, None)["hv"] for f in r["fronts"]],
            "adrs_per_generation": [quality(f, ref, true_front).get("adrs") for f in r["fronts"]] if true_front is not None else None,
            "front": pts, "best_product": min(x["time_norm"] * x["cost_norm"] for x in pts) if pts else float("inf"),
            "best_rps_at_baseline_cost": max(cheap, key=lambda x: x["rps_norm"]) if cheap else None}
