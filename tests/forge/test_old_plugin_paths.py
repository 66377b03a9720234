"""A plug-in package written before issue 46 regrouped forge/ keeps working for a deprecation period (forge.moved):
installed with a `forge.plugins` entry point (tests/ext/old_installed, a site folder put on PYTHONPATH), every
command runs and warns once per old path, naming the new one; an installed package that fails to import stops no
command that does not use it, and is named (entry point, distribution) by one that does."""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from forge import moved, plugins
from tests.ext import forget

ROOT = Path(__file__).resolve().parents[2]
FAKES = "tests.search.fakes"
OLD = {"forge.genes": "forge.genomes.genes", "forge.genome": "forge.genomes.genome"}  # what forge_ext_old imports


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished search of Forge's own parts (the installed package is not on this process's path)."""
    import forge

    work = tmp_path_factory.mktemp("old")
    forge.search(out_dir=work / "run", space="iha-tiny", backend="roofline", objectives=["val_loss", "ttft_ms"],
                 evaluator={"predictor": {"_target_": f"{FAKES}.FakePredictor"}}, constraints=[],
                 search={"pop_size": 6, "offspring": 6, "generations": 1})
    site = work / "site"
    shutil.copytree(ROOT / "tests" / "ext" / "old_installed", site)
    forget()
    return work, site


COMMANDS = {  # the cheapest real work of each console script
    "forge-arch": ["arch=gpt2"], "forge-space": ["space=iha-tiny"], "forge-hw": ["arch=gpt2"],
    "forge-serve": ["afd", "arch=gpt2", "serve.afd.ratios=[1]"], "forge-label": ["status", "store=labels.db"],
    "forge-search": ["space=iha-tiny", f"evaluator.predictor={{_target_:{FAKES}.FakePredictor}}", "constraints=[]",
                     "objectives=[val_loss,params]", "search.pop_size=4", "search.offspring=4",
                     "search.generations=1", "progress=false", "hydra.run.dir=again"],
    "forge-report": ["runs=[run]", "out=report"], "forge-export": ["run=run", "format=yaml", "out=exported"],
    "forge-verify": ["run=run", "k=1", "control=0", f"trainer={{_target_:{FAKES}.FakeTrainer}}", "measure=none",
                     f"plugins.modules=[{FAKES}]", "out=verify"],
    "forge-surrogate": ["mode=train", "surrogate=rf", "surrogate.n_estimators=10", f"data={ROOT / 'data' / 'labels' / 'iha-tiny-cpu-proxy.jsonl'}",
                        "space=iha-tiny", "hydra.run.dir=surrogate"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_runs_with_an_old_plugin_installed_warning_once_per_old_path(made, command):
    work, site = made
    if command == "forge-label":
        import sqlite3

        sqlite3.connect(work / "labels.db").close()  # an empty store: status reads it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-c", "import sys; from importlib.metadata import entry_points as e; "
                           "name = sys.argv.pop(1); sys.argv[0] = name; "
                           "e(group='console_scripts', name=name)[name].load()()", command, *COMMANDS[command]],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}"
    out = proc.stdout + proc.stderr
    for old, new in OLD.items():
        said = [ln for ln in out.splitlines() if "ForgeDeprecationWarning" in ln and f" {old} moved" in ln]
        assert len(said) == 1 and said[0].startswith(str(site / "forge_ext_old" / "__init__.py")), out[-2000:]
        assert f"{old} moved to {new}: import {new} (the old path works until Forge {moved.REMOVED_IN})" in said[0]


def test_an_old_path_is_the_new_module_itself_and_warns_once_naming_the_importer(tmp_path, monkeypatch):
    (tmp_path / "oldstyle.py").write_text("from forge.space import SearchSpace\nimport forge.workload as w\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("forge.space", "forge.workload", "oldstyle"):
        sys.modules.pop(name, None)
    monkeypatch.setattr(moved, "_warned", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mod = importlib.import_module("oldstyle")
        importlib.import_module("forge.space")  # again: no second warning
    import forge.lm.workload
    import forge.spaces.space

    assert mod.SearchSpace is forge.spaces.space.SearchSpace and mod.w is forge.lm.workload
    assert forge.spaces.space.__spec__.name == "forge.spaces.space"  # the real module keeps its own spec
    assert [(w.category, Path(w.filename).name, w.lineno) for w in seen] == [
        (moved.ForgeDeprecationWarning, "oldstyle.py", 1), (moved.ForgeDeprecationWarning, "oldstyle.py", 2)]
    assert "forge.space moved to forge.spaces.space: import forge.spaces.space" in str(seen[0].message)
    assert issubclass(moved.ForgeDeprecationWarning, FutureWarning)  # shown by default, unlike DeprecationWarning
    assert {moved.new_path(f"forge.{m}") for m in moved.MOVED} == {f"forge.{p}.{m}" for m, p in moved.MOVED.items()}


def test_an_installed_plugin_that_fails_to_import_is_skipped_naming_its_entry_point_and_distribution(tmp_path):
    from forge.shell import plugin_use
    from search.api_compose import compose

    site = tmp_path / "site"
    shutil.copytree(ROOT / "tests" / "ext" / "old_installed", site)
    (site / "forge_ext_old" / "__init__.py").write_text("from forge.gone_for_good import Gene\n")
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        with pytest.warns(plugins.InstalledPluginWarning, match=r"^installed plug-in 'forge_ext_old' \(entry point "
                          r"'old' of 'forge.plugins', from forge-ext-old 0.1\) cannot be imported \(ModuleNotFoundError"
                          r": .*forge.gone_for_good.*\): skipped; fix it or `pip uninstall forge-ext-old`"):
            plugins.trust(compose("forge-space"))  # the command goes on
        run = tmp_path / "run"
        run.mkdir()
        (run / plugins.RECORD).write_text('{"modules": ["forge_ext_old"]}')
        with pytest.raises(plugins.PluginError, match=r"made with plug-in modules forge_ext_old, and the installed "
                                                      r"plug-in 'forge_ext_old' \(entry point 'old'.*cannot be imported"):
            plugin_use.require(run)
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("forge_ext_old", None)
        plugins._broken.pop("forge_ext_old", None)
