"""Figure: RESULTS.md "Issue 22 §2 — the Hugging Face export" (greedy decode speed and logit agreement).

A found genome exported with `forge-export format=hf` is decoded greedily by transformers' generate()
(its DynamicCache grows by concatenation) and by Forge's own `IHAModel.generate` (pre-allocated KV
cache), on the same weights: prompt `--prefill` tokens, `--decode` new tokens, batch 1, float32, one
torch thread. Runs are interleaved (forge, hf, [llama], forge, hf, ...) so machine load hits all alike;
the clock is process CPU time because the machine is shared. Reported: median new tokens per CPU-second
of the whole generate() call (prefill included), the ratio to Forge's model measured in the same run, whether the greedy tokens agree and
the largest logit difference on the prompt. Genomes: SmolLM2-135M (Llama-shaped, so the native
`LlamaForCausalLM` folder is timed too) and one `iha-paper` genome sampled with `--seed` (heterogeneous).

    nice -n 10 .venv/bin/python bench/bench_hf_export.py
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from forge.cli import resolve_arch
from forge.lm.model import build_model
from forge.spaces.space import load_space
from search.hf_export import write_hf


def _timed(fn) -> tuple[float, torch.Tensor]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def bench(name: str, genome, args) -> list[str]:
    from transformers import AutoModelForCausalLM

    model = build_model(genome, seed=args.seed).eval()
    folder = Path(tempfile.mkdtemp(prefix="hfbench-"))
    info = write_hf(model, genome, folder)
    runners = {"forge.lm.model": lambda x: model.generate(x, args.decode)}
    hfs = {"hf remote code": AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()}
    if info["native"]:
        hfs["hf native llama"] = AutoModelForCausalLM.from_pretrained(folder / "llama").eval()
    for k, m in hfs.items():
        runners[k] = (lambda mm: lambda x: mm.generate(x, max_new_tokens=args.decode, do_sample=False,
                                                       min_new_tokens=args.decode, pad_token_id=0))(m)
    x = torch.randint(0, genome.vocab_size, (1, args.prefill), generator=torch.Generator().manual_seed(args.seed))
    times: dict[str, list[float]] = {k: [] for k in runners}
    outs = {}
    with torch.no_grad():
        for _ in range(args.repeats + 1):  # the first round warms up and is dropped
            for k, fn in runners.items():
                dt, outs[k] = _timed(lambda: fn(x))
                times[k].append(dt)
        ref_logits = model(x)[0]
        diffs = {k: float((m(x).logits - ref_logits).abs().max()) for k, m in hfs.items()}
    base = statistics.median(times["forge.lm.model"][1:])
    rows = []
    for k in runners:
        t = statistics.median(times[k][1:])
        same = "—" if k == "forge.lm.model" else ("yes" if outs[k].tolist() == outs["forge.lm.model"].tolist() else "NO")
        diff = "—" if k == "forge.lm.model" else f"{diffs[k]:.1e}"
        rows.append(f"| {name} | {k} | {args.decode / t:.1f} | {base / t:.2f} | {same} | {diff} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefill", type=int, default=64)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    hetero = load_space("iha-paper").sample(1, np.random.default_rng(args.seed))[0]
    print("| genome | decoder | new tokens per CPU-s (prefill included) | vs forge.lm.model | same greedy tokens | max abs logit diff |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, g in (("smollm2-135m", resolve_arch("smollm2-135m")), (f"iha-paper sample (seed {args.seed})", hetero)):
        for row in bench(name, g, args):
            print(row, flush=True)


if __name__ == "__main__":
    main()
