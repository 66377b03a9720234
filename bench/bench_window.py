"""Figures: RESULTS.md "Issue 26: attention window": what sliding-window layers remove from long-context costs.

    python bench/bench_window.py costs     # gemma-3-270m / llama-3.2-1b, Gemma-3's 5:1 local:global vs full
    python bench/bench_window.py speed     # roofline cost of 2,000 iha-paper genomes, windowed / the same full

`costs`: each baseline as published (full attention) and with every 6th layer global, the others local
(Gemma 3's 5:1 pattern; window 512 as Gemma-3-270M ships, 4096 as a long-context choice), costed by the
analyzer (KV-cache bytes of one 98k-token sequence), PLENA at the agentic-90k workload (the Table XII
formats 4/4/4; throughput at batch = max, TTFT/TPOT at Table XI's batch 8) and the A100 roofline at
prefill 8192 / decode 1024. Needs the `window` gene (forge.genomes.genes): `LayerGene.replace(window=...)`.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "window.json"


def pattern(genome, window: int, every: int = 6):
    """Every `every`-th attention layer global, the others local with `window` (Gemma 3: 5 local, 1 global)."""
    layers, k = [], 0
    for g in genome.layers:
        if g.active and g.attn:
            k += 1
            g = g.replace(window=0 if k % every == 0 else window)
        layers.append(g)
    return genome.with_layers(layers)


def costs() -> dict:
    from backends.interface import Workload
    from backends.registry import build_backend
    from forge.spaces.arrays import PopArrays
    from forge.cli import resolve_arch
    from forge.lm.workload import kv_cache_bytes

    plena, roof = build_backend("plena"), build_backend("roofline")
    wl_p = Workload(prefill=90_000, decode=8_000, batch="max", weight_bits=4, act_bits=4, kv_bits=4)
    wl_p8 = Workload(prefill=90_000, decode=8_000, batch=8, weight_bits=4, act_bits=4, kv_bits=4)  # Table XI batch
    wl_r = Workload(prefill=8192, decode=1024)
    out = {}
    for arch in ("gemma-3-270m", "llama-3.2-1b"):
        base = resolve_arch(arch)
        for w in (0, 512, 4096):
            g = pattern(base, w) if w else base
            p, p8, r = plena.evaluate([g], wl_p), plena.evaluate([g], wl_p8), roof.evaluate([g], wl_r)
            out[f"{arch}/w{w}"] = {
                "kv_gb_98k": float(kv_cache_bytes(PopArrays.from_genomes([g]), 98_000)[0] / 1e9),
                "plena_batch": int(p.extras[0]["batch"]), "plena_tokens_per_s": float(p.extras[0]["tokens_per_s"]),
                "plena_b8_ttft_s": float(p8.ttft_ms[0] / 1e3), "plena_b8_tpot_ms": float(p8.tpot_ms[0]),
                "roofline_ttft_ms": float(r.ttft_ms[0]), "roofline_tpot_ms": float(r.tpot_ms[0])}
    return out


def speed(n: int = 2000, reps: int = 3) -> dict:
    from backends.interface import Workload
    from backends.registry import build_backend
    from forge.spaces.space import load_space

    space = load_space("iha-paper-swa")
    win = space.sample(n, np.random.default_rng(0))
    full = [g.with_layers(x.replace(window=0) for x in g.layers) for g in win]
    roof, wl = build_backend("roofline"), Workload(prefill=8192, decode=1024)
    t = {}
    for name, pop in (("full", full), ("windowed", win)):
        best = np.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            roof.evaluate(pop, wl)
            best = min(best, time.perf_counter() - t0)
        t[name] = best
    return {"n": n, "full_s": t["full"], "windowed_s": t["windowed"], "ratio": t["windowed"] / t["full"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("costs", "speed"))
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()
    res = costs() if a.mode == "costs" else speed(a.n)
    print(json.dumps(res, indent=1))
    OUT.parent.mkdir(exist_ok=True)
    old = json.loads(OUT.read_text()) if OUT.is_file() else {}
    OUT.write_text(json.dumps({**old, a.mode: res}, indent=1) + "\n")


if __name__ == "__main__":
    main()
