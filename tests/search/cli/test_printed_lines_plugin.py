"""Issue 55 §6: every line a plug-in run prints runs when pasted. The run: a space YAML in the user's config folder
(hydra.searchpath) that varies a plug-in gene (plugins.modules), priced by the user's own predictor; its `next:`
and CPU-recipe lines (and `continue with:`, pasted by tests/forge/shell/test_plugin_use.py) carry the searchpath, the
modules, the space and the predictor (search.carried), never the shipped tiny predictor in place of the user's."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml

from forge.runtime.config import group_yaml
from tests.test_extension import _cli

PRED = "tests.search.fakes.FakePredictor"
FAKE_TRAINING = ["trainer={_target_:tests.search.fakes.FakeTrainer}", "measure=none"]  # real training takes minutes


def _lines(out: str, title: str) -> list[str]:
    block = out.split(f"\n{title}:\n", 1)[1]
    return [ln.strip() for ln in block.splitlines() if ln.startswith("  ")]


def test_every_line_a_plugin_run_prints_runs_when_pasted(tmp_path):
    conf = tmp_path / "conf" / "space"
    conf.mkdir(parents=True)
    (conf / "iha-tiny-glu.yaml").write_text(yaml.safe_dump({**group_yaml("space", "iha-tiny"), "name": "iha-tiny-glu",
                                                            "glu": [0, 1]}))
    out = _cli(tmp_path, "forge-search", f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "space=iha-tiny-glu",
               "plugins.modules=[tests.ext.genes]", f"evaluator.predictor={{_target_:{PRED}}}", "constraints=[]",
               "search.pop_size=6", "search.offspring=6", "search.generations=2", "progress=false",
               "hydra.run.dir=run")  # its `continue with:` line: tests/forge/shell/test_plugin_use.py pastes one
    lines = [ln for ln in _lines(out, "next") if not ln.startswith("#")]
    report, export, recipe, verify = lines
    assert "plugins.modules=[tests.ext.genes]" in export and "space=iha-tiny-glu" in recipe
    assert f"evaluator.predictor={{_target_:{PRED}}}" in recipe and "forgeformer" not in recipe
    for line in (report, export, recipe):
        _cli(tmp_path, *shlex.split(line))
    _cli(tmp_path, *shlex.split(verify), *FAKE_TRAINING)
    tiny = [json.loads(ln)["genome"] for ln in (tmp_path / "runs" / "tiny" / "archive.jsonl").read_text().splitlines()]
    assert {lay.get("glu", 0) for g in tiny for lay in g["layers"]} == {0, 1}  # the recipe searched the user's space


def test_the_decide_line_carries_what_the_run_needs(tmp_path):
    from search.odds import decide_lines
    from surrogate.pairwise import PairwiseOdds

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"searchpath": ["file://my conf"]}}))
    (run / "plugins.json").write_text(json.dumps({"modules": ["mypkg.genes"], "code": ["mypkg.pred"]}))
    rows = [{"id": "a", "metrics": {"mu": 2.0}}, {"id": "b", "metrics": {"mu": 2.1}}]
    line = decide_lines(run, rows, PairwiseOdds((0.0, 1.0), (0.5, 0.9)), {"name": "cpu-proxy"})[-1]
    assert shlex.split(line)[2:4] == ["hydra.searchpath=[file://my conf]", "plugins.modules=[mypkg.genes,mypkg.pred]"]
    assert Path(shlex.split(line)[1].split("=", 1)[1]).name == "run"
