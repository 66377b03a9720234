"""Bounded in-memory caches of a search (issue 53 §3): memory flat with the search's length.

A search keeps in memory what its next generation needs (the population's records, the front) and what it must
print; its per-genome caches (decoded genomes, ids, duplicate keys, hardware costs, deterministic losses, encoded
lines) only speed up genomes seen again, so each keeps its newest `CACHE_ROWS` entries: `trim` drops the oldest
(insertion order) at a point where nothing read from the cache is still to be read (the start of a generation's
evaluation), and a genome seen again after that is decoded or scored again, to the same numbers. Up to
`CACHE_ROWS` evaluations (the default job's 1,944 included) nothing is dropped but decoded genomes past `GENOME_ROWS`.
"""
from __future__ import annotations

from itertools import islice
from typing import Any, MutableMapping

CACHE_ROWS = 4096  # entries per cache: > the default job's 1,944 evaluations and its ~2,900 duplicate keys
# decoded genomes (and their ids, trimmed in step with them): ~10 KiB each, the distinct LayerGenes they hold, the
# largest entries by far (20 MiB of the default job's 1,945 at 4,096 entries; bench/RESULTS.md, issue 53 §3), so
# fewer: 21 generations of the default job's offspring; an older row seen again is decoded again, to the same genome
GENOME_ROWS = 1024


def trim(cache: MutableMapping[Any, Any], keep: int | None = None) -> None:
    """Drop the oldest entries of `cache` (a dict: insertion order) beyond `keep` (default `CACHE_ROWS`)."""
    extra = len(cache) - (CACHE_ROWS if keep is None else keep)
    if extra > 0:
        for k in list(islice(cache, extra)):
            del cache[k]
