"""Issue 35 §4: a search, forge.search, forge.predict and forge-verify refuse a gene the predictor never saw,
unless `evaluator.allow_blind` names it; an opted-in run marks its loss blind; the default predictor follows
the space."""
from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from forge.spaces.space import load_space
from search.blind import blind_genes, default_predictor, varied
from search.cli import run
from search.errors import SearchConfigError

ROOT = Path(__file__).resolve().parents[3]


def _cfg(tmp_path, *overrides):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["search.pop_size=6", "search.offspring=8", "search.generations=1",
                                                 "progress=false", f"out_dir={tmp_path}", *overrides])
    OmegaConf.set_struct(cfg, False)
    cfg.backend = {"_target_": "tests.search.fakes.FakeBackend"}
    return cfg


def test_the_default_predictor_follows_the_space_and_refuses_a_space_none_can_see():
    assert default_predictor(load_space("iha-tiny"), None) == "forgeformer-iha-tiny"
    assert default_predictor(load_space("iha-tiny-swa"), None) == "forgeformer-iha-tiny-swa"
    assert default_predictor(load_space("iha-paper"), None).startswith("forgeformer-iha-paper")
    with pytest.raises(SearchConfigError, match=r"blind to window.*evaluator.allow_blind=\[window\]"):
        default_predictor(load_space("iha-paper-swa"), None)
    assert default_predictor(load_space("iha-paper-swa"), ["window"]).startswith("forgeformer-iha-paper")


def test_declared_coverage_names_genes_and_ranges():
    class P:
        covers = {"n_h": [1, 4], "window": None}

    grids = {"n_h": (1, 2, 8), "window": (0, 64), "d_v": (16, 32)}
    got = blind_genes(P(), grids)
    assert set(got) == {"n_h", "d_v"} and "n_h 8 outside the range it covers, [1, 4]" in got["n_h"]
    assert "never seen" in got["d_v"]
    assert "window" in varied(load_space("iha-tiny-swa")) and "window" not in varied(load_space("iha-tiny"))


def test_search_refuses_a_blind_gene_and_an_opted_in_run_marks_its_loss_blind(tmp_path):
    with pytest.raises(SearchConfigError, match="blind to gene 'window' that space 'iha-tiny-swa' varies"):
        run(_cfg(tmp_path / "a", "space=iha-tiny-swa", "evaluator.predictor=forgeformer-iha-tiny"))
    s = run(_cfg(tmp_path / "b", "space=iha-tiny-swa", "evaluator.predictor=forgeformer-iha-tiny",
                 "evaluator.allow_blind=[window]"))
    assert s["loss_interval"]["blind_to"] == ["window"]
    rows = list(csv.DictReader(open(tmp_path / "b" / "front.csv")))
    assert rows and all(r["loss_blind_to"] == "window" for r in rows)
    from search.console import front_rows, front_table
    from search.export_card import loss_line

    assert "LOSS BLIND TO window" in front_table(front_rows(tmp_path / "b"), s).caption
    assert "Blind to gene(s) window" in loss_line({"metrics": {"mu": 3.0, "loss_lo": 2.9, "loss_hi": 3.2},
                                                   "loss_interval": s["loss_interval"]})
    ok = run(_cfg(tmp_path / "c", "space=iha-tiny"))  # no predictor named: the space's own checkpoint
    assert "blind_to" not in ok["loss_interval"]


def test_cli_refusal_is_one_line_with_exit_2(tmp_path):
    exe = Path(sys.executable).with_name("forge-search")
    p = subprocess.run([str(exe), "space=iha-paper-swa", "evaluator.predictor=forgeformer-iha-paper",
                        f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "blind to gene 'window'" in p.stderr


def test_api_predict_and_search_refuse_unless_allowed(tmp_path):
    import search.api as api

    sp = load_space("iha-tiny-swa")
    g = sp.sample(8, __import__("numpy").random.default_rng(0))
    g = [x for x in g if any(lay.window for lay in x.layers)][:2]
    with pytest.raises(SearchConfigError, match="blind to gene 'window' that these genomes use"):
        api.predict(g, predictor="forgeformer-iha-tiny")
    df = api.predict(g, predictor="forgeformer-iha-tiny", allow_blind=["window"])
    assert list(df["loss_blind_to"]) == ["window"] * len(g)
    assert "loss_blind_to" not in api.predict(g, predictor="forgeformer-iha-tiny-swa").columns
    with pytest.raises(SearchConfigError, match="blind to gene 'window'"):
        api.search(space="iha-tiny-swa", out_dir=tmp_path / "s", evaluator={"predictor": "forgeformer-iha-tiny"},
                   search={"generations": 1, "pop_size": 6, "offspring": 8})


@pytest.mark.parametrize("field, value, said", [("L_max", 16, "L_max 16 > 12, the most it saw"),
                                                ("d_model", 256, "d_model 256 (it has 128)"),
                                                ("block_size", 512, "block_size 512 (it has 256)")])
def test_auto_names_the_widened_global_no_shipped_checkpoint_fits(field, value, said):
    """Issue 55 §7: `auto` for a space past every shipped checkpoint's globals names the field and the nearest."""
    from dataclasses import replace

    from forge.spaces.space import load_space
    from search.blind import resolve_auto

    with pytest.raises(SearchConfigError, match=rf"nearest, forgeformer-iha-tiny, differs in {re.escape(said)}\)"):
        resolve_auto(replace(load_space("iha-tiny"), **{field: value}), [])
