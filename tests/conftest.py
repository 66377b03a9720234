"""Shared fixtures. Tests that need ../shared/data find it through `shared_data` (FORGE_SHARED_DATA),
which skips locally when it is absent but fails loudly when CI=true."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from forge.disk.io import shared_data_dir


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not (d / "llmforge_iha_200M.csv").is_file():
        msg = f"shared data not found at {d} (set FORGE_SHARED_DATA to the folder holding llmforge_iha_200M.csv)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return d


@pytest.fixture(scope="session")
def shared_csv(shared_data: Path) -> Path:
    return shared_data / "llmforge_iha_200M.csv"


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` starts one worker more than this process may use cores: tests also wait (a browser's clicks, Ray and
    chromium starting, a killed run's grace period), and the extra worker runs a test in those waits. At two workers
    the pytest tree's counted CPU filled about four fifths of the core-seconds; how much of the rest was waiting is
    not measured apart (Ray's daemons are not counted; bench/RESULTS.md, issue 56: CI budget).
    PYTEST_XDIST_AUTO_NUM_WORKERS still wins."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist reads it
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow docs blocks (tens of seconds each) go first: pytest-xdist hands tests out in this order, so the
    long ones start on both workers at once and the many short tests fill the gaps, instead of one long block
    running alone at the end."""
    items.sort(key=lambda it: not (it.get_closest_marker("docs") and it.get_closest_marker("slow")))


@pytest.fixture(autouse=True)
def _the_example_extension_is_unloaded():
    """A test that loads the example extension (tests/ext: the genes glu and mlp_off and their hooks) and does not
    forget it leaves it loaded for the next test in that worker, whose refusals then differ (forge-arch accepted a
    glu layer it must refuse): each test ends with it unloaded."""
    yield
    from forge.genomes.genes import LAYER_GENES

    if any(m.startswith("tests.ext.") for m in sys.modules) or any(g in LAYER_GENES for g in ("glu", "mlp_off")):
        from tests.ext import forget

        forget()


@pytest.fixture(autouse=True)
def _logging_handlers_are_restored():
    """An in-process Hydra run configures logging (a file handler on cli.log, a stream handler on the
    stderr pytest captured for that test); left attached, a later test's log line would hit a closed stream.
    Each test leaves the loggers' handlers as it found them."""
    import logging

    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    before = {id(lg): list(lg.handlers) for lg in loggers}
    yield
    for lg in [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]:
        keep = before.get(id(lg), [])
        for h in list(lg.handlers):
            if h not in keep and not type(h).__module__.startswith("_pytest"):  # pytest removes its own
                lg.removeHandler(h)
                try:
                    h.close()
                except Exception:  # noqa: BLE001 - a handler whose stream is already gone
                    pass


ROOT = Path(__file__).resolve().parents[1]
# What a test run may add to the checkout's top level (pytest's and hypothesis' caches, the docs build).
_ROOT_ALLOWED = {".pytest_cache", ".hypothesis", "__pycache__", "site"}
_ROOT_KEY = pytest.StashKey[set]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_ROOT_KEY] = {p.name for p in ROOT.iterdir()}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test writes under its tmp_path, never into the checkout: a file left at the top level (a command's
    summary.json from a run() called without out_dir) fails the session, naming it."""
    if hasattr(session.config, "workerinput") or _ROOT_KEY not in session.config.stash:
        return  # an xdist worker: the controller checks once for all
    new = sorted({p.name for p in ROOT.iterdir()} - session.config.stash[_ROOT_KEY] - _ROOT_ALLOWED)
    if new:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"the tests left {', '.join(new)} in {ROOT}: a test must write under its tmp_path", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

