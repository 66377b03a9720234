"""Forge core: what every other part uses, and it imports none of them. Each folder is one concept:

genomes/ (the gene registry, the typed genome and its checks, numeric formats, genome files, the label format) ·
spaces/ (search spaces: grids, links, the integer codec, population arrays) · lm/ (the IHA PyTorch model and the
analytic workload: operators, parameters, FLOPs, bytes) · runtime/ (the helpers a command runs on: config,
limits, signals, progress, workers) · shell/ (the command shell: entry, app, the run-folder guard, plug-in use,
tracking) · numeric (machine-independent numbers) · disk/ (atomic writes, user-named files, writes
confined to a run folder, masked secrets) · labelling/ (below) · errors (the one error family: what a user can
fix, as opposed to a bug) · plugins (the allowlist of classes a config may name: a run folder is data, never code) ·
cli (`forge-arch`, `forge-space`) · moved (the paths before this layout, `forge.genes` & co., still imported, with
a warning naming the new path, until the release it names) · fidelity/ (multi-fidelity decisions: curve model,
stopping rules, races).

`forge.labelling` (real training, corpora, the label store, dispatch, `forge-label`) is built on the core;
the core never imports it, nor `backends`, `surrogate` or `search` (but for the Python API's one lazy import, below).

`forge.search`, `forge.cost`, `forge.predict`, `forge.load` and `forge.SearchResult` are the Python API. Its code is
`search/api.py` (`SearchResult` in `search/result.py`, which it imports), at the top of the import order (it calls
search, surrogate and backends); `__getattr__` below imports it on the first use of one of these names. That lazy
import is the core's one reference to a package above it, named here and allowed by name in tests/test_structure.py
(docs/concepts/layout.md says why): `import forge` stays light and loads nothing above the core.
"""
from __future__ import annotations

from forge import moved as _moved

_moved.install()  # `import forge.genes` & co. (the paths before issue 46) still work, with one warning each

__version__ = "0.2.0"  # the one place the version lives (pyproject reads it; CHANGELOG.md names it)

API = ("search", "cost", "predict", "load", "SearchResult")


def __getattr__(name: str) -> object:
    """`forge.search` & co.: search/api.py's names, imported on first use (the core's one upward import)."""
    if name not in API:
        raise AttributeError(f"module 'forge' has no attribute {name!r}")
    from forge.runtime.shadow import check

    check()  # a user's `search/` folder on sys.path would be loaded in place of Forge's: refuse in one line first
    import search.api  # the one upward import: lazy, so the core's modules never load search (tests/test_structure)

    value = globals()[name] = getattr(search.api, name)  # later uses skip __getattr__
    return value
