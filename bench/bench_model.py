"""Figure: RESULTS.md "IHA model training throughput" (IHA vs FLOPs-matched GQA step throughput).

Training-step throughput of IHA models vs FLOPs-matched standard GQA models (same code path).

For each IHA genome (sampled from a space, plus a "dense" variant with every slot active and attending)
the script builds a homogeneous GQA genome — n_h | d_model, d_qk = d_v = d_model / n_h, the same
n_kv, d_mlp and attention in every layer — whose analytic forward FLOPs per token
(`forge.lm.workload.analyze`) is closest to the IHA one, preferring the same depth. Both run a plain
forward + backward + AdamW step in float32 on identical random batches; runs are interleaved
(IHA, GQA, IHA, GQA, ...) so machine load hits both alike, and the median tokens/s is reported.
On a shared machine wall time is dominated by other processes, so the default clock is the
process's CPU time at one torch thread (tokens per CPU-second); `--clock wall` gives wall time.
The IHA model is also timed without the d_qk/d_v padding (`IHAConfig.pad_attn=False`, SDPA's math
fallback on CPU) to show what the padding buys.

    nice -n 10 .venv/bin/python bench/bench_model.py            # 1 thread, CPU-time clock
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene
from forge.lm.model import IHAConfig, build_model
from forge.spaces.space import SearchSpace, load_space
from forge.lm.workload import analyze, model_totals


def gqa_candidates(space: SearchSpace, template: Genome) -> list[Genome]:
    """Every homogeneous GQA genome of the space's globals: depth × n_h | d_model × n_kv | n_h × d_mlp."""
    d = template.d_model
    out = []
    for n_h in (h for h in space.n_h if d % h == 0):
        for n_kv in (k for k in space.n_kv if n_h % k == 0):
            for d_mlp in space.d_mlp:
                gene = LayerGene(n_h=n_h, n_kv=n_kv, d_qk=d // n_h, d_v=d // n_h, d_mlp=d_mlp)
                out += [replace(template, layers=(gene,) * L, name=f"gqa-L{L}-h{n_h}-kv{n_kv}-m{d_mlp}")
                        for L in range(1, space.L_max + 1)]
    return out


def flops_matched_gqa(space: SearchSpace, iha: Genome, tol: float = 0.02) -> Genome:
    """Among candidates within `tol` of the IHA FLOPs/token (or the closest), the one of the nearest
    depth, then the nearest query-head count per attention layer, then the closest FLOPs."""
    cands = gqa_candidates(space, iha)
    flops = model_totals(PopArrays.from_genomes(cands))["flops_per_token"]
    target = analyze(iha)["flops_per_token"]
    rel = np.abs(flops - target) / target
    att = [x for x in iha.active_layers if x.attn]
    heads = np.mean([x.n_h for x in att]) if att else 0.0
    ok = rel <= max(tol, rel.min())
    key = lambda i: (abs(len(cands[i].layers) - iha.n_active), abs(cands[i].layers[0].n_h - heads), rel[i])  # noqa: E731
    return cands[min(np.flatnonzero(ok), key=key)]


def step_rate(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
              steps: int, clock=time.process_time) -> float:
    """Tokens per second (of `clock`) of `steps` full training steps (forward, backward, AdamW)."""
    t0 = clock()
    for _ in range(steps):
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return steps * x.numel() / (clock() - t0)


def compare(iha: Genome, gqa: Genome, args: argparse.Namespace) -> dict:
    """Interleaved median tokens/s of IHA (padded fused SDPA), IHA (unpadded) and GQA on the same batches."""
    gen = torch.Generator().manual_seed(args.seed)
    V, T = iha.vocab_size, args.seq or iha.block_size
    x = torch.randint(0, V, (args.batch, T), generator=gen)
    y = torch.randint(0, V, (args.batch, T), generator=gen)
    runs = {}
    for key, g in (("iha", IHAConfig(iha)), ("iha_nopad", IHAConfig(iha, pad_attn=False)), ("gqa", IHAConfig(gqa))):
        m = build_model(g, seed=args.seed).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1)
        step_rate(m, opt, x, y, args.warmup)
        runs[key] = (m, opt, [])
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for _ in range(args.repeats):
        for m, opt, rates in runs.values():
            rates.append(step_rate(m, opt, x, y, args.steps, clock))
    med = {k: statistics.median(r[2]) for k, r in runs.items()}
    return {"iha": iha, "gqa": gqa, **{f"{k}_tok_s": v for k, v in med.items()},
            "ratio": med["iha"] / med["gqa"], "pad_speedup": med["iha"] / med["iha_nopad"]}


def iha_genomes(space: SearchSpace, seeds: list[int]) -> list[Genome]:
    """Per seed: one genome sampled from the space and its dense twin (all slots active, attention on)."""
    out = []
    for s in seeds:
        g = space.sample(1, np.random.default_rng(s))[0]
        dense = g.with_layers(replace(x, active=True, attn=True) for x in g.layers)
        out += [replace(g, name=f"sampled-s{s}"), replace(dense, name=f"dense-s{s}")]
    return out


def describe(g: Genome) -> str:
    a = analyze(g)
    return f"{a['n_active_layers']}L/{a['n_attn_layers']}attn, {a['params'] / 1e6:.2f}M params, " \
           f"{a['flops_per_token'] / 1e6:.2f} MFLOP/tok"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--space", default="iha-tiny")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=0, help="tokens per sequence (0 = block_size)")
    p.add_argument("--steps", type=int, default=1, help="timed steps per repeat")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="process CPU time or wall time")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    space = load_space(args.space)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.clock} clock, float32 CPU, batch {args.batch} x "
          f"{args.seq or space.block_size} tokens, median of {args.repeats} x {args.steps} steps")
    print("| IHA genome | IHA | FLOPs-matched GQA | GQA | IHA tok/s | GQA tok/s | IHA/GQA "
          "| IHA unpadded tok/s | padded/unpadded |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios, pads = [], []
    for iha in iha_genomes(space, args.seeds):
        r = compare(iha, flops_matched_gqa(space, iha), args)
        ratios.append(r["ratio"])
        pads.append(r["pad_speedup"])
        print(f"| {iha.name} | {describe(iha)} | {r['gqa'].name} | {describe(r['gqa'])} | "
              f"{r['iha_tok_s']:.0f} | {r['gqa_tok_s']:.0f} | {r['ratio']:.2f} | "
              f"{r['iha_nopad_tok_s']:.0f} | {r['pad_speedup']:.2f} |", flush=True)
    gm = lambda xs: float(np.exp(np.mean(np.log(xs))))  # noqa: E731
    print(f"geometric mean: IHA/GQA throughput {gm(ratios):.3f}, padded/unpadded SDPA {gm(pads):.3f}")


if __name__ == "__main__":
    main()
