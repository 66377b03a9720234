"""Balanced contiguous packing of a layer sequence onto a ring of identical chips (LLMForge App. E.3).

A *partition* is a tuple of stage end indices (exclusive): (3, 7, 10) puts layers 0–2 on chip 0,
3–6 on chip 1 and 7–9 on chip 2. Layers keep their order, so each stage is a contiguous run.

- `greedy_partition` is Algorithm 2: scan layers in order and extend the current stage while its
  weight bytes, KV bytes (κ·T) and decode-ops budget B all hold; otherwise seal it and open the next.
  The printed pseudo-code resets the new stage to empty (dropping the layer that did not fit); we
  put that layer into the new stage, which is what the prose ("sealing the stage off") describes.
  Scratchpad (peak activation) is a per-layer check only, as in the paper.
- `balanced_pack` is Algorithm 1: integer binary search over B in [max_i o_i, Σ_i o_i] for the
  smallest budget whose greedy partition exists. The ring-depth cap makes the search meaningful
  (without it B = max_i o_i always succeeds): a greedy partition with more stages than the cap counts
  as infeasible. By default the bisection runs over the sorted stage sums inside that range (the
  optimum is always one): the same budget with ~3x fewer greedy scans. Greedy next-fit gives the
  fewest stages for a given B (all capacities are additive), so the budget found is the true minimax
  optimum, which `brute_force_pack` (a DP) checks in tests.
- `capacity_partition` is the `llmforge` conventions' packing: the same next-fit scan with no ops
  budget, i.e. the fewest chips for the capacities (llmforge.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

Partition = tuple[int, ...]


@dataclass(frozen=True)
class ChipCaps:
    """Per-chip capacities seen by the packer: weight bytes W, KV bytes K, scratchpad A, ring cap."""

    W: int
    K: int
    A: int
    cap: int


@dataclass(frozen=True)
class Packing:
    partition: Partition
    budget: int  # the decode-ops budget B* found by Algorithm 1 (= max stage ops for the optimum)

    @property
    def n_stages(self) -> int:
        return len(self.partition)


def first_violation(w: Sequence[int], kT: Sequence[int], o: Sequence[int], a: Sequence[int],
                    caps: ChipCaps, B: Optional[int] = None) -> Optional[str]:
    """Why some single layer cannot fit on the chip at all (Alg. 1 line 1 / Alg. 2 line 4), else None."""
    for i in range(len(w)):
        if w[i] > caps.W:
            return f"layer {i} needs {w[i]} weight bytes > chip weight memory {caps.W}"
        if kT[i] > caps.K:
            return f"layer {i} needs {kT[i]} KV bytes > chip KV memory {caps.K}"
        if a[i] > caps.A:
            return f"layer {i} needs {a[i]} activation bytes > chip scratchpad {caps.A}"
        if B is not None and o[i] > B:
            return f"layer {i} needs {o[i]} decode ops > stage budget {B}"
    return None


def _greedy(w: Sequence[int], kT: Sequence[int], o: Sequence[int], W: int, K: int, B: float,
            cap: float) -> Optional[Partition]:
    """Algorithm 2 without the per-layer checks (the caller made them): None when > cap stages."""
    ends: list[int] = []
    cw = ck = co = 0
    for i in range(len(w)):
        wi, ki, oi = w[i], kT[i], o[i]
        if cw + wi <= W and ck + ki <= K and co + oi <= B:
            cw += wi
            ck += ki
            co += oi
        else:
            ends.append(i)
            if len(ends) >= cap:  # the stage just opened would exceed the ring cap
                return None
            cw, ck, co = wi, ki, oi
    ends.append(len(w))
    return tuple(ends)


def greedy_partition(w: Sequence[int], kT: Sequence[int], o: Sequence[int], a: Sequence[int],
                     caps: ChipCaps, B: int) -> Optional[Partition]:
    """Algorithm 2 (GreedyContiguousPartition): the partition for budget B, or None if infeasible."""
    if first_violation(w, kT, o, a, caps, B) is not None:
        return None
    return _greedy(w, kT, o, caps.W, caps.K, B, caps.cap)


def min_stages(w: Sequence[int], kT: Sequence[int], W: int, K: int) -> int:
    """Fewest contiguous stages under weight and KV capacity alone (no ops budget, no cap)."""
    part = _greedy(w, kT, [0] * len(w), W, K, 0, float("inf"))
    return len(part) if part is not None else 0


def capacity_partition(w: Sequence[float], kT: Sequence[float], W: float, K: float) -> Optional[Partition]:
    """Capacity-greedy packing (the release's `llmforge` convention): fill each chip to W and K in order."""
    if not len(w) or max(w) > W or max(kT) > K:
        return None
    return _greedy(w, kT, [0] * len(w), W, K, 0, float("inf"))


def capacity_cores(w: Sequence[float], kT: Sequence[float], w_b: int, k_b: int, cap: int, min_cores: int,
                   max_cores: int, overhead: float) -> Optional[tuple[int, Partition]]:
    """The `llmforge` chip sizing: the smallest 2^k cores whose weight memory / overhead packs the layers
    into <= cap chips (KV does not split the partition), then more cores, same partition, until every
    chip's KV / overhead fits its KV memory. None when max_cores is not enough."""
    cores, part = min_cores, None
    while cores <= max_cores:
        part = capacity_partition(w, [0] * len(w), cores * w_b / overhead, 0.0)
        if part is not None and len(part) <= cap:
            break
        cores *= 2
    kv = max(stage_ops(kT, part)) if part is not None else 0
    while cores <= max_cores and kv * overhead > cores * k_b:
        cores *= 2
    return (cores, part) if cores <= max_cores else None


@lru_cache(maxsize=128)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n + 1, k=1)


