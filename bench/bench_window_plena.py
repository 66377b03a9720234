"""Figure: RESULTS.md "Issue 26: attention window": a PLENA long-context search with and without the window gene.

    python bench/bench_window_plena.py [--pop 24 --offspring 48 --generations 40] [--out DIR]

Two searches from one seed, the shipped Forge-Former as the loss, PLENA at the agentic-90k workload (prefill
90,000, decode 8,000, batch = max): `iha-paper` (full attention only) and `iha-paper-swa` (the same space plus
the per-layer `window` gene). For each Pareto front: its size, the KV cache of one sequence at 98k tokens and
the decode KV reads per token (at the mean decode context), each as the front's median; for the windowed front
also the same genomes with every window set to 0, so "removed" is the share of the front's own KV traffic its
windows take away; and what the search picks (share of attention layers that are local, their windows).
Needs the `window` gene (forge.genes) and the `iha-paper-swa` space.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "window_plena.json"
PREFILL, DECODE = 90_000, 8_000


def search(space: str, out: Path, pop: int, offspring: int, generations: int, seed: int) -> list:
    from hydra import compose, initialize_config_module

    from forge.genome import genome_from_dict
    from search.cli import run
    from search.state import read_jsonl

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=[
            f"space={space}", "backend=plena", "workload=agentic-90k", f"seed={seed}", f"search.pop_size={pop}",
            f"search.offspring={offspring}", f"search.generations={generations}", "progress=false", "quiet=true",
            f"out_dir={out / space}"])
    run(cfg)
    return [genome_from_dict(r["genome"]) for r in read_jsonl(out / space / "pareto.jsonl")]


def kv_traffic(genomes: list) -> dict[str, np.ndarray]:
    """Per genome: KV bytes of one 98k sequence, and KV bytes read per decode token at the mean decode context."""
    from forge.arrays import PopArrays
    from forge.workload import kv_cache_bytes, layer_ops

    pop = PopArrays.from_genomes(genomes)
    mean_ctx = PREFILL + (DECODE + 1) / 2
    return {"kv_gb_98k": kv_cache_bytes(pop, PREFILL + DECODE) / 1e9,
            "kv_read_mb_per_token": layer_ops(pop, 1, mean_ctx).total("kv_read_bytes") / 1e6}


def picks(genomes: list) -> dict:
    w = [int(g.window) for x in genomes for g in x.layers if g.active and g.attn]
    local = [v for v in w if v > 0]
    return {"attention_layers": len(w), "local_share": len(local) / max(len(w), 1),
            "windows": {str(v): local.count(v) for v in sorted(set(local))}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pop", type=int, default=24)
    ap.add_argument("--offspring", type=int, default=48)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("outputs/bench_window_plena"))
    a = ap.parse_args()
    res = {"settings": vars(a) | {"out": str(a.out)}}
    for space in ("iha-paper", "iha-paper-swa"):
        front = search(space, a.out, a.pop, a.offspring, a.generations, a.seed)
        t = kv_traffic(front)
        row = {"front": len(front), **{f"median_{k}": float(np.median(v)) for k, v in t.items()}}
        if space.endswith("swa"):
            full = kv_traffic([g.with_layers(x.replace(window=0) for x in g.layers) for g in front])
            row.update({f"removed_{k}": float(1 - t[k].sum() / full[k].sum()) for k in t}, **picks(front))
        res[space] = row
    print(json.dumps(res, indent=1))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
