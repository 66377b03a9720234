"""Console-script entries: `--help` and `--version` answer before the command's own code is imported.

A command's module pulls in what its work needs (torch, Lightning, pymoo, scipy: seconds to import), but its
help is only its Hydra config and its version one string. Each installed `forge-*` script is an `entry(app,
target)`: a help or version flag is answered by a bare Hydra main on the same config (the same text as the
command's own), anything else imports `target` and runs it unchanged. The core's commands are declared here;
backends/entry.py, surrogate/entry.py and search/entry.py declare their own, so the core names nothing above it.
"""
from __future__ import annotations

import gc
import importlib
import sys
from typing import Any, Callable

HELP_FLAGS = ("--help", "-h", "--hydra-help", "--version")


def _help_only(app: str) -> None:
    """Hydra's help (or Forge's version) for `app`, from its config alone; no task ever runs."""
    from forge.runtime.app import forge_main

    @forge_main(app)
    def task(cfg: Any) -> None:  # pragma: no cover - Hydra exits after the help
        raise SystemExit(0)

    task()


def entry(app: str, target: str) -> Callable[[], None]:
    """The console script of `app`; `target` is its real entry, "module:function", imported only to run."""
    def main() -> None:
        if any(a in HELP_FLAGS for a in sys.argv[1:]):
            return _help_only(app)
        module, fn = target.split(":")
        return getattr(_command_module(app, module), fn)()

    main.__name__ = main.__qualname__ = app.replace("-", "_")
    main.app, main.target = app, target  # type: ignore[attr-defined]
    return main


def _command_module(app: str, module: str) -> Any:
    """The command's module; a search-only install (no torch) refuses a training command here in one line.

    The collector pauses while it imports (the imports' ~10^5 objects live as long as the process: collecting
    them is wasted, ~0.05 s CPU of forge-search's job, issue 45) and then freezes them out of later collections."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        from forge.runtime.app import EXIT_USAGE, missing_train_extra

        if missing_train_extra(e) is None:
            raise
        print(f"{app}: error: {missing_train_extra(e)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    finally:
        gc.freeze()
        if collecting:  # as it was (a caller that paused it keeps it paused)
            gc.enable()


forge_arch = entry("forge-arch", "forge.cli:arch_main")
forge_space = entry("forge-space", "forge.cli:space_main")
forge_label = entry("forge-label", "forge.labelling.cli:main")
