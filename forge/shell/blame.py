"""Whose code raised: an exception from inside a user's plug-in (a hook, a surrogate, an objective, a space class)
is that plug-in's error, named by its module, not a bug in Forge.

The traceback is read innermost frame first: a frame of a plug-in (a module the command imported as one, a module
that registered hooks, or the module of a class or function the user named or handed over) is the one to blame; a
Forge frame (forge, search, surrogate, backends, forge_hf) before any plug-in frame means the bug is Forge's; other
frames (torch, numpy, the standard library) are passed over.
"""
from __future__ import annotations

import sys
from types import TracebackType

FORGE = ("forge", "search", "surrogate", "backends", "forge_hf")  # the project's own packages


def _plugin_modules() -> set[str]:
    """Modules whose code is the user's: plug-in modules, hook modules, and those of the paths they allowed."""
    from forge import plugins
    from forge.lm import hooks

    shipped = {p for paths in plugins.shipped().values() for p in paths}
    named = {p for k in plugins.kinds() for p in plugins.allowed(k) if p not in shipped}
    return {*plugins.used(), *(h.module for h in hooks.ordered()), *(p.rpartition(".")[0] for p in named)}


def culprit(tb: TracebackType | None) -> tuple[str, str, int] | None:
    """(module, file, line) of the plug-in code that raised, or None when the error is Forge's own."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    mine = _plugin_modules() - {""}
    for frame in reversed(frames):
        mod = str(frame.f_globals.get("__name__", ""))
        if mod in mine or any(mod.startswith(f"{m}.") for m in mine):
            return mod, frame.f_code.co_filename, frame.f_lineno
        if mod.split(".")[0] in FORGE or mod.startswith("forge_export_modeling_"):
            return None
    return None


def plugin_error_line(app: str, e: BaseException) -> str | None:
    """The line that replaces "a bug in Forge" when a plug-in raised `e`; None when Forge did."""
    found = culprit(e.__traceback__ or sys.exc_info()[2])
    if found is None:
        return None
    mod, file, line = found
    first = (str(e).strip().splitlines() or [""])[0][:200]
    return (f"{app}: error in plug-in module {mod} ({file}:{line}): {type(e).__name__}: {first}; this is an error in "
            f"that module, not in Forge: fix it there (or report it to its author)")
