"""Console-script entries: `--help` and `--version` answer before the command's own code is imported.

A command's module pulls in what its work needs (torch, Lightning, pymoo, scipy: seconds to import), but its
help is only its Hydra config and its version one string. Each `forge-*` script points here; a help or version
flag is answered by a bare Hydra main on the same config (the same text as the command's own), anything else
imports the real entry and runs it unchanged.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

HELP_FLAGS = ("--help", "-h", "--hydra-help", "--version")

ENTRIES = {  # app: the real entry "module:function"
    "forge-arch": "forge.cli:arch_main", "forge-space": "forge.cli:space_main", "forge-hw": "backends.cli:main",
    "forge-surrogate": "surrogate.cli:main", "forge-label": "forge.labelling.cli:main",
    "forge-search": "search.cli:search_main", "forge-report": "search.cli:report_main",
    "forge-export": "search.cli:export_main", "forge-verify": "search.verify_cli:main",
    "forge-serve": "search.serving.cli:main",
}


def _help_only(app: str) -> None:
    """Hydra's help (or Forge's version) for `app`, from its config alone; no task ever runs."""
    from forge.app import forge_main

    @forge_main(app)
    def task(cfg: Any) -> None:  # pragma: no cover - Hydra exits after the help
        raise SystemExit(0)

    task()


def entry(app: str) -> Callable[[], None]:
    def main() -> None:
        if any(a in HELP_FLAGS for a in sys.argv[1:]):
            return _help_only(app)
        module, fn = ENTRIES[app].split(":")
        return getattr(importlib.import_module(module), fn)()

    main.__name__ = main.__qualname__ = app.replace("-", "_")
    return main


forge_arch, forge_space, forge_hw, forge_surrogate, forge_label = (
    entry(a) for a in ("forge-arch", "forge-space", "forge-hw", "forge-surrogate", "forge-label"))
forge_search, forge_report, forge_export, forge_verify, forge_serve = (
    entry(a) for a in ("forge-search", "forge-report", "forge-export", "forge-verify", "forge-serve"))
