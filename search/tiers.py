"""Tiers of a front (issue 44 §2): which members the loss predictor cannot tell apart, and how to decide.

A tier is built greedily from the best member: the lowest predicted loss not yet placed (ties by id) opens a
tier, and every unplaced member whose loss interval [loss_lo, loss_hi] overlaps the opener's joins it. So tier 1
is exactly the members `search.archive.loss_overlap` marks as indistinguishable from the best; the rule is
deterministic (it reads only the rounded metrics and ids). Inside a tier the surrogate gives no ranking on loss:
the only way to decide is to train a few, which `forge-verify run=<dir> tier=<t> k=<k>` does (k members of the
tier spread across its costs, `search.picks.front_picks`). How long that takes is estimated from the run's
training protocol, scaled by its token budget from two measured rates (below).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from forge.disk.io import as_float

VERIFY_K = 4  # members trained to decide inside a tier (fewer when the tier is smaller)
# (tokens, seconds low, seconds high, on what) per label of a reference protocol; other budgets scale linearly
GPU_RATE = (655e6, 1.5 * 3600, 2.0 * 3600, "one H100")  # LLMForge App. C.2: 1.5-2 h per model at 655M tokens
CPU_RATE = (32768, 4.25, 6.48, "one CPU core")  # bench/RESULTS.md "cpu-proxy throughput": median and p90 CPU s/label


def loss_tiers(rows: Sequence[dict[str, Any]]) -> np.ndarray | None:
    """(n,) tier number (1 = holds the best member) of each row, in the rows' own order; None when any row has
    no finite interval (an uncalibrated predictor: nothing to group by)."""
    m = [r.get("metrics", r) for r in rows]
    lo, hi, mu = (np.array([as_float(x.get(k)) for x in m], float) for k in ("loss_lo", "loss_hi", "val_loss"))
    if not len(rows) or not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return None
    order = sorted(range(len(rows)), key=lambda j: (mu[j], str(rows[j].get("id", ""))))
    tier = np.zeros(len(rows), dtype=int)
    t = 0
    for head in order:
        if tier[head]:
            continue
        t += 1
        for j in order:
            if not tier[j] and lo[j] <= hi[head] and hi[j] >= lo[head]:
                tier[j] = t
    return tier


def tier_sizes(tiers: np.ndarray | None) -> list[int]:
    """Members per tier, tier 1 first ([] without tiers)."""
    return [] if tiers is None else [int((tiers == t).sum()) for t in range(1, int(tiers.max()) + 1)]


def training_time(protocol: Mapping[str, Any] | None, k: int) -> str:
    """'about 6 h 00 min-8 h 00 min on one H100' for k labels under `protocol` (its tokens and accelerator),
    one after another; '' when the protocol names no token budget."""
    from forge.runtime.steps import clock

    tokens = as_float((protocol or {}).get("tokens"))
    if not np.isfinite(tokens) or tokens <= 0:
        return ""
    ref, lo, hi, where = CPU_RATE if (protocol or {}).get("accelerator") == "cpu" else GPU_RATE
    scale = k * tokens / ref
    return f"about {clock(lo * scale)} to {clock(hi * scale)} on {where}, one after another"


def decide_lines(run_dir: Any, rows: Sequence[dict[str, Any]], tiers: np.ndarray | None,
                 protocol: Mapping[str, Any] | None) -> list[str]:
    """The plain statement and the command for the first tier that holds more than one member ([] if none)."""
    from search.carried import carry
    from search.suggest import quote, rel

    sizes = tier_sizes(tiers)
    big = next((t for t, n in enumerate(sizes, start=1) if n > 1), None)
    if big is None:
        return []
    k = min(VERIFY_K, sizes[big - 1])
    name = (protocol or {}).get("name", "the run's protocol")
    when = training_time(protocol, k)
    return [f"# tier {big}: {sizes[big - 1]} members the predictor cannot tell apart on loss. To decide, train {k} "
            f"spread across the tier's costs (protocol {name}" + (f": {when}" if when else "") + "):",
            " ".join([f"forge-verify run={quote(rel(run_dir))}", *carry(run_dir, code=True),
                      f"tier={big} k={k} control=0"])]
