"""An objective function with a parameter from config: `{name: memory_mb, fn: tests.ext.objectives.memory_mb,
params: {context: 512}}` (or the function itself through the Python API)."""
from __future__ import annotations

from typing import Sequence

from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome
from forge.lm.workload import Precision, workload_totals


def memory_mb(genomes: Sequence[Genome], context: int = 256, batch: int = 1) -> list[float]:
    """Weights plus the KV cache of `batch` sequences of `context` tokens, in MB (bf16): larger contexts weigh KV more."""
    totals = workload_totals(PopArrays.from_genomes(list(genomes)), context, batch, Precision())
    return [float(v) / 1e6 for v in totals["peak_memory_bytes"]]
