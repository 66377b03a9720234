"""Forge core: what every other part uses, and it imports none of them.

genome (typed frozen genome, YAML/JSON, stable id) · importers (genome files: ours and LLMForge's CSV and
per-model YAML) · space (grids, sampling, repair, integer codec) · arrays (struct-of-arrays populations) ·
workload (the one source of operators, parameters, FLOPs and bytes) · model (the IHA PyTorch model) ·
labels (the label format) · config, io, parallel (Hydra paths, atomic writes, spawned workers) · needs (what training
needs beyond the core install: a GPU, an extra) ·
cli (`forge-arch`, `forge-space`).

`forge.labelling` (real training, corpora, the label store, dispatch, `forge-label`) is built on the core;
the core never imports it, nor `backends`, `surrogate` or `search`.
"""

__version__ = "0.2.0"  # the one place the version lives (pyproject reads it; CHANGELOG.md names it)
