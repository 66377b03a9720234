"""Old import paths of the core's modules, kept working for a deprecation period (issue 46 moved them into packages).

`import forge.genes` (or `from forge import genes`, `from forge.space import SearchSpace`, and since issue 57
`forge.runtime.app`, now `forge.shell.app`) still works: a finder on
`sys.meta_path` answers each old name with the module at its new path, the same module object (so a gene registered
through the old path is the registry's own), and warns once per old path, naming the new one and the file that
imported it. The warning is a `ForgeDeprecationWarning`, a FutureWarning, so a plug-in's user sees it in every
command (Python hides a DeprecationWarning raised outside `__main__`). The aliases go in Forge `REMOVED_IN`.

Standard library only: `import forge` installs the finder before anything else is imported.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

REMOVED_IN = "0.4.0"  # the release that drops the aliases (CHANGELOG.md "Moved import paths")
# old module under forge/ -> the package it moved to (old `forge.genes` is `forge.genomes.genes`)
MOVED = {"app": "shell", "arrays": "spaces", "blame": "shell", "codec": "spaces", "config": "runtime",
         "confined": "disk", "entry": "shell", "files": "disk", "genes": "genomes", "genome": "genomes",
         "genome_checks": "genomes", "grids": "spaces", "hook_export": "lm", "hooks": "lm", "importers": "genomes",
         "io": "disk", "labels": "genomes", "launch_only": "runtime", "limits": "runtime", "links": "spaces",
         "model": "lm", "model_state": "lm", "needs": "runtime", "parallel": "runtime", "plugin_use": "shell",
         "precision": "genomes", "redact": "disk", "shadow": "runtime", "signals": "runtime", "space": "spaces",
         "steps": "runtime", "tracking": "shell", "windows": "lm", "workload": "lm"}
# issue 57: the command shell left forge/runtime/ for forge/shell/, and numeric.py (numbers, not plumbing) went back
# to forge/ itself: old module path under forge/ -> its new one
REMOVED_FROM_RUNTIME = ("app", "blame", "entry", "plugin_use", "run_guard", "tracking")
NESTED = {**{f"runtime.{m}": f"shell.{m}" for m in REMOVED_FROM_RUNTIME}, "runtime.numeric": "numeric"}
# a name that left its module while the module stayed: old `module.name` -> new `module.name`
ATTRIBUTES = {"forge.disk.redact.MaskSecrets": "forge.shell.callbacks.MaskSecrets"}
_warned: set[str] = set()


class ForgeDeprecationWarning(FutureWarning):
    """A Forge import path (or call) that still works but goes in a named release: shown by default."""


def new_path(old: str) -> str | None:
    """`forge.genomes.genes` for `forge.genes`, `forge.shell.app` for `forge.runtime.app`; None for a module that
    did not move."""
    head, _, name = old.partition(".")
    if head != "forge":
        return None
    if name in MOVED:
        return f"forge.{MOVED[name]}.{name}"
    return f"forge.{NESTED[name]}" if name in NESTED else None


def new_target(path: str) -> str:
    """An import path `module.attr` (a saved run's `_target_`) at its new place; unchanged when nothing moved. The
    longest old module wins: `forge.runtime.app.x` is `forge.shell.app.x`, `forge.config.x` `forge.runtime.config.x`."""
    if path in ATTRIBUTES:
        return ATTRIBUTES[path]
    parts = path.split(".")
    for i in range(len(parts) - 1, 1, -1):  # a module path and at least one name after it
        new = new_path(".".join(parts[:i]))
        if new:
            return ".".join([new, *parts[i:]])
    return path


def moved_attribute(module: str, name: str) -> Any:
    """A module's `__getattr__` for the names that left it (ATTRIBUTES): the object at its new path, warning once
    per old path; AttributeError for any other name, as a plain module raises."""
    old = f"{module}.{name}"
    if old not in ATTRIBUTES:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new_module, _, new_name = ATTRIBUTES[old].rpartition(".")
    _warn_once(old, ATTRIBUTES[old])
    return getattr(importlib.import_module(new_module), new_name)


def _importer() -> tuple[str, int]:
    """The file and line of the `import` statement that asked for the old path (the first frame outside importlib
    and this module)."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                 or frame.f_code.co_filename == __file__ or frame.f_code.co_name == "__getattr__"):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)


def warn(old: str) -> None:
    """One warning per old path per process, naming the new path and the file that imported the old one."""
    _warn_once(old, new_path(old))


def _warn_once(old: str, new: str | None) -> None:
    if old in _warned:
        return
    _warned.add(old)
    where, line = _importer()
    warnings.warn_explicit(f"{old} moved to {new}: import {new} (the old path works until Forge {REMOVED_IN})",
                           ForgeDeprecationWarning, where, line)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers `forge.<old>` with the module at its new path (imported first), warning once."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if new_path(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        warn(spec.name)
        module = importlib.import_module(new_path(spec.name))  # type: ignore[arg-type]
        spec.loader_state = module.__spec__  # importlib sets the module's __spec__ to this one: exec_module undoes it
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The new module ran when it was imported; importlib set its __spec__ to the alias's: give it back."""
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put the finder on sys.meta_path once (first: a stale `forge/genes.py` left by an old checkout loses)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
