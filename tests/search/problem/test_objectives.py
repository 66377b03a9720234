"""Objectives declared by name and direction: model and workload totals, user functions, maximized
objectives; each shows up in the search, the hypervolume, the table, the plot columns and the export card."""
from __future__ import annotations

import json

import numpy as np
import pytest

from forge import plugins
from search.console import extra_columns, front_table
from search.objectives import Objective, parse_objective, parse_objectives
from search.errors import SearchConfigError
from search.report_page import plot_columns
from search.state import read_jsonl
from tests.search.conftest import tiny_cfg


@pytest.fixture
def fresh_plugins(monkeypatch):
    """Registrations made by a test end with it."""
    from collections import defaultdict

    monkeypatch.setattr(plugins, "_registered", defaultdict(set))
    monkeypatch.setattr(plugins, "_live", {})


def test_entries_parse_to_name_and_direction(fresh_plugins):
    with pytest.raises(SearchConfigError, match="not an allowed objective plug-in"):  # a saved config names no code
        parse_objective({"name": "w", "fn": "tests.search.user_plugins.width"})
    plugins.register("objective", "tests.search.user_plugins.width")
    plugins.register("objective", "no.such.fn")
    assert parse_objective("params") == Objective("params", "min")
    assert parse_objective("max:n_attn_layers") == Objective("n_attn_layers", "max")
    o = parse_objective({"name": "w", "direction": "max", "fn": "tests.search.user_plugins.width"})
    assert (o.name, o.sign) == ("w", -1.0) and o.fn is not None
    for bad, msg in (("up:params", "min | max"), ({"name": "x", "fn": "no.such.fn"}, "cannot be imported"),
                     ({"name": "x", "weight": 2}, "unknown"), (3, "invalid")):
        with pytest.raises(SearchConfigError, match=msg):
            parse_objective(bad)
    with pytest.raises(SearchConfigError, match="repeat"):
        parse_objectives(["params", "min:params"])


def test_params_and_kv_bytes_objectives_run_and_reach_every_output(tmp_path, make_search):
    cfg = tiny_cfg(objectives=["val_loss", "ttft_ms", "params", "kv_bytes"],
                   constraints=["val_loss < 3.8", "peak_memory_bytes <= 1e12"], search={"generations": 2})
    s = make_search(tmp_path, cfg)
    summary = s.run()
    assert summary["objectives"] == ["val_loss", "ttft_ms", "params", "kv_bytes"] and summary["hypervolume"] > 0
    front = read_jsonl(tmp_path / "pareto.jsonl")
    m = front[0]["metrics"]
    assert {"params", "kv_bytes", "peak_memory_bytes"} <= set(m)
    # kv_bytes = KV bytes per token × the workload's context (prefill + decode) at its KV precision
    assert s.anchor["kv_bytes"] == pytest.approx(s.anchor["kv_bytes_per_token"] * 512)
    assert s.anchor["peak_memory_bytes"] > s.anchor["kv_bytes"]
    heads = [c.header for c in front_table(front, summary).columns]
    assert "kv_bytes" in heads and "peak_memory_bytes" in heads
    assert plot_columns(summary) == ["ttft_ms", "params", "kv_bytes"]


def test_a_user_function_is_one_config_entry(tmp_path, make_search, fresh_plugins):
    cfg = tiny_cfg(objectives=["val_loss", {"name": "mlp_width", "fn": "tests.search.user_plugins.width"}],
                   search={"generations": 2})
    plugins.trust(cfg)  # the config the user launched names their function
    s = make_search(tmp_path, cfg)
    s.run()
    rows = read_jsonl(tmp_path / "archive.jsonl")
    from forge.genomes.genome import genome_from_dict
    from tests.search.user_plugins import width

    for r in rows[:5]:
        assert r["metrics"]["mlp_width"] == width([genome_from_dict(r["genome"])])[0]


def test_a_maximized_objective_keeps_its_largest_value_on_the_front(tmp_path, make_search):
    cfg = tiny_cfg(objectives=["params", "max:n_attn_layers"], search={"generations": 3})
    summary = make_search(tmp_path, cfg).run()
    assert summary["maximize"] == ["n_attn_layers"] and summary["hypervolume"] > 0
    feasible = [r["metrics"]["n_attn_layers"] for r in read_jsonl(tmp_path / "archive.jsonl") if r["feasible"]]
    front = [r["metrics"]["n_attn_layers"] for r in read_jsonl(tmp_path / "pareto.jsonl")]
    assert max(front) == max(feasible) > min(front)  # minimized, the front would end at the fewest
    assert [c[1] for c in extra_columns(summary)] == ["n_attn_layers ↑"]


def test_hypervolume_of_a_maximized_objective_grows_with_the_value():
    from search.archive import Hypervolume

    hv = Hypervolume(np.array([1.0, 10.0]), 2.0, signs=[1.0, -1.0])
    values = [hv(np.array([[1.0, -v]])) for v in (20.0, 10.0, 6.0, 4.0)]  # anchor 10, ref 2: 5 is the edge
    assert values[0] > values[1] > values[2] > values[3] == 0.0


def test_unknown_objective_names_what_is_allowed(tmp_path, make_search):
    with pytest.raises(SearchConfigError, match="kv_bytes"):
        make_search(tmp_path, tiny_cfg(objectives=["val_loss", "kv_bites"]))


def test_export_card_lists_the_objectives(tmp_path, make_search):
    from search.export import run as run_export

    make_search(tmp_path / "run", tiny_cfg(objectives=["val_loss", "params", "max:n_attn_layers"],
                                           search={"generations": 2})).run()
    out = run_export({"run": str(tmp_path / "run"), "select": "knee", "format": "yaml", "out": str(tmp_path / "x")})
    card = (tmp_path / "x" / out["exported"][0]["id"] / "MODEL_CARD.md").read_text()
    assert "Objectives: val_loss (min), params (min), n_attn_layers (max)." in card
    assert json.loads((tmp_path / "x" / out["exported"][0]["id"] / "export.json").read_text())["metrics"]["params"] > 0


def test_a_user_surrogate_and_objectives_work_from_the_cli_config(tmp_path):
    """`objectives=[val_loss,ttft_ms,params]` plus a KV-bytes objective, composed as the CLI composes them,
    with a user's surrogate class as evaluator.predictor (config only)."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from search.cli import run

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["space=iha-tiny", "search.pop_size=6", "search.offspring=8",
                                                 "search.generations=2", "progress=false", f"out_dir={tmp_path}",
                                                 "objectives=[val_loss,ttft_ms,params,kv_bytes]"])
    OmegaConf.set_struct(cfg, False)
    cfg.evaluator.predictor = {"_target_": "tests.search.user_plugins.UserSurrogate", "slope": 0.2}
    summary = run(cfg)
    assert summary["status"] == "complete" and summary["objectives"] == ["val_loss", "ttft_ms", "params", "kv_bytes"]
    rows = read_jsonl(tmp_path / "archive.jsonl")
    from forge.genomes.genome import genome_from_dict

    g = genome_from_dict(rows[0]["genome"])
    assert rows[0]["metrics"]["mu"] == pytest.approx(5.0 - 0.2 * g.n_active)
    assert rows[0]["metrics"]["loss_lo"] == "nan"  # no calibration: the interval is unknown, not zero
