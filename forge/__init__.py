"""Forge core: what every other part uses, and it imports none of them.

genes (the registry: each per-layer gene declared once) · genome (typed frozen genome, YAML/JSON, stable id) · importers (genome files: ours and LLMForge's CSV and
per-model YAML) · space (grids, sampling, repair, integer codec; chosen by `_target_`) · arrays (struct-of-arrays populations) ·
workload (the one source of operators, parameters, FLOPs and bytes) · model (the IHA PyTorch model) ·
labels (the label format) · config, io, parallel (Hydra paths, atomic writes, spawned workers) ·
plugins (the allowlist of classes a config may name: a run folder is data, never code) · redact (URL
passwords masked in everything written or printed) · needs (what training needs beyond the core install: a GPU,
an extra) · cli (`forge-arch`, `forge-space`).

`forge.labelling` (real training, corpora, the label store, dispatch, `forge-label`) is built on the core;
the core never imports it, nor `backends`, `surrogate` or `search`.

`forge.search`, `forge.cost`, `forge.predict` and `forge.load` are the Python API (`forge/api.py`, the one
façade above every package), loaded on first use so `import forge` stays light.
"""

__version__ = "0.2.0"  # the one place the version lives (pyproject reads it; CHANGELOG.md names it)

API = ("search", "cost", "predict", "load", "SearchResult")


def __getattr__(name: str):
    if name in API:
        import importlib

        return getattr(importlib.import_module("forge.api"), name)
    raise AttributeError(f"module 'forge' has no attribute {name!r}")
