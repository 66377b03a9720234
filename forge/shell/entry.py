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
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

HELP_FLAGS = ("--help", "-h", "--hydra-help", "--version")
# What OpenBLAS reads for its thread pool when it loads, first match wins: a user's setting is never overridden.
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
BLAS_STARTED_ONE: list[bool] = []  # [True] once a command's BLAS libraries were loaded with a one-thread pool


def _help_only(app: str) -> None:
    """Hydra's help (or Forge's version) for `app`, from its config alone; no task ever runs."""
    from forge.shell.app import forge_main

    @forge_main(app)
    def task(cfg: Any) -> None:  # pragma: no cover - Hydra exits after the help
        raise SystemExit(0)

    task()


def entry(app: str, target: str, inference: bool = False) -> Callable[[], None]:
    """The console script of `app`; `target` is its real entry, "module:function", imported only to run.

    `inference`: a short command on small batches (the search and the commands that only predict, cost or read
    runs): its BLAS libraries load with a one-thread pool (`blas_one_thread`; the command then sets the count
    its config asks for, forge-search's `threads`) and the allocator keeps freed memory (`keep_freed_memory`)."""
    def main() -> None:
        if any(a in HELP_FLAGS for a in sys.argv[1:]):
            return _help_only(app)
        module, fn = target.split(":")
        if inference:
            keep_freed_memory()
        with blas_one_thread(inference):
            command = getattr(_command_module(app, module), fn)
        return command()

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
        from forge.shell.app import EXIT_USAGE, missing_train_extra

        if missing_train_extra(e) is None:
            raise
        print(f"{app}: error: {missing_train_extra(e)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    finally:
        gc.freeze()
        if collecting:  # as it was (a caller that paused it keeps it paused)
            gc.enable()


@contextmanager
def blas_one_thread(on: bool = True) -> Iterator[None]:
    """While inside, an OpenBLAS that loads starts a pool of one thread, unless the user set its size.

    Each OpenBLAS (numpy's, scipy's) otherwise starts one thread per core as it loads and its idle threads
    spin: 0.2 s CPU of forge-search's 2.2 s default job (issue 45), on batches too small to gain from a second
    thread. Threads can still be added later (threadpoolctl), so a config's thread count holds; the variable
    is taken out again on leaving, so child processes see the user's environment."""
    if not on or any(v in os.environ for v in BLAS_ENV):
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    BLAS_STARTED_ONE[:] = [True]
    try:
        yield
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


def keep_freed_memory(trim_mib: int = 64, mmap_mib: int = 32) -> bool:
    """glibc's malloc keeps up to `trim_mib` of freed memory and serves blocks up to `mmap_mib` from its heap.

    By default every numpy array over 128 KiB is a fresh mmap and the heap's top is returned to the system as
    soon as it is free, so the encoder's per-batch arrays fault their pages in again on every generation: 0.14 s
    CPU (7 %) of forge-search's default job, mostly system time, with the same peak RSS (issue 45). A short
    command may keep them. Elsewhere (not glibc) nothing changes; returns whether the settings were taken."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # glibc; another libc (musl) has none: AttributeError
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
    return bool(mallopt(M_TRIM_THRESHOLD, trim_mib << 20)) & bool(mallopt(M_MMAP_THRESHOLD, mmap_mib << 20))


def blas_threads_default() -> int | None:
    """The BLAS thread count to restore where a config leaves threads unset (null): one per usable core, what
    OpenBLAS starts with, when `blas_one_thread` started it at one; None (leave it) otherwise."""
    if not BLAS_STARTED_ONE:
        return None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


forge_arch = entry("forge-arch", "forge.cli:arch_main", inference=True)
forge_space = entry("forge-space", "forge.cli:space_main", inference=True)
forge_label = entry("forge-label", "forge.labelling.cli:main")