def candidate_budgets(w: Sequence[int], kT: Sequence[int], o: Sequence[int], W: int, K: int) -> np.ndarray:
    """Sorted ops of every contiguous run of layers that fits one chip (repeats kept): the only possible B*."""
    Pw, Pk, Po = (np.cumsum(np.asarray((0, *x), dtype=np.int64)) for x in (w, kT, o))
    i, j = _pairs(len(o))
    fits = (Pw[j] - Pw[i] <= W) & (Pk[j] - Pk[i] <= K)
    sums = Po[j[fits]] - Po[i[fits]]
    sums.sort()
    return sums


def balanced_pack(w: Sequence[int], kT: Sequence[int], o: Sequence[int], a: Sequence[int],
                  caps: ChipCaps, method: str = "candidates") -> Optional[Packing]:
    """Algorithm 1 (BalancedContiguousPack): the minimax-ops partition within the ring cap, or None.

    method="integer" bisects every integer of [max o, Σ o] as printed; "candidates" (default) bisects
    the same range restricted to stage sums, where the optimum must lie: same B*, ~3× fewer scans.
    """
    if not len(w) or first_violation(w, kT, o, a, caps) is not None:
        return None
    if method == "integer":
        cand = None
        lo, hi = max(o), sum(o)
    else:
        cand = candidate_budgets(w, kT, o, caps.W, caps.K)
        lo, hi = int(np.searchsorted(cand, max(o))), len(cand) - 1
    best: Optional[Packing] = None
    while lo <= hi:
        mid = (lo + hi) // 2
        B = mid if cand is None else int(cand[mid])
        part = _greedy(w, kT, o, caps.W, caps.K, B, caps.cap)
        if part is not None:
            best, hi = Packing(part, B), mid - 1
        else:
            lo = mid + 1
    return best


def stage_ops(o: Sequence[int], part: Partition) -> list[int]:
    start, out = 0, []
    for end in part:
        out.append(sum(o[start:end]))
        start = end
    return out


def brute_force_pack(w: Sequence[int], kT: Sequence[int], o: Sequence[int], a: Sequence[int],
                     caps: ChipCaps) -> Optional[int]:
    """Exact minimax stage ops over all contiguous partitions within the caps (O(N²·cap) DP; tests only)."""
    n = len(w)
    if not n or first_violation(w, kT, o, a, caps) is not None:
        return None
    inf = float("inf")
    # best[s][i]: minimal max-stage ops covering layers [0, i) with exactly s stages
    best = [[inf] * (n + 1) for _ in range(caps.cap + 1)]
    best[0][0] = 0
    for s in range(1, caps.cap + 1):
        for i in range(1, n + 1):
            sw = sk = so = 0
            for j in range(i - 1, -1, -1):  # last stage = layers [j, i)
                sw, sk, so = sw + w[j], sk + kT[j], so + o[j]
                if sw > caps.W or sk > caps.K:
                    break
                cand = max(best[s - 1][j], so)
                if cand < best[s][i]:
                    best[s][i] = cand
    opt = min(best[s][n] for s in range(1, caps.cap + 1))
    return None if opt == inf else int(opt)
