"""Whose code raised: an exception from inside a user's plug-in (a hook, a surrogate, an objective, a space class)
is that plug-in's error, named by its module, not a bug in Forge.

The traceback is read innermost frame first: installed libraries (torch, numpy, the standard library) are passed
over, a Forge module (forge, search, surrogate, backends, forge_hf) means the bug is Forge's, and any other module
(a plug-in module the command imported, the user's script, a package of theirs) is the one to blame.
"""
from __future__ import annotations

import sys
import sysconfig
from types import TracebackType

FORGE = ("forge", "search", "surrogate", "backends", "forge_hf")  # the project's own packages


def _library(file: str) -> bool:
    """An installed library's file (site-packages, the standard library) or code without a file (`<string>`)."""
    stdlib = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
    return file.startswith(("<", *stdlib)) or "/site-packages/" in file or "/dist-packages/" in file


def culprit(tb: TracebackType | None) -> tuple[str, str, int] | None:
    """(module, file, line) of the plug-in (user) code that raised, or None when the error is Forge's own."""
    from forge import plugins

    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    mine = set(plugins.used())
    for frame in reversed(frames):
        mod = str(frame.f_globals.get("__name__", ""))
        where = (mod, frame.f_code.co_filename, frame.f_lineno)
        if mod in mine or any(mod.startswith(f"{m}.") for m in mine):
            return where
        if mod.split(".")[0] in FORGE or mod.startswith("forge_export_modeling_"):
            return None
        if not _library(frame.f_code.co_filename):
            return where
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
