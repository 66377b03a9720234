"""A plug-in binds only the runs that use it (issue 43 §4): a package installed through a `forge.plugins` entry point
(tests/ext/installed, copied onto sys.path) is imported by every command but recorded in `plugins.json` only by a
run that uses its gene or its function, so uninstalling it leaves every other run readable; and the lines a
plug-in run prints (`continue with:`, `next:`) carry the modules it needs and work when pasted."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from forge import plugins
from forge.runtime.config import group_yaml
from search.api_compose import compose
from tests.ext import forget

ROOT = Path(__file__).resolve().parents[3]
PKG = "forge_ext_installed"
FAKES = {"backend": {"_target_": "tests.search.fakes.FakeBackend"},
         "evaluator": {"predictor": {"_target_": "tests.search.fakes.FakePredictor"}}}
SMALL = {"search": {"pop_size": 6, "offspring": 6, "generations": 2}}


def _uninstall(site: Path) -> None:
    """`pip uninstall`, for this process: the folder, its module and its gene are gone."""
    from forge.genomes.genes import unregister

    shutil.rmtree(site, ignore_errors=True)
    sys.path[:] = [p for p in sys.path if p != str(site)]
    sys.modules.pop(PKG, None)
    plugins._modules[:] = [m for m in plugins._modules if m != PKG]
    unregister("lowrank")


@pytest.fixture
def site(tmp_path):
    import importlib

    forget()
    site = tmp_path / "site"
    shutil.copytree(ROOT / "tests" / "ext" / "installed", site)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    yield site
    _uninstall(site)
    forget()


def _search(out: Path, **values):
    import forge

    return forge.search(out_dir=out, **{"objectives": ["val_loss", "ttft_ms", "params"], **FAKES, **SMALL, **values})


def test_an_installed_plugin_a_run_does_not_use_binds_it_to_nothing(tmp_path, site):
    from search.export import run as export_run
    from search.report import run as report_run

    run = _search(tmp_path / "plain", space="iha-tiny").run_dir
    assert PKG in plugins.used()  # the entry point was imported, as by every command
    rec = json.loads((run / plugins.RECORD).read_text())
    assert rec == {"code": ["tests.search.fakes"]}  # the run's own classes only: not the installed package
    _uninstall(site)
    assert export_run(compose("forge-export", run=str(run), format="yaml", out=str(tmp_path / "x")))["exported"]
    assert report_run(compose("forge-report", runs=[str(run)], out=str(tmp_path / "r")))["runs"] == 1


def test_a_run_that_uses_its_gene_or_function_records_it_and_names_it(tmp_path, site):
    from search.console import next_commands
    from search.export import run as export_run

    space = {**group_yaml("space", "iha-tiny"), "name": "iha-tiny-lowrank", "lowrank": [0, 1]}
    run = _search(tmp_path / "gene", space=space).run_dir
    assert json.loads((run / plugins.RECORD).read_text()) == {"modules": [PKG], "code": ["tests.search.fakes"]}
    nxt = next_commands(run)
    assert f"plugins.modules=[{PKG}]" in nxt[0] and f"plugins.modules=[{PKG}]" in nxt[1]  # report, export
    assert f"plugins.modules=[{PKG},tests.search.fakes]" in nxt[-1]  # verify rebuilds its classes too
    fn = _search(tmp_path / "fn", space="iha-tiny",
                 objectives=["val_loss", "params", {"name": "depth", "fn": f"{PKG}.active_layers"}]).run_dir
    assert json.loads((fn / plugins.RECORD).read_text()) == {"code": [PKG, "tests.search.fakes"]}
    _uninstall(site)
    with pytest.raises(plugins.PluginError, match=rf"^\S+ was made with plug-in modules {PKG}, .*allowed: name them"):
        export_run(compose("forge-export", run=str(run), format="yaml", out=str(tmp_path / "x")))


def test_the_lines_a_user_space_run_prints_work_when_pasted(tmp_path):
    """A space class named only by a YAML in the user's config folder (hydra.searchpath): the run records its
    module, and `continue with:` and `next:` carry it."""
    from tests.test_extension import _cli

    conf = tmp_path / "conf" / "space"
    conf.mkdir(parents=True)
    node = {**group_yaml("space", "iha-tiny"), "_target_": "tests.forge.plugins.user_space.MinDepthSpace",
            "name": "mine", "min_active": 2}
    (conf / "mine.yaml").write_text(json.dumps(node))
    out = _cli(tmp_path, "forge-search", f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "space=mine",
               "evaluator.predictor=forgeformer-iha-tiny", "search.pop_size=6", "search.offspring=6",
               "search.generations=2", "stop_after=1", "progress=false", "hydra.run.dir=run")
    line = re.search(r"continue with: (forge-search .*)$", out, re.M).group(1)
    assert line == (f"forge-search resume=run 'hydra.searchpath=[file://{tmp_path / 'conf'}]' "  # its folder (issue 55)
                    "plugins.modules=[tests.forge.plugins.user_space]")
    out = _cli(tmp_path, *shlex.split(line))
    export = next(c.strip() for c in out.splitlines() if c.strip().startswith("forge-export "))
    _cli(tmp_path, *shlex.split(export))
    assert any((tmp_path / "exported").iterdir())


def test_a_module_whose_hook_comes_with_no_gene_binds_every_run_and_a_gene_module_only_its_users(monkeypatch):
    """A hook without a gene changes every model, so every run records its module; a gene's module (its hooks
    included) is recorded only by a run whose space names the gene."""
    from forge.lm import model
    from forge.shell import plugin_use
    from tests.ext import genes  # noqa: F401  (glu, with its two hooks)

    def everywhere(block, cfg, gene):
        return None

    monkeypatch.setattr(everywhere, "__module__", "somepkg.hooks")
    monkeypatch.setattr(model.Block, "hooks", [*model.Block.hooks, everywhere])
    assert plugin_use.used(set(), [])["modules"] == ["somepkg.hooks"]
    assert plugin_use.used({"glu"}, [])["modules"] == ["tests.ext.genes", "somepkg.hooks"]
