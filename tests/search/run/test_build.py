"""The search is built in one place (issue 36 §4): `search.build.build_search` settles the config once and hands
`Search` its parts ready; the walk of `cfg` from `forge-search` stays short (bench/cfg_walk.py measures it)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from backends.interface import Workload
from search.build import build_search
from search.cli import run
from search.errors import SearchConfigError
from search.evaluators import LossEvaluator
from search.operators_plugin import OperatorSpec
from search.settings import SearchSettings, section, settle_config
from search.state import read_jsonl
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeBackend, FakePredictor

ROOT = Path(__file__).resolve().parents[3]


def _parts(space, **over):
    return {"space": space, "evaluator": LossEvaluator(FakePredictor()), "backend": FakeBackend(),
            "workload": Workload(), **over}


def test_the_walk_of_cfg_from_forge_search_is_short():
    """Targets of issue 36 §4 on the default job (the numbers are in bench/RESULTS.md): at most 35 functions
    reached by the config, no package returned to more than 3 times, no file more than 3 times."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from cfg_walk import measure
    finally:
        sys.path.remove(str(ROOT / "bench"))
    out = measure(["search.generations=1"])
    assert out["stops"] <= 35, out["walk"]
    assert max(out["returns_per_package"].values(), default=0) <= 3, out["returns_per_package"]
    assert max(out["returns_per_file"].values(), default=0) <= 3, out["returns_per_file"]
    assert sum(out["returns_per_file"].values()) < 12, out["returns_per_file"]  # 12 before the redesign
    walk = out["walk"]  # one builder, one settling of the search section
    assert "search/build.py:build_search" in walk and "search/settings.py:settle_config" in walk
    assert [s for s in walk if s.endswith(":section")] == ["search/settings.py:section"]


def test_a_built_search_runs_and_is_deterministic(tiny_space, tmp_path):
    outs = []
    for name in ("a", "b"):
        s = build_search(tiny_cfg(), tmp_path / name, _parts(tiny_space))
        outs.append((s.run(), [r["id"] for r in read_jsonl(tmp_path / name / "pareto.jsonl")]))
    (a, front_a), (b, front_b) = outs
    assert a["status"] == "complete" and a["generations_done"] == 4 and a["evaluations"] == 8 + 4 * 12
    assert front_a == front_b and front_a and a["hypervolume"] == pytest.approx(b["hypervolume"], rel=1e-6)
    assert a["algorithm"] == "nsga" and a["hv_anchor"]["ref"] == 2.0


def test_injected_parts_are_the_ones_used(tiny_space, tmp_path):
    backend, ev = FakeBackend(), LossEvaluator(FakePredictor())
    wl = Workload(prefill=32, decode=16)
    s = build_search(tiny_cfg(), tmp_path / "run", _parts(tiny_space, backend=backend, evaluator=ev, workload=wl,
                                                          coevolution=None))
    assert s.problem.backend is backend and s.problem.evaluator is ev and s.problem.workload is wl
    assert s.space is tiny_space and s.algo.space is tiny_space and s.coevo is None
    assert s.G == 4 and s.plan.generations == 4 and s.cfg == tiny_cfg()  # the config as given is what it saves
    with pytest.raises(TypeError, match="unknown parts"):
        build_search(tiny_cfg(), tmp_path / "x", {"spaec": tiny_space})


def test_building_writes_nothing(tiny_space, tmp_path):
    build_search(tiny_cfg(), tmp_path / "run", _parts(tiny_space))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("search,says", [
    ({"pop_size": 0}, "search.pop_size=0 is out of range; allowed: an integer >= 1"),
    ({"mutation": {"p_gene": 2}}, "search.mutation.p_gene=2 is out of range; allowed: a probability in [0, 1]"),
    ({"algorithm": "cmaes"}, "search.algorithm = 'cmaes' is unknown; allowed: nsga | random"),
    ({"mutation": {"p_swap": 0.1}}, "search.mutation keys ['max_step', 'p_delete', 'p_duplicate', 'p_gene', "
                                    "'p_rotate', 'p_swap'] are invalid; allowed: rate, p_delete"),
])
def test_a_bad_setting_is_refused_in_one_line_before_any_file_is_written(tiny_space, tmp_path, search, says):
    cfg = tiny_cfg(search=search, out_dir=str(tmp_path / "run"))
    with pytest.raises(SearchConfigError) as e:
        run(cfg, _parts(tiny_space))
    assert str(e.value).startswith(says) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()
    with pytest.raises(SearchConfigError, match="out of range|unknown|invalid"):
        build_search(cfg, tmp_path / "run", _parts(tiny_space))
    assert not (tmp_path / "run").exists()


