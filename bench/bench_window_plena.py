"""Figure: RESULTS.md "Issue 26: attention window": a PLENA long-context search with and without the window gene.

    python bench/bench_window_plena.py [--pop 24 --offspring 48 --generations 40] [--out DIR]
    python bench/bench_window_plena.py --tiny [--attn-min 2]   # iha-tiny vs iha-tiny-swa, window-aware tiny loss

Two searches from one seed, the shipped Forge-Former as the loss, PLENA at the agentic-90k workload (prefill
90,000, decode 8,000, batch = max): `iha-paper` (full attention only) and `iha-paper-swa` (the same space plus
the per-layer `window` gene). For each Pareto front: its size, the KV cache of one sequence at 98k tokens and
the decode KV reads per token (at the mean decode context), each as the front's median; for the windowed front
also the same genomes with every window set to 0, so "removed" is the share of the front's own KV traffic its
windows take away; and what the search picks (share of attention layers that are local, their windows).
Needs the `window` gene (forge.genomes.genes) and the `iha-paper-swa` space.

`--tiny`: the same at tiny scale with a loss that sees the gene: `iha-tiny` and `iha-tiny-swa`, both scored by
`forgeformer-iha-tiny-swa` (cpu-proxy labels with windows; a full-attention genome gets the same features in
either space), plus `iha-tiny-swa` scored by the window-blind `forgeformer-iha-tiny` (windows free in predicted
loss) for contrast. For each windowed front also the loss its windows cost per the window-aware surrogate: the
front's predicted loss minus that of the same genomes with every window set to 0. The cpu-proxy loss favours
attention-free tiny models (they have no KV cache either), so `--attn-min K` adds the constraint
`n_attn_layers >= K` to every search of the run.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "window_plena.json"
OUT_TINY = Path(__file__).parent / "results" / "window_plena_tiny.json"
PREFILL, DECODE = 90_000, 8_000


PAPER = (("iha-paper", "iha-paper", None), ("iha-paper-swa", "iha-paper-swa", None))
TINY = (("iha-tiny", "iha-tiny", "forgeformer-iha-tiny-swa"),
        ("iha-tiny-swa", "iha-tiny-swa", "forgeformer-iha-tiny-swa"),
        ("iha-tiny-swa, window-blind loss", "iha-tiny-swa", "forgeformer-iha-tiny"))
AWARE = "forgeformer-iha-tiny-swa"


def search(name: str, space: str, out: Path, pop: int, offspring: int, generations: int, seed: int,
           predictor: str | None = None, reuse: bool = False, attn_min: int = 0) -> tuple[list, dict]:
    """The front's genomes and rows, and the run's summary; a run folder per `name` under `out` (with `reuse`,
    a finished run already there is read instead of searched again)."""
    from hydra import compose, initialize_config_module

    from forge.genomes.genome import genome_from_dict
    from search.cli import run
    from search.state import read_jsonl

    folder = out / (name.replace(", ", "-").replace(" ", "-") + (f"-attn{attn_min}" if attn_min else ""))
    need = [f'constraints=["val_loss < 3.8","n_attn_layers >= {attn_min}"]'] if attn_min else []
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=[
            f"space={space}", "backend=plena", "workload=agentic-90k", f"seed={seed}", f"search.pop_size={pop}",
            f"search.offspring={offspring}", f"search.generations={generations}", "progress=false", "quiet=true",
            f"out_dir={folder}", *([f"evaluator.predictor={predictor}"] if predictor else []), *need])
    done = folder / "summary.json"
    summary = json.loads(done.read_text()) if reuse and done.is_file() else {}
    if summary.get("status") != "complete" or summary.get("generations") != generations:
        summary = run(cfg)
    rows = read_jsonl(folder / "pareto.jsonl")
    best = {f"min_{k}": min(float(r["metrics"][k]) for r in rows) for k in ("tpot_ms", "energy_per_token_uj")}
    return [genome_from_dict(r["genome"]) for r in rows], {**summary, **best}


def kv_traffic(genomes: list) -> dict[str, np.ndarray]:
    """Per genome: KV bytes of one 98k sequence, and KV bytes read per decode token at the mean decode context."""
    from forge.spaces.arrays import PopArrays
    from forge.lm.workload import kv_cache_bytes, layer_ops

    pop = PopArrays.from_genomes(genomes)
    mean_ctx = PREFILL + (DECODE + 1) / 2
    return {"kv_gb_98k": kv_cache_bytes(pop, PREFILL + DECODE) / 1e9,
            "kv_read_mb_per_token": layer_ops(pop, 1, mean_ctx).total("kv_read_bytes") / 1e6}


def picks(genomes: list) -> dict:
    w = [int(g.window) for x in genomes for g in x.layers if g.active and g.attn]
    local = [v for v in w if v > 0]
    return {"attention_layers": len(w), "local_share": len(local) / max(len(w), 1),
            "windows": {str(v): local.count(v) for v in sorted(set(local))}}


def window_loss(genomes: list) -> dict:
    """What the windows cost per the window-aware surrogate: predicted loss minus that of full attention."""
    from surrogate.loading import load_predictor

    p = load_predictor(AWARE)
    d = p.predict(genomes)[0] - p.predict(full(genomes))[0]
    return {"median": float(np.median(d)), "mean": float(d.mean()), "max": float(d.max()), "min": float(d.min())}


def full(genomes: list) -> list:
    return [g.with_layers(x.replace(window=0) for x in g.layers) for g in genomes]


def row(genomes: list, summary: dict, windowed: bool, tiny: bool) -> dict:
    """Front size, HV, median KV traffic; for a windowed front also what its windows remove and pick."""
    t = kv_traffic(genomes)
    out = {"front": len(genomes), "hv": summary.get("hypervolume"), "evaluations": summary.get("evaluations"),
           **{k: v for k, v in summary.items() if k.startswith("min_")},
           **{f"median_{k}": float(np.median(v)) for k, v in t.items()}}
    if tiny:
        from surrogate.loading import load_predictor

        mu = load_predictor(AWARE).predict(genomes)[0]
        out.update(aware_loss_min=float(mu.min()), aware_loss_median=float(np.median(mu)))
    if windowed:
        f = kv_traffic(full(genomes))
        out.update({f"removed_{k}": float(1 - t[k].sum() / f[k].sum()) if f[k].sum() else None for k in t},
                   **picks(genomes))  # None: a front without KV (no attention layer)
        if tiny:
            out["window_loss_cost"] = window_loss(genomes)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pop", type=int, default=24)
    ap.add_argument("--offspring", type=int, default=48)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true", help="iha-tiny vs iha-tiny-swa with the window-aware tiny surrogate")
    ap.add_argument("--out", type=Path, default=Path("outputs/bench_window_plena"))
    ap.add_argument("--attn-min", type=int, default=0, help="constraint n_attn_layers >= this (0: none)")
    ap.add_argument("--only", help="run only this search (a name of the table), e.g. to run them apart")
    ap.add_argument("--reuse", action="store_true", help="read a finished run in --out instead of searching again")
    a = ap.parse_args()
    res = {"settings": vars(a) | {"out": str(a.out)}}
    for name, space, predictor in (TINY if a.tiny else PAPER):
        if a.only and name != a.only:
            continue
        front, summary = search(name, space, a.out, a.pop, a.offspring, a.generations, a.seed, predictor, a.reuse,
                                a.attn_min)
        res[name] = {"predictor": predictor or "forgeformer-iha-paper",
                     **row(front, summary, space.endswith("swa"), a.tiny)}
    print(json.dumps(res, indent=1))
    out = OUT_TINY if a.tiny else OUT
    out = out.with_name(out.stem + f"_attn{a.attn_min}.json") if a.attn_min else out
    if a.only:
        return
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
