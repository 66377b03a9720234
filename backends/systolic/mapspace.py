"""The DRAM traffic the release's constrained mapspace can reach on Simba and FLAT (issue 29), by enumeration.

The release's fusion savings (hw_exp.py:352 `_estimate_saved_cycles`) count the DRAM traffic of the mapping
Timeloop's mapper picked: the producer's output updates and read-backs, the consumer's input reads. Which
mappings exist is fixed by the public constraint files (../shared/reference/llmforge-release/hw_eval/arch):

- simba/constraints.yaml:15-24: DRAM permutation [L, D, E] (Timeloop lists loops inner to outer: E is the
  outermost, so E split at DRAM spills partial sums); GlobalBuffer temporal factors D=1, E=1, L=1, so its
  tile is exactly what the levels below hold. simba/arch.yaml:36-42: GlobalBuffer 2048 × 256 b = 65,536
  words for Inputs and Outputs (Weights bypass it); :74-79 PEWeightBuffer 4096 × 64 b = 32,768 words per
  instance, 16 PEs × 4 distributed buffers = 64 instances.
- flat_edge/constraints.yaml:17-19: DRAM permutation [E, D, L] (E innermost: partial sums stay in the global
  buffer while E iterates); flat_edge/arch.yaml:72-79: global_buffer 25600 × 64 b = 204,800 words for Inputs,
  Weights and Outputs.
- eyeriss (the check, its release TTFT matched): constraints.yaml:14 DRAM permutation [E, D, L]; arch.yaml:42-49
  shared_glb 16384 × 64 b = 131,072 words for Inputs and Outputs; weights bypass it to 14 × 12 PEs' weights_spad
  of 192 × 16 b = 384 words (:53, :62, :87-99), whose temporal factors D=1, so D is only spread over the PEs.

Per DRAM tiling (L_d, E_d, D_d), each a divisor of its dimension, a tensor crosses DRAM once per iteration of
every DRAM loop that does not index it and sits outside a split loop that does; inside all of those it stays put
(Timeloop's temporal reuse; its permutations list loops inner to outer). An output's first read is elided. Weights
that bypass the buffer must fit the weight buffers together (`weight_store`, even spread over the 64 assumed).
`least_traffic` is the fitting tiling with the least DRAM words, a stand-in for the EDP optimum where DRAM
dominates the energy. On SmolLM2-135M and Gemma-3-270M it has exactly the compulsory producer-output and
consumer-input traffic that `fusion_traffic: compulsory` counts, on simba and flat; only SmolLM2-360M's widest
GEMMs need more. It is not the release's counting either: on eyeriss it re-reads FC2's inputs (1.076× less
SmolLM2-135M TTFT) where compulsory traffic matches the release. What the release's savings count is the mapping
its randomized search stopped at (hw_eval/mapper/mapper.yaml:16-17: timeout 720, victory_condition 100;
flat_edge/mapper.yaml:8-9: 1200, 500), which no public file records (docs/concepts/fidelity.md, issue 29).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from backends.systolic import reference as R
from forge.genomes.genome import Genome

INDEX = {"input": ("L", "E"), "weight": ("E", "D"), "output": ("L", "D")}


@dataclass(frozen=True)
class Mapspace:
    """The release constraints that decide DRAM traffic: loop order at DRAM (inner to outer) and capacities."""

    order: tuple[str, str, str]
    glb: int  # words of the buffer right under DRAM
    glb_holds: tuple[str, ...]
    weight_store: int = 0  # words for weights that bypass that buffer (0: they live in it)
    d_on_chip: int = 0  # most output columns the weight stores hold at once (0: no limit beyond weight_store)


RELEASE = {
    "simba": Mapspace(("L", "D", "E"), 65536, ("input", "output"), weight_store=64 * 32768),
    "flat": Mapspace(("E", "D", "L"), 204800, ("input", "weight", "output")),
    # the check: eyeriss, whose release TTFT compulsory counting matches (issue 29)
    "eyeriss": Mapspace(("E", "D", "L"), 131072, ("input", "output"), weight_store=168 * 384, d_on_chip=168),
}


def fetches(order: tuple[str, ...], f: dict[str, Any], tensor: str) -> Any:
    """How many times a tensor's full size crosses DRAM (factors scalars or arrays): the product of the DRAM loops
    that do not index it and sit outside a split loop that does; inside every such loop it is reused."""
    n, seen = 1, False
    for d in order:  # inner to outer
        if d in INDEX[tensor]:
            seen = seen | (f[d] > 1)
        else:
            n = n * np.where(seen, f[d], 1)
    return n


def traffic(ms: Mapspace, L: int, E: int, D: int, f: dict[str, Any]) -> dict[str, Any]:
    """DRAM words of tilings f (scalars or broadcastable arrays of L_d, E_d, D_d) and whether their tiles fit."""
    g = {"L": L // f["L"], "E": E // f["E"], "D": D // f["D"]}
    tile = {x: g[a] * g[b] for x, (a, b) in INDEX.items()}
    fits = sum(tile[x] for x in ms.glb_holds) <= ms.glb
    if ms.weight_store:
        fits = fits & (tile["weight"] <= ms.weight_store)
    if ms.d_on_chip:
        fits = fits & (g["D"] <= ms.d_on_chip)
    n = {x: fetches(ms.order, f, x) for x in INDEX}
    return {"in_rd": L * E * n["input"], "w_rd": E * D * n["weight"], "out_wr": L * D * n["output"],
            "out_rd": L * D * (n["output"] - 1), "fits": fits}


def least_traffic(name: str, L: int, E: int, D: int) -> dict[str, int]:
    """The fitting DRAM tiling with the least DRAM words on substrate `name` (simba | flat | eyeriss), with its
    DRAM factors."""
    if name not in RELEASE:
        raise KeyError(f"substrate {name!r} has no release mapspace here; allowed: {', '.join(RELEASE)}")
    return dict(_least(name, int(L), int(E), int(D)))


@lru_cache(maxsize=4096)
def _least(name: str, L: int, E: int, D: int) -> tuple[tuple[str, int], ...]:
    grid = np.meshgrid(*(np.array([d for d in range(1, n + 1) if n % d == 0]) for n in (L, E, D)), indexing="ij")
    f = dict(zip("LED", (a.ravel() for a in grid)))
    t = traffic(RELEASE[name], L, E, D, f)
    words = np.where(t["fits"], t["in_rd"] + t["w_rd"] + t["out_wr"] + t["out_rd"], np.inf)
    if not np.isfinite(words).any():
        raise ValueError(f"{name}: no DRAM tiling of ({L} x {E})·({E} x {D}) fits")
    i = int(np.argmin(words))
    return tuple([(k, int(np.broadcast_to(v, words.shape)[i])) for k, v in t.items() if k != "fits"]
                 + [(f"{k}_d", int(v[i])) for k, v in f.items()])


def prefill_savings(name: str, g: Genome, prefill: int = 256) -> dict[str, float]:
    """Genome g's prefill on substrate `name` by the closed-form reading (ms at the release's 1 GHz): GEMM time,
    fusion savings with compulsory traffic (and their producer-output-write part), TTFT; TTFT with every
    producer output read back as often as written (a counting the release does not do on gemmini or eyeriss);
    on the RELEASE substrates, TTFT with the savings of the least-traffic mappings of the release's mapspace."""
    s, t = R.SUBSTRATES[name], R._template(name)
    out = {"gemm_ms": 0.0, "saved_ms": 0.0, "out_wr_ms": 0.0, "constrained_saved_ms": 0.0}
    for i in range(len(g.layers)):
        gemms = R.layer_gemms(g, i, prefill, "prefill")
        costs = [R.gemm_cost(s, t, x.L, x.E, x.D) for x in gemms]
        out["gemm_ms"] += sum(c["cycles"] * x.scale for x, c in zip(gemms, costs)) / 1e6
        out["saved_ms"] += sum(e[1] for e in R.edge_savings(s, t, gemms, costs)) / 1e6
        ends = R.ATTN_EDGES if len(gemms) == 7 else R.MLP_EDGES if gemms else ()
        out["out_wr_ms"] += sum(costs[p]["compulsory"]["out_wr"] / s.dram_write * max(gemms[p].scale, gemms[c].scale)
                                for p, c in ends) / 1e6
        if name in RELEASE and gemms:
            least = [least_traffic(name, x.L, x.E, R.padded(s, x.D)) for x in gemms]
            out["constrained_saved_ms"] += sum(e[1] for e in R.edge_savings(s, t, gemms, least, "modelled")) / 1e6
    out["ttft_ms"] = out["gemm_ms"] - out["saved_ms"]
    out["ttft_readback_ms"] = out["ttft_ms"] - out["out_wr_ms"]
    out["ttft_constrained_ms"] = out["gemm_ms"] - out["constrained_saved_ms"] if name in RELEASE else math.nan
    return out
