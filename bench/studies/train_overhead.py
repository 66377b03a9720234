"""Study (Issue 5, one-off): RESULTS.md Issue 5 session 4, Lightning's share of a paper-recipe epoch.

Where a paper-recipe epoch goes: the model's own step against Lightning's loop and the per-epoch
validation that selects the best epoch, timed in one process so the box's load affects all three alike.

    .venv/bin/python bench/bench_train_overhead.py --epochs 10 --reps 2 [--threads 2]

Rows: a plain PyTorch loop (same model, AdamW, batch 32, shuffled), `fit_member` without a validation
carve (Lightning's training loop only), and `fit_member` with it (what `forge-surrogate` runs).
"""
from __future__ import annotations

import argparse
import json
import time

import torch


def _data(seed: int):
    from forge.disk.io import shared_data_dir
    from surrogate.dataset import load_labelset, train_val_test
    from surrogate.features import MinMax, featurize
    from surrogate.fit import _arrays
    from surrogate.targets import TargetMap

    train, val, _ = train_val_test(load_labelset(shared_data_dir() / "llmforge_iha_200M.csv"), seed)
    norm = MinMax.fit(featurize(train.genomes, "paper", 40))
    return tuple(_arrays(None, d, norm, "paper", 40, TargetMap()) for d in (train, val))


def plain_loop(train: tuple, epochs: int, seed: int) -> None:
    """The same optimisation without Lightning: the floor Lightning's loop is compared with."""
    from surrogate.forgeformer import FFConfig
    from surrogate.lit_module import FFModule
    from surrogate.training import _tensors

    x, m, y = _tensors(*train)
    torch.manual_seed(seed)
    model = FFModule(FFConfig()).model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=g)
        for s in range(0, len(y), 32):
            i = perm[s:s + 32]
            loss = torch.nn.functional.l1_loss(model(x[i], m[i]), y[i])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def main() -> None:
    from surrogate.forgeformer import FFConfig
    from surrogate.training import Recipe, fit_member

    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    train, val = _data(a.seed)
    rows = {
        "plain_loop": lambda: plain_loop(train, a.epochs, a.seed),
        "lightning_no_val": lambda: fit_member(FFConfig(), Recipe(epochs=a.epochs), train, None, a.seed, 1.0),
        "lightning_with_val": lambda: fit_member(FFConfig(), Recipe(epochs=a.epochs), train, val, a.seed, 1.0),
    }
    rows["plain_loop"]()  # warm-up: allocator, thread pool, first-call dispatch
    out: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(a.reps):
        for k, f in rows.items():
            t = time.perf_counter()
            f()
            out[k].append(round((time.perf_counter() - t) / a.epochs, 4))
    base = min(out["plain_loop"])
    print(json.dumps({"threads": a.threads, "epochs": a.epochs, "s_per_epoch": out,
                      "ratio_to_plain_min": {k: round(min(v) / base, 3) for k, v in out.items()}}, indent=1))


if __name__ == "__main__":
    main()
