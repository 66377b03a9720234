"""Issue 43 §5: every checkpoint declares the genes and value ranges it covers; one check refuses (or, opted in,
marks blind) any value outside them wherever a predictor prices genomes; `auto` never passes over a checkpoint
silently; the resolved predictor is named in summary.json, the console, the report, the card and verify."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from forge.runtime.config import group_yaml
from forge.genomes.genome import genome_from_dict
from forge.spaces.space import load_space, space_from_config
from search.blind import resolve_auto, varied
from search.cli import run
from search.evaluators import LossEvaluator
from search.errors import SearchConfigError
from surrogate.checkpoints import shipped_sidecars
from tests.search.fakes import FakePredictor
from tests.search.problem.test_blind import _cfg


def _widened(gene: str, stop: int, base: str = "iha-paper"):
    spec = dict(group_yaml("space", base)[gene])
    return space_from_config({**group_yaml("space", base), gene: {**spec, "stop": stop}})


def _with(genome, **values):
    d = genome.to_dict()
    for lay in d["layers"]:
        lay.update(values)
    return genome_from_dict(d)


def test_auto_refuses_a_widened_space_naming_gene_values_and_range():
    space = _widened("d_mlp", 8192)
    with pytest.raises(SearchConfigError) as e:
        resolve_auto(space, None)
    msg = str(e.value)
    assert "d_mlp 4352..8192" in msg and "[512, 4096]" in msg and "evaluator.allow_blind=[d_mlp]" in msg
    assert "\n" not in msg
    assert resolve_auto(space, ["d_mlp"]) == ("forgeformer-iha-paper-all", None)
    assert resolve_auto(load_space("iha-paper"), None) == ("forgeformer-iha-paper-all", None)  # the main job's


def test_auto_says_which_checkpoint_it_passes_over(tmp_path, caplog):
    space = space_from_config({**group_yaml("space", "iha-tiny"), "window": [0, 64]})
    name, note = resolve_auto(space, None)
    assert name == "forgeformer-iha-tiny-swa"
    assert "not forgeformer-iha-tiny" in note and "window 64 never seen" in note
    s = run(_cfg(tmp_path, "space=iha-tiny", "+space.window=[0,64]"))  # said on the console and in summary.json
    assert s["loss_predictor"]["name"] == "forgeformer-iha-tiny-swa" and s["loss_predictor"]["note"] == note
    assert any(note in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_a_search_outside_the_covered_range_is_refused_or_marked_blind(tmp_path):
    over = ["space.d_mlp.stop=2048", "evaluator.predictor=forgeformer-iha-tiny"]  # iha-tiny: d_mlp 128..1024
    with pytest.raises(SearchConfigError, match=r"d_mlp 1088..2048 \(16 values\) outside the range it covers"):
        run(_cfg(tmp_path / "a", "space=iha-tiny", *over))
    s = run(_cfg(tmp_path / "b", "space=iha-tiny", *over, "evaluator.allow_blind=[d_mlp]"))
    assert s["loss_interval"]["blind_to"] == ["d_mlp"]
    assert s["loss_predictor"] == {"name": "forgeformer-iha-tiny", "requested": "forgeformer-iha-tiny"}


def test_a_gqa_tie_counts_the_widths_it_derives(tmp_path):
    assert 128 in varied(load_space("gqa-tiny"))["d_qk"]  # n_h = 1: one 128-wide head, outside iha-tiny's 16..64
    with pytest.raises(SearchConfigError, match=r"d_qk 128 outside the range it covers, \[16, 64\]"):
        run(_cfg(tmp_path / "a", "space=gqa-tiny"))
    s = run(_cfg(tmp_path / "b", "space=gqa-tiny", "evaluator.allow_blind=[d_qk,d_v]"))
    assert s["loss_interval"]["blind_to"] == ["d_qk", "d_v"]
    from search.suggest import tiny_recipe

    assert "evaluator.allow_blind=[d_qk,d_v]" in tiny_recipe({"space": "gqa-paper"})[0]  # printed: it runs


def test_forge_predict_checks_the_grid_genes_ranges_and_marks_each_row():
    import search.api as api

    g = load_space("iha-tiny").sample(2, np.random.default_rng(0))
    big = _with(g[0], d_mlp=2048)
    with pytest.raises(SearchConfigError, match=r"d_mlp 2048 outside the range it covers, \[128, 1024\]") as e:
        api.predict([big, g[1]], predictor="forgeformer-iha-tiny")
    assert "or allow_blind=['d_mlp'] to run" in str(e.value) and "evaluator." not in str(e.value)  # the keyword
    df = api.predict([big, g[1]], predictor="forgeformer-iha-tiny", allow_blind=["d_mlp"])
    assert list(df["loss_blind_to"]) == ["d_mlp", ""]


def test_every_evaluator_call_is_checked_and_a_swapped_predictor_too():
    """The search, forge-verify and co-evolution price genomes through LossEvaluator: one check for all."""
    covered = FakePredictor()
    covered.covers = {**shipped_sidecars()["forgeformer-iha-tiny"]["covers"], "d_mlp": [128, 512]}
    g = load_space("iha-tiny").sample(3, np.random.default_rng(1))
    ev = LossEvaluator(FakePredictor())  # declares nothing: not checked
    ev([_with(g[0], d_mlp=1024)])
    ev.swap(covered)
    with pytest.raises(SearchConfigError, match=r"d_mlp 1024 outside the range it covers, \[128, 512\]"):
        ev([_with(g[0], d_mlp=1024)])
    ok = LossEvaluator(covered, allow_blind=["d_mlp"], name="mine")
    assert len(ok([_with(g[1], d_mlp=1024)])[0]) == 1


def test_the_iha_tiny_swa_refusal_names_the_shipped_checkpoint_that_sees_windows(tmp_path):
    with pytest.raises(SearchConfigError, match="shipped: forgeformer-iha-tiny-swa"):
        run(_cfg(tmp_path, "space=iha-tiny-swa", "evaluator.predictor=forgeformer-iha-tiny"))


def test_the_resolved_predictor_is_named_in_summary_console_report_and_card(tmp_path):
    from search.console import front_rows, front_table
    from search.export import run as run_export
    from search.report_page import run_config
    from search.report_page import settings

    s = run(_cfg(tmp_path / "r", "space=iha-tiny"))
    assert s["loss_predictor"] == {"name": "forgeformer-iha-tiny", "requested": "auto"}
    label = "forgeformer-iha-tiny (evaluator.predictor=auto)"
    assert label in front_table(front_rows(tmp_path / "r"), s).caption
    assert ("loss predictor", label) in settings(tmp_path / "r", s, run_config(tmp_path / "r"))
    out = run_export({"run": str(tmp_path / "r"), "out": str(tmp_path / "x")})
    card = (tmp_path / "x" / out["exported"][0]["id"] / "MODEL_CARD.md").read_text()
    assert f"loss predictor: `{label}`" in card
    from search.hf_card import hf_card

    g = load_space("iha-tiny").sample(1, np.random.default_rng(0))[0]
    hf = hf_card({"id": g.id, "metrics": {"val_loss": 3.0}, "loss_predictor": s["loss_predictor"],
                  "loss_interval": {"blind_to": ["window"]}}, g, None, "byte")
    assert f"loss predictor `{label}`" in hf and "Blind to gene(s) window" in hf and "ignores" not in hf


def test_blind_predictions_are_said_to_extrapolate_not_to_ignore(tmp_path):
    from search.console import front_rows, front_table
    from search.verify import Verify

    s = run(_cfg(tmp_path, "space=iha-tiny-swa", "evaluator.predictor=forgeformer-iha-tiny",
                 "evaluator.allow_blind=[window]"))
    caption = front_table(front_rows(tmp_path), s).caption
    assert "LOSS BLIND TO window" in caption and "extrapolation" in caption and "ignores" not in caption
    v = Verify.__new__(Verify)  # the loss note of a blind run's verify.json and console brief
    v.evaluator = SimpleNamespace(kind="surrogate", blind=["window"],
                                  named={"name": "forgeformer-iha-tiny", "requested": "forgeformer-iha-tiny"})
    note = v._loss_note()
    assert "predicted by forgeformer-iha-tiny" in note and "BLIND to window" in note and "FLOPs" in note
