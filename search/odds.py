"""What a front says about loss (issue 51): calibrated odds that the best-predicted member trains better.

The predictor's checkpoint carries its pairwise odds (surrogate/pairwise.py): P(the member with the lower μ trains
better | Δμ), counted on held-out pairs. A run records the curve it used (summary.json `loss_pairwise`), and
every statement at the front is read off it, deterministically from the rounded μ:

- `p_best`: per member, P that the front's best-predicted member trains better than this one. The front holds
  only members that meet the run's constraints, so under `ttft_ms <= 5` it is about the feasible members.
- `loss_groups`: members sorted by μ; a group starts at the first member its predecessor group's head beats
  with P >= RULE_OUT (0.9). Inside a group the head is not shown better at 0.9; it is still better more often
  than not, by `p_best`.
- `decide_lines`: to find the true best, `forge-verify` trains the k best-predicted members (search.picks.
  best_picks): the ones the odds cannot rule out, best first. Two or more also cover the ~1 in 20 member of the
  best bin that trains more than 0.3 worse than predicted (the risk study found no score that flags it).

Time estimates scale the run's protocol's token budget by two measured rates (below).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from forge.disk.io import as_float
from surrogate.pairwise import RULE_OUT, PairwiseOdds

VERIFY_K = 4  # members the decide line trains (fewer on a smaller front); at least 2 where the front has 2
# (tokens, seconds low, seconds high, on what) per label of a reference protocol; other budgets scale linearly
GPU_RATE = (655e6, 1.5 * 3600, 2.0 * 3600, "one H100")  # LLMForge App. C.2: 1.5-2 h per model at 655M tokens
CPU_RATE = (32768, 4.25, 6.48, "one CPU core")  # bench/RESULTS.md "cpu-proxy throughput": median and p90 CPU s/label
RISK = ("about 1 in 20 members of the best bin trains more than 0.3 worse than predicted, and no score tells which "
        "(bench/studies/risk_study.py)")


def run_odds(summary: Mapping[str, Any] | None) -> PairwiseOdds | None:
    """The curve a run recorded (summary.json `loss_pairwise`), None when its predictor had none or it is damaged."""
    node = (summary or {}).get("loss_pairwise")
    try:
        return PairwiseOdds.from_dict(node) if isinstance(node, dict) else None
    except ValueError:
        return None


def mus(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    """Each row's predicted loss μ (before any optimism bonus), as the front prints it."""
    return np.array([as_float(r.get("metrics", r).get("mu", r.get("metrics", r).get("val_loss"))) for r in rows])


def by_mu(rows: Sequence[dict[str, Any]]) -> list[int]:
    """Row indices from the lowest μ, ties by id: the order every statement here reads."""
    mu = mus(rows)
    return sorted(range(len(rows)), key=lambda j: (mu[j], str(rows[j].get("id", ""))))


def p_best(rows: Sequence[dict[str, Any]], odds: PairwiseOdds | None) -> np.ndarray | None:
    """(n,) P that the best-predicted row trains better than row j (NaN for that row itself); None without odds."""
    if odds is None or not len(rows):
        return None
    mu, best = mus(rows), by_mu(rows)[0]
    p = odds.prob(mu - mu[best])
    p[best] = np.nan
    return p


def loss_groups(rows: Sequence[dict[str, Any]], odds: PairwiseOdds | None) -> np.ndarray | None:
    """(n,) group number (1 = holds the best-predicted row): a new group opens at the first row, by μ, that the
    current group's head beats with P >= RULE_OUT. None without odds."""
    if odds is None or not len(rows):
        return None
    mu, group, g, head = mus(rows), np.zeros(len(rows), dtype=int), 0, None
    for j in by_mu(rows):
        if head is None or odds.prob(mu[j] - mu[head]) >= RULE_OUT:
            g, head = g + 1, j
        group[j] = g
    return group


def group_sizes(groups: np.ndarray | None) -> list[int]:
    """Members per group, group 1 first ([] without groups)."""
    return [] if groups is None else [int((groups == g).sum()) for g in range(1, int(groups.max()) + 1)]


def decide_k(n_open: int, n_front: int) -> int:
    """How many best-predicted members to train: those not ruled out, at most VERIFY_K, and at least 2 (one
    failure in twenty) where the front has two."""
    return max(min(VERIFY_K, n_open), min(2, n_front))


def training_time(protocol: Mapping[str, Any] | None, k: int) -> str:
    """'about 6 h 00 min to 8 h 00 min on one H100, one after another' for k labels under `protocol`; '' when the
    protocol names no token budget."""
    from forge.runtime.steps import clock

    tokens = as_float((protocol or {}).get("tokens"))
    if not np.isfinite(tokens) or tokens <= 0:
        return ""
    ref, lo, hi, where = CPU_RATE if (protocol or {}).get("accelerator") == "cpu" else GPU_RATE
    scale = k * tokens / ref
    return f"about {clock(lo * scale)} to {clock(hi * scale)} on {where}, one after another"


def decide_lines(run_dir: Any, rows: Sequence[dict[str, Any]], odds: PairwiseOdds | None,
                 protocol: Mapping[str, Any] | None) -> list[str]:
    """The plain statement and the command that trains the members most likely to hold the true best ([] on a
    front of one, or without odds)."""
    from search.carried import carry
    from search.suggest import quote, rel

    groups = loss_groups(rows, odds)
    if groups is None or len(rows) < 2:
        return []
    n_open = group_sizes(groups)[0]
    k = decide_k(n_open, len(rows))
    name = (protocol or {}).get("name", "the run's protocol")
    when = training_time(protocol, k)
    said = (f"{n_open} members are not beaten by the best-predicted one with p >= {RULE_OUT} (column p #1)"
            if n_open > 1 else f"the best-predicted member beats every other with p >= {RULE_OUT} (column p #1)")
    return [f"# {said}.",
            f"# To find the true best, train the {k} best-predicted: 2 or more cover the 1 in 20 that trains "
            "> 0.3 worse.",
            f"# Protocol {name}" + (f": {when}" if when else "") + ":",
            " ".join([f"forge-verify run={quote(rel(run_dir))}", *carry(run_dir, code=True), f"k={k} control=0"])]


def odds_summary(rows: Sequence[dict[str, Any]], odds: PairwiseOdds | None, predictor: Any = None
                 ) -> dict[str, Any] | None:
    """summary.json's `loss_pairwise`: the curve, whose it is, and how many front members it cannot rule out."""
    if odds is None:
        return None
    groups = loss_groups(rows, odds)
    keep = ("method", "source", "rows_hash", "n_rows", "n_pairs", "inherited_from")
    prov = {k: odds.provenance[k] for k in keep if k in odds.provenance}
    check = odds.provenance.get("check") or {}
    return {"predictor": predictor, "rule_out": RULE_OUT, **odds.to_dict(),
            "provenance": {**prov, "check_max_error": check.get("max_error")},
            "groups": group_sizes(groups), "n_not_ruled_out": group_sizes(groups)[0] if len(rows) else 0}


def front_p_best(rows: list[dict[str, Any]], summary: dict[str, Any],
                 chosen: list[dict[str, Any]]) -> dict[str, float | None]:
    """{id: P that the front's best-predicted member trains better than it} of the `chosen` rows, from the run's
    odds (search.odds; None for that member itself); {} when the run recorded none."""
    p, want = p_best(rows, run_odds(summary)), {r["id"] for r in chosen}
    if p is None:
        return {}
    return {r["id"]: (None if v != v else float(v)) for r, v in zip(rows, p) if r["id"] in want}
