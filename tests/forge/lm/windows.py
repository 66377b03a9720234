"""Test helpers for the per-layer `window` gene, before and after the gene registry declares it.

Until `LayerGene.window` / `PopArrays.window` exist (forge.genomes.genes), a window is attached as an attribute,
which is what `forge.lm.model.layer_window` and `forge.lm.workload.layer_windows` read.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene


def with_window(gene: LayerGene, window: int) -> LayerGene:
    """A copy of `gene` with attention window `window` (0 = full)."""
    if callable(getattr(LayerGene, "replace", None)):  # the registry's LayerGene.replace(window=...)
        return gene.replace(window=window)
    g = replace(gene)
    object.__setattr__(g, "window", window)
    return g


def windowed_genome(genome: Genome, windows: Sequence[int]) -> Genome:
    return genome.with_layers(with_window(g, w) for g, w in zip(genome.layers, windows))


def windowed_pop(genomes: Sequence[Genome], windows: Sequence[Sequence[int]]) -> PopArrays:
    """PopArrays of `genomes` with a (P, L) window array (0 = full)."""
    pop = PopArrays.from_genomes(genomes)
    w = np.asarray(windows, dtype=np.int64).reshape(pop.P, pop.L)
    genes = getattr(pop, "genes", None)
    if isinstance(genes, dict):  # the registry's per-gene arrays
        genes["window"] = np.where(pop.attn.astype(bool), w, 0)
    else:
        pop.window = w
    return pop
