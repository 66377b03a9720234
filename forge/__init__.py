"""Forge core: what every other part uses, and it imports none of them.

genes (the registry: each per-layer gene declared once) · genome (typed frozen genome, YAML/JSON, stable id) · importers (genome files: ours and LLMForge's CSV and
per-model YAML) · space (grids, sampling, repair, integer codec; chosen by `_target_`) · arrays (struct-of-arrays populations) ·
workload (the one source of operators, parameters, FLOPs and bytes) · model (the IHA PyTorch model) ·
labels (the label format) · config, io, parallel (Hydra paths and config groups, atomic writes, spawned workers) ·
app (the wrapper every command runs in: one error path, exit codes) ·
plugins (the allowlist of classes a config may name: a run folder is data, never code) · redact (URL
passwords masked in everything written or printed) · needs (what training needs beyond the core install: a GPU,
an extra) · cli (`forge-arch`, `forge-space`).

`forge.labelling` (real training, corpora, the label store, dispatch, `forge-label`) is built on the core;
the core never imports it, nor `backends`, `surrogate` or `search`.

`forge.search`, `forge.cost`, `forge.predict`, `forge.load` and `forge.SearchResult` are the Python API. Its code is
`search/api.py`, at the top of the import order; the names reach `forge` through package metadata, as plug-ins do:
pyproject.toml declares each in the entry-point group `forge.api`, and the first use of one loads it from the
installed forge-nas distribution (no other package may provide it), so `import forge` stays light and the core
imports nothing above it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__version__ = "0.2.0"  # the one place the version lives (pyproject reads it; CHANGELOG.md names it)

API = ("search", "cost", "predict", "load", "SearchResult")
API_GROUP = "forge.api"  # [project.entry-points."forge.api"] in pyproject.toml
DISTRIBUTION = "forge-nas"  # the one distribution allowed to provide them


def __getattr__(name: str) -> object:
    if name not in API:
        raise AttributeError(f"module 'forge' has no attribute {name!r}")
    from forge.shadow import check

    check()  # a user's `search/` folder on sys.path would be loaded in place of Forge's: refuse in one line first
    value = _api_entry(name).load()
    globals()[name] = value  # later uses skip the metadata scan
    return value


def _api_entry(name: str) -> EntryPoint:
    """The `forge.api` entry point `name` of the installed forge-nas distribution, else one line on how to get it."""
    import re
    from importlib.metadata import entry_points

    from forge.errors import UserError

    def ours(ep: EntryPoint) -> bool:
        dist = getattr(ep, "dist", None)
        return dist is not None and re.sub(r"[-_.]+", "-", dist.name).lower() == DISTRIBUTION

    found = [ep for ep in entry_points(group=API_GROUP, name=name) if ours(ep)]
    if not found:
        raise UserError(f"forge.{name} is not available: the {DISTRIBUTION} distribution's metadata (entry-point group "
                        f"{API_GROUP}) is not installed; allowed: install Forge, e.g. `pip install -e .` in a source "
                        "checkout or `pip install forge-nas`")
    return found[0]
