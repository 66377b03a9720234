"""One plug-in mechanism for every command: `plugins.modules` and the `forge.plugins` entry-point group import a
user's modules first; a run records them, and a later command on it imports them only when its own config (or an
installed entry point) names them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forge import plugins
from search.api_compose import compose
from forge.runtime.config import group_yaml
from forge.genomes.genes import LAYER_GENES
from forge.genomes.genome import GenomeError
from tests.ext import forget

ROOT = Path(__file__).resolve().parents[2]
EXT = {"modules": ["tests.ext.genes"]}
FAKES = {"backend": {"_target_": "tests.search.fakes.FakeBackend"},
         "evaluator": {"predictor": {"_target_": "tests.search.fakes.FakePredictor"}}}
SMALL = {"search": {"pop_size": 6, "offspring": 8, "generations": 2}}


@pytest.fixture(autouse=True)
def clean(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run() called directly writes summary.json into the working folder
    forget()
    yield
    forget()


def _glu_genome(path: Path) -> Path:
    layer = {"n_h": 2, "n_kv": 1, "d_qk": 16, "d_v": 16, "d_mlp": 256}
    path.write_text(json.dumps({"d_model": 128, "block_size": 256, "vocab_size": 256,
                                "layers": [{**layer, "glu": 1}, layer]}))
    return path


def test_forge_arch_sees_a_gene_only_from_a_named_module(tmp_path):
    from forge.cli import run_arch

    arch = str(_glu_genome(tmp_path / "g.json"))
    with pytest.raises(GenomeError, match=r"glu"):
        run_arch(compose("forge-arch", arch=arch, quiet=True))
    s = run_arch(compose("forge-arch", arch=arch, quiet=True, plugins=EXT))
    assert s["layers"][0]["glu"] == 1 and "glu" in LAYER_GENES and plugins.used() == ["tests.ext.genes"]


def test_an_installed_entry_point_is_imported_by_every_command(tmp_path, monkeypatch):
    import importlib.metadata as md

    from forge.cli import run_arch

    ep = md.EntryPoint(name="ext", value="tests.ext.genes", group=plugins.ENTRY_GROUP)
    monkeypatch.setattr(md, "entry_points", lambda group=None: [ep] if group == plugins.ENTRY_GROUP else [])
    s = run_arch(compose("forge-arch", arch=str(_glu_genome(tmp_path / "g.json")), quiet=True))
    assert s["layers"][0]["glu"] == 1


def test_a_missing_module_is_one_line(tmp_path):
    from forge.cli import run_arch

    with pytest.raises(plugins.PluginError, match=r"'no_such_pkg.genes' cannot be imported.*allowed"):
        run_arch(compose("forge-arch", quiet=True, plugins={"modules": ["no_such_pkg.genes"]}))


def test_forge_space_honours_a_user_space_class_on_the_command_line(tmp_path):
    """`forge-space` builds a user's space class named in the command (it never called plugins.trust)."""
    user = "tests.forge.plugins.user_space.MinDepthSpace"
    from forge.cli import run_space

    node = {**group_yaml("space", "iha-tiny"), "_target_": user, "min_active": 3}
    s = run_space(compose("forge-space", space=node, quiet=True))
    assert s["name"] == "iha-tiny"
    proc = subprocess.run([sys.executable, "-c", "from forge.cli import space_main; space_main()", "space=iha-tiny",
                           f"space._target_={user}", f"+plugins.space=[{user}]", "+space.min_active=2", "quiet=true",
                           f"hydra.run.dir={tmp_path / 'cli'}"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def _search(tmp_path: Path) -> Path:
    import forge

    space = {**group_yaml("space", "iha-tiny"), "name": "iha-tiny-glu", "glu": [0, 1]}
    res = forge.search(space=space, objectives=["val_loss", "ttft_ms", "params"], out_dir=tmp_path / "run",
                       plugins=EXT, **FAKES, **SMALL)
    return res.run_dir


def test_a_run_records_its_modules_and_later_commands_import_them_only_when_named(tmp_path):
    from search.cli import run as search_run
    from search.export import run as export_run
    from search.report import run as report_run

    run_dir = _search(tmp_path)
    assert json.loads((run_dir / plugins.RECORD).read_text()) == {"modules": ["tests.ext.genes"],
                                                                  "code": ["tests.search.fakes"]}  # its classes
    genomes = [json.loads(line)["genome"] for line in (run_dir / "archive.jsonl").read_text().splitlines()]
    assert any(lay.get("glu") for g in genomes for lay in g["layers"])  # the search moved the user's gene
    forget()  # a fresh process: nothing of the extension is imported
    refused = r"made with plug-in modules tests.ext.genes.*plugins.modules=\[tests.ext.genes\]"
    with pytest.raises(plugins.PluginError, match=refused):
        export_run(compose("forge-export", run=str(run_dir), format="yaml", out=str(tmp_path / "x")))
    with pytest.raises(plugins.PluginError, match=refused):
        report_run(compose("forge-report", runs=[str(run_dir)], out=str(tmp_path / "r")))
    with pytest.raises(plugins.PluginError, match=r"tests.ext.genes.*plugins.modules=\[tests.ext.genes,tests.search.fakes\]"):
        search_run(compose("forge-search", resume=str(run_dir), **FAKES))  # a resume rebuilds its classes too
    assert "glu" not in LAYER_GENES and "tests.ext.genes" not in sys.modules  # the folder imported nothing
    out = export_run(compose("forge-export", run=str(run_dir), format="yaml", out=str(tmp_path / "x"), plugins=EXT))
    assert out
    assert report_run(compose("forge-report", runs=[str(run_dir)], out=str(tmp_path / "r"), plugins=EXT))


def test_a_class_in_a_named_module_is_allowed_and_a_run_folder_cannot_name_one(tmp_path):
    """A module the live config names is the user's code, every class in it included; nothing a folder holds
    makes a module trusted (plugins.json is never imported from)."""
    path = "tests.ext.surrogates.ForestSurrogate"
    with pytest.raises(plugins.PluginError, match="not an allowed surrogate plug-in"):
        plugins.trust({})
        plugins.check("surrogate", path)
    plugins.trust({"plugins": {"modules": ["tests.ext.surrogates"]}})
    assert plugins.check("surrogate", path) == path
    assert plugins.resolve("surrogate", path).__name__ == "ForestSurrogate"


def test_a_search_stopped_by_a_plugin_error_leaves_no_run_folder_behind(tmp_path):
    """Issue 55 §7: the user's objective raises in the first generation: one line naming its module, exit 1, and
    the run folder it left with no work in it (only cli.log and Hydra's files) is taken back, as for a refusal."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "badobj.py").write_text("def bad(genomes):\n    raise ValueError('boom')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    proc = subprocess.run([sys.executable, "-c", "from search.entry import forge_search; forge_search()",
                           "space=iha-tiny", "evaluator.predictor=forgeformer-iha-tiny", "progress=false",
                           "objectives=[val_loss,{name:b,fn:badobj.bad}]", "search.pop_size=6", "search.offspring=6",
                           "search.generations=1", "hydra.run.dir=run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "error in plug-in module badobj" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "run").exists()


def test_every_shipped_operator_a_saved_run_names_is_allowed_as_data():
    """A saved run's `search.crossover/mutation/repair` name Forge's own operators (conf/search/): forge-verify's
    check of the saved config (plugins.check_all) allows each of them, and still refuses a foreign one."""
    import pytest
    import yaml

    from forge import plugins
    from forge.runtime.config import conf_dir

    for path in sorted((conf_dir() / "search").rglob("*.yaml")):
        node = yaml.safe_load(path.read_text()) or {}
        plugins.check_all({"search": node if "_target_" not in node else {"crossover": node}})
    with pytest.raises(plugins.PluginError, match="os.system"):
        plugins.check_all({"search": {"crossover": {"_target_": "os.system"}}})
