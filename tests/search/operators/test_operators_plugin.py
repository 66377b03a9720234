"""Issue 55 §2: the search's operators are plug-ins chosen by `_target_`, recorded in the run, and a resume whose
recorded operator code is missing or differs is refused (nothing rewritten)."""
from __future__ import annotations

import json
import sys

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from forge import plugins
from search.cli import run
from search.errors import ResumeError, SearchConfigError
from search.operators_plugin import OperatorSpec, build_operator
from search.settings import SearchSettings, settle_config
from tests.search.conftest import tiny_cfg

SWAP = '''"""A user's mutation: swap two layer slots of every genome (15 lines, outside Forge)."""
import numpy as np
from pymoo.core.mutation import Mutation

CALLS = []


class SwapMutation(Mutation):
    def __init__(self, space, prob=1.0):
        super().__init__(prob=prob)
        self.space = space

    def _do(self, problem, X, *args, random_state=None, **kwargs):
        sp, Y = self.space, np.array(X, dtype=np.int64)
        L = Y[:, :sp.n_layer_var].reshape(len(Y), sp.L_max, sp.n_genes)
        i, j, r = *random_state.integers(0, sp.L_max, size=(2, len(Y))), np.arange(len(Y))
        L[r, i], L[r, j] = L[r, j].copy(), L[r, i].copy()
        Y[:, :sp.n_layer_var] = L.reshape(len(Y), -1)
        CALLS.append(len(Y))
        return sp.repair_x(Y)
'''


def _cfg(*overrides: str, mutation=None):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["space=iha-tiny", "search.pop_size=6", "search.offspring=8",
                                                 "search.generations=3", "progress=false", *overrides])
    OmegaConf.set_struct(cfg, False)
    cfg.backend = {"_target_": "tests.search.fakes.FakeBackend"}
    cfg.evaluator.predictor = {"_target_": "tests.search.fakes.FakePredictor"}
    if mutation is not None:
        cfg.search.mutation = mutation
    return cfg


@pytest.fixture
def swapops(tmp_path, monkeypatch):
    """The user's module `swapops` on sys.path, forgotten again after the test."""
    (tmp_path / "swapops.py").write_text(SWAP)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "swapops.py"
    sys.modules.pop("swapops", None)
    plugins._modules[:] = [m for m in plugins._modules if m != "swapops"]


def test_a_user_mutation_is_recorded_and_a_resume_without_it_is_refused(tmp_path, swapops, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    node = {"_target_": "swapops.SwapMutation", "prob": 1.0}
    s = run(_cfg("plugins.modules=[swapops]", f"out_dir={run_dir}", "stop_after=1", mutation=node))
    assert s["status"] == "stopped" and sum(sys.modules["swapops"].CALLS) > 0  # the user's code did mutate
    assert "swapops" in json.loads((run_dir / "plugins.json").read_text())["code"]
    assert "continue with: forge-search resume=" in (err := capsys.readouterr().err) and "plugins.modules=[swapops" in err
    ck = json.loads((run_dir / "state" / "checkpoint.json").read_text())
    assert ck["operators"]["mutation"]["_target_"] == "swapops.SwapMutation"
    assert len(ck["operators"]["mutation"]["sha256"]) == 64 and set(ck["operators"]) == {"mutation"}
    before = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}

    monkeypatch.setattr(plugins, "_modules", [])  # a new process: only what this command names is imported
    with pytest.raises(SearchConfigError, match=r"search.mutation: 'swapops.SwapMutation' is not an allowed operator"):
        run(_cfg(f"resume={run_dir}"), given=[f"resume={run_dir}"])  # as `forge-search resume=DIR` alone
    monkeypatch.undo()
    swapops.write_text(SWAP.replace("CALLS = []", "CALLS = []  # edited after the run"))
    with pytest.raises(ResumeError, match=r"search.mutation operator differs \(swapops.SwapMutation's source changed"):
        run(_cfg(f"resume={run_dir}", "plugins.modules=[swapops]"), given=[f"resume={run_dir}"])
    assert {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before  # refused: nothing touched
    swapops.write_text(SWAP)
    done = run(_cfg(f"resume={run_dir}", "plugins.modules=[swapops]"), given=[f"resume={run_dir}"])
    assert done["status"] == "complete" and done["generations_done"] == 3


def test_operators_by_name_legacy_forms_and_bad_input():
    """A name from conf/search/<kind>/, the forms saved runs hold (a number for the crossover, a mapping without
    `_target_` for the mutation: the paper's operators), and one line for what is wrong."""
    s = SearchSettings.of(settle_config(tiny_cfg(search={"crossover": "sbx", "mutation": "mixed"}))["search"])
    assert (s.crossover.target, s.mutation.target) == ("search.operators_mix.sbx", "search.operators_mix.MixedMutation")
    s = SearchSettings.of(settle_config(tiny_cfg(search={"crossover": 0.7, "mutation": {"p_gene": 0.2}}))["search"])
    assert s.crossover == OperatorSpec("search.operators.LayerCrossover", {"prob": 0.7})
    assert s.mutation.target == "search.operators.LayerMutation" and s.mutation.options["p_gene"] == 0.2
    assert s.repair == OperatorSpec("search.operators.SpaceRepair", {})
    for search, says in (({"mutation": "nope"}, r"search.mutation = 'nope' is unknown; allowed: llmforge \| mixed \| pm"),
                         ({"crossover": 1.5}, r"^search.crossover=1.5 is out of range"),
                         ({"mutation": "mixed", "crossover": {"_target_": "search.operators_mix.sbx", "prob": -1}},
                          r"^search.crossover.prob=-1 is out of range")):
        with pytest.raises(SearchConfigError, match=says):
            settle_config(tiny_cfg(search=search))
    with pytest.raises(SearchConfigError, match=r"search.mutation: colour is not an option of search.operators_mix.pm"):
        build_operator("mutation", OperatorSpec("search.operators_mix.pm", {"colour": 1}), None)
    with pytest.raises(SearchConfigError, match=r"made a SpaceRepair, not a pymoo Mutation"):
        build_operator("mutation", OperatorSpec("search.operators.SpaceRepair", {}), None)


def test_a_saved_config_naming_the_shipped_operators_passes_the_plug_in_check():
    """`forge-verify run=` checks every `_target_` of the run's saved config (plugins.check_all) before it builds
    anything: the default's operators are Forge's own, a stranger's is refused."""
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        saved = OmegaConf.to_container(compose("forge-search", overrides=["search.mutation=mixed"]))
    plugins.trust({})  # the live config of another command: names nothing
    plugins.check_all({"search": saved["search"]})
    saved["search"]["mutation"] = {"_target_": "subprocess.Popen"}
    with pytest.raises(plugins.PluginError, match="'subprocess.Popen' is not an allowed search plug-in"):
        plugins.check_all({"search": saved["search"]})