def test_settle_fills_the_recipe_defaults_once():
    """A hand-made section gets conf/search/nsga.yaml's values; the config itself is left as given."""
    cfg = tiny_cfg(search={"mutation": {"rate": 0.5}})
    c = settle_config(cfg)
    s = c["search"]
    assert s["mutation"]["rate"] == 0.5 and s["mutation"]["p_gene"] == section("search", {})["mutation"]["p_gene"]
    assert s["coevolve"]["every"] == 0 and s["crossover"] == section("search", None)["crossover"]
    assert (s["pop_size"], s["offspring"], s["generations"]) == (8, 12, 4)
    assert cfg == tiny_cfg(search={"mutation": {"rate": 0.5}}) and settle_config(c) == c
    for key, bad in (("seed", -1), ("threads", 0), ("stop_after", -2)):
        with pytest.raises(Exception, match=f"^{key}={bad} is out of range"):
            settle_config({**cfg, key: bad})
    with pytest.raises(SearchConfigError, match=r"^hv.ref=0 is out of range; allowed: a number > 0"):
        settle_config({**cfg, "hv": {"ref": 0}})



def test_the_settled_search_section_is_handed_on_typed_and_frozen():
    """`SearchSettings.of` reads the settled section once: numbers as their types, each operator as its typed spec
    (a number for the crossover, the form saved runs hold, is the layer crossover's probability); the dict the run
    saves is left as it was."""
    import dataclasses

    c = settle_config(tiny_cfg(search={"crossover": 1, "mutation": {"rate": 0.5, "p_gene": 0.25}}))
    saved = dict(c["search"])
    s = SearchSettings.of(c["search"])
    assert (s.pop_size, s.offspring, s.generations, s.algorithm) == (8, 12, 4, "nsga")
    assert s.crossover == OperatorSpec("search.operators.LayerCrossover", {"prob": 1})
    assert s.mutation.target == "search.operators.LayerMutation" and s.mutation.options["rate"] == 0.5
    assert s.mutation.options["p_gene"] == 0.25
    assert s.mutation.options["max_step"] == section("search", None)["mutation"]["max_step"]
    assert c["search"] == saved and "rate" in c["search"]["mutation"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.pop_size = 3  # type: ignore[misc]


def test_hooks_that_disagree_are_refused_before_any_cost_and_none_costs_a_model_build(tiny_space, tmp_path,
                                                                                       monkeypatch):
    """A model hook whose workload count is missing: the build refuses in one line (nothing written); with no hook,
    the check builds no model at all."""
    import torch.nn as nn

    import forge.lm.hooks
    import forge.lm.model
    import forge.lm.workload
    from forge.lm.hooks import HookError

    monkeypatch.setattr(forge.lm.hooks, "_HOOKS", [])  # hooks an earlier test in this process left: not this run's
    monkeypatch.setattr(forge.lm.workload, "OP_HOOKS", [])
    monkeypatch.setattr(forge.lm.model.Block, "hooks", [])
    built = []
    real = forge.lm.model.build_model
    monkeypatch.setattr(forge.lm.model, "build_model", lambda *a, **k: built.append(1) or real(*a, **k))
    build_search(tiny_cfg(), tmp_path / "plain", _parts(tiny_space))
    assert built == []

    def extra(block, cfg, gene):  # a parameter the workload never hears of
        block.extra = nn.Linear(2, 2)

    monkeypatch.setattr(forge.lm.model.Block, "hooks", [extra])
    with pytest.raises(HookError, match=r"parameters in the workload but [0-9,]+ in the model"):
        build_search(tiny_cfg(), tmp_path / "bad", _parts(tiny_space))
    assert built and not (tmp_path / "bad").exists()
