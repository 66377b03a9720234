"""Forge's top-level packages have generic names (`search`, `backends`, `surrogate`): a script or notebook run from
a folder that holds its own `search/` or `backends/` package (common in NAS code) puts that folder first on
sys.path, and `forge.search()` would import the user's package and fail deep inside (`No module named
'search.cli'`). `check()` finds such a folder before anything is imported and refuses in one line.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from forge.errors import UserError

PACKAGES = ("search", "backends", "surrogate", "forge_hf")  # installed beside `forge` (setup.py: find_packages)


class ShadowError(UserError):
    """A folder on sys.path hides one of Forge's packages."""


def _where(name: str) -> Path | None:
    """The folder `import name` would load (None: not found)."""
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "__file__", None):
        return Path(mod.__file__).resolve().parent
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        return Path(spec.origin).resolve().parent
    locs = list(spec.submodule_search_locations or [])
    return Path(locs[0]).resolve() if locs else None


def check(names: tuple[str, ...] = PACKAGES) -> None:
    """Refuse when one of Forge's packages would be imported from anywhere but beside `forge` itself."""
    home = Path(__file__).resolve().parents[2]
    for name in names:
        got = _where(name)
        if got is not None and got != home / name:
            raise ShadowError(f"the folder {got} hides Forge's `{name}` package (a script or notebook run from "
                              f"{got.parent} puts it first on sys.path); allowed: run from another folder, or rename "
                              f"your `{name}` package (Forge's top-level packages are search, backends, surrogate)")
