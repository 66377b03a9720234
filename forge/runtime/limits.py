"""Ranges of the numeric options Hydra cannot check: checked before any work, with the key named.

Without them `seed=-1` ends in numpy's traceback and `search.pop_size=1e9` or `n=1e9` tries to hold a
billion genomes and hangs. Sizes that hold genomes in memory are bounded by what fits: the machine's memory
divided by `GENOME_BYTES`, a generous estimate of one genome's working set in a search or label run (its
decoded layers, evaluation record and JSON line, and its share of the surrogate's activations).
"""
from __future__ import annotations

import os
from typing import Any

from forge.errors import RangeError, check_int

SEED_MAX = 2**32 - 1  # numpy's SeedSequence accepts any non-negative int; torch.manual_seed wants < 2**64
GENOME_BYTES = 1 << 20  # 1 MiB per genome held at once (upper estimate, see module docstring)


def memory_bytes() -> int:
    """Physical memory of this machine (a fallback of 8 GiB where sysconf cannot say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def genome_limit() -> int:
    """How many genomes one run may hold at once on this machine."""
    return max(1024, memory_bytes() // GENOME_BYTES)


MEM = "memory"  # marker: upper bound = genome_limit()
# config name -> dotted key -> (low, high); high None = no upper bound, MEM = what fits in memory
RANGES: dict[str, dict[str, tuple[int, Any]]] = {
    "forge-search": {"seed": (0, SEED_MAX), "search.pop_size": (1, MEM), "search.offspring": (1, MEM),
                     "search.generations": (0, None), "evaluator.n_mc": (0, 10_000), "stop_after": (0, None)},
    "forge-label": {"seed": (0, SEED_MAX), "n": (1, MEM)},
    "forge-hw": {"calibrate.n": (1, MEM), "calibrate.seed": (0, SEED_MAX)},
    "forge-surrogate": {"seed": (0, SEED_MAX), "seeds": (1, 1000)},
    "forge-serve": {"seed": (0, SEED_MAX)},
    "forge-export": {"seed": (0, SEED_MAX)},
    "forge-verify": {"seed": (0, SEED_MAX), "k": (1, MEM), "control": (0, MEM)},
    "forge-report": {"top": (1, MEM)},
}


def check_range(config_name: str, key: str, value: Any) -> None:
    """Raise a RangeError naming `key` when `value` lies outside its range (keys without one pass)."""
    rng = RANGES.get(config_name, {}).get(key)
    if rng is None or value is None:
        return
    low, high = rng
    why = ""
    if high == MEM:
        high, why = genome_limit(), f"what fits in {memory_bytes() >> 30} GiB at ~{GENOME_BYTES >> 20} MiB per genome"
    check_int(key, value, low, high, why)


__all__ = ["RANGES", "RangeError", "check_range", "genome_limit", "memory_bytes"]
