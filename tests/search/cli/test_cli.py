"""forge-search / forge-report / forge-export through their Hydra configs (fakes via _target_ nodes)."""
from __future__ import annotations

import json
import os

import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from search.cli import run
from search.components import backend_of
from search.export import ExportError, load_exported
from search.export import run as run_export
from search.errors import SearchConfigError
from search.report import ReportError, make_report
from search.report import run as run_report
from search.state import read_jsonl


def _cfg(tmp_path, *overrides):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["space=iha-tiny", "search.pop_size=6", "search.offspring=8",
                                                 "search.generations=2", "progress=false", f"out_dir={tmp_path}",
                                                 *overrides])
    OmegaConf.set_struct(cfg, False)
    cfg.backend = {"_target_": "tests.search.fakes.FakeBackend"}
    cfg.evaluator.predictor = {"_target_": "tests.search.fakes.FakePredictor"}
    return cfg


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("multirun")
    for i, algo in enumerate(("nsga", "random")):
        run(_cfg(root / str(i), f"search={algo}"))
    return root


def test_search_cli_defaults_compose_to_table6():
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search")
    s = cfg.search
    assert (cfg.space.name, s.algorithm, s.pop_size, s.offspring, s.generations) == ("iha-paper", "nsga", 24, 48, 40)
    assert (s.crossover.prob, s.mutation.rate, s.coevolve.every) == (0.9, 0.3, 0)  # SBX since issue 53 (layer: 0.6)
    assert list(cfg.objectives) == ["val_loss", "ttft_ms", "tpot_ms", "energy_per_token_uj"]
    assert cfg.backend._target_.endswith("RooflineBackend") and cfg.workload.prefill == 256


def test_search_run_writes_the_run_directory(two_runs):
    d = two_runs / "0"
    for name in ("config.yaml", "summary.json", "archive.jsonl", "pareto.jsonl", "history.jsonl"):
        assert (d / name).is_file(), name
    s = json.loads((d / "summary.json").read_text())
    assert s["space"] == "iha-tiny" and s["evaluations"] == 6 + 2 * 8
    assert json.loads((two_runs / "1" / "summary.json").read_text())["algorithm"] == "random"


def test_unknown_backend_and_objective_list_valid_ones(tmp_path):
    with pytest.raises(SearchConfigError, match="backend 'nope' is unknown; allowed: .*eyeriss.*roofline"):
        backend_of({"backend": "nope"})
    cfg = _cfg(tmp_path, "objectives=[val_loss,speed]")
    with pytest.raises(SearchConfigError, match="'speed' is unknown.*allowed:.*ttft_ms"):
        run(cfg)


def test_report_draws_pngs_and_one_self_contained_html(two_runs, tmp_path):
    out = run_report({"runs": [str(two_runs)], "out": str(tmp_path / "rep")})
    assert out["runs"] == 2 and set(out["hv"]) == {"nsga+iha-tiny@fake", "random+iha-tiny@fake"}
    for p in out["plots"]:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    from search.report_page import plotly_js

    html = (tmp_path / "rep" / "report.html").read_text().replace(plotly_js(), "")  # the page less plotly.js
    assert html.count("data:image/png;base64,") == len(out["plots"]) and "src=\"http" not in html
    assert out["fingerprint"]["fake"]["n_genomes"] > 0
    with pytest.raises(ReportError, match="no summary.json"):
        make_report([tmp_path / "rep" / "plots"], tmp_path / "x")


@pytest.mark.parametrize("fmt,sel", [("safetensors", "knee"), ("pt", "min:ttft_ms"), ("json", "budget:params<=2e6"),
                                     ("yaml", "budget:params:2e6")])
def test_export_loads_back_and_runs_forward(two_runs, tmp_path, fmt, sel):
    s = run_export({"run": str(two_runs / "0"), "select": sel, "format": fmt, "out": str(tmp_path)})
    assert len(s["exported"]) == 1
    gid = s["exported"][0]["id"]
    genome, model = load_exported(tmp_path / gid)
    assert genome.id == gid and (tmp_path / gid / "MODEL_CARD.md").is_file()
    umask = os.umask(0)
    os.umask(umask)
    for f in (tmp_path / gid).iterdir():  # every file with the user's umask (safetensors alone would write 0600)
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask, f.name
    logits, loss = model(torch.randint(0, genome.vocab_size, (2, 8)), torch.randint(0, genome.vocab_size, (2, 8)))
    assert logits.shape == (2, 8, genome.vocab_size) and torch.isfinite(loss)
    pareto = {r["id"]: r for r in read_jsonl(two_runs / "0" / "pareto.jsonl")}
    assert gid in pareto and model.num_params() == s["exported"][0]["params"]
    if sel.startswith("min:"):
        assert pareto[gid]["metrics"]["ttft_ms"] == min(r["metrics"]["ttft_ms"] for r in pareto.values())


def test_export_bad_input(two_runs, tmp_path):
    with pytest.raises(ExportError, match="allowed: pareto \\| knee"):
        run_export({"run": str(two_runs / "0"), "select": "best", "out": str(tmp_path)})
    with pytest.raises(ExportError, match="'speed' is unknown.*allowed:"):
        run_export({"run": str(two_runs / "0"), "select": "min:speed", "out": str(tmp_path)})
    with pytest.raises(ExportError, match="format"):
        run_export({"run": str(two_runs / "0"), "format": "onnx", "out": str(tmp_path)})
    with pytest.raises(ExportError, match="no pareto.jsonl"):
        run_export({"run": str(tmp_path), "out": str(tmp_path)})


def test_coevolve_tiny_experiment_composes():
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["experiment=coevolve-tiny"])
    assert (cfg.space.name, cfg.protocol.name, cfg.evaluator.predictor) == ("iha-tiny", "cpu-proxy", "forgeformer-iha-tiny")
    assert cfg.search.coevolve.every == 5 and cfg.dispatch._target_.endswith("LocalTrainer")


@pytest.mark.slow
def test_coevolve_tiny_experiment_trains_and_refits_for_real(tmp_path):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["experiment=coevolve-tiny", "search.generations=5", "progress=false",
                                                 f"out_dir={tmp_path}"])
    s = run(cfg)
    assert s["coevolution"]["events"] == 1 and s["surrogate_version"] == 1
    labels = read_jsonl(tmp_path / "labels.jsonl")
    assert len(labels) == 4 and all(lab["provenance"]["protocol"] == "cpu-proxy" for lab in labels)


def test_unfinished_runs_are_refused_by_export_and_report(tmp_path):
    d = tmp_path / "part"
    assert run(_cfg(d, "search.generations=3", "stop_after=1"))["status"] == "stopped"
    with pytest.raises(ValueError, match=r"run=.*part: the search is stopped at generation 1 of 3, not complete; "
                                         r"allowed: finish it \(forge-search resume=.*\) or pass allow_partial=true"):
        run_export({"run": str(d), "out": str(tmp_path / "x")})
    assert not (tmp_path / "x").exists()  # refused before anything is written
    s = run_export({"run": str(d), "out": str(tmp_path / "x"), "allow_partial": True})
    assert s["run_status"] == {"status": "stopped", "generations_done": 1, "generations": 3}
    with pytest.raises(ValueError, match="runs=.*stopped at generation 1 of 3"):
        run_report({"runs": [str(d)], "out": str(tmp_path / "rep")})
    assert run_report({"runs": [str(d)], "out": str(tmp_path / "rep"), "allow_partial": True})["runs"] == 1
    (d / "summary.json").unlink()  # a SIGKILLed run has a checkpoint but no final summary
    with pytest.raises(ValueError, match="running at generation 1 of"):
        run_export({"run": str(d), "out": str(tmp_path / "y")})


@pytest.mark.parametrize("override,says", [("search.mutation.rate=1.5", "search.mutation.rate=1.5 is out of range; "
                                                                         "allowed: a probability in \\[0, 1\\]"),
                                            ("hv.ref=-1", "hv.ref=-1 is out of range; allowed: a number > 0"),
                                            ("search.crossover=-0.1", "search.crossover"),
                                            ("search.pop_size=0", "search.pop_size=0 is out of range"),
                                            ("stop_after=-2", "stop_after")])
def test_out_of_range_search_settings_are_refused_before_anything_is_written(tmp_path, override, says):
    with pytest.raises(SearchConfigError, match=says):
        run(_cfg(tmp_path / "r", override))
    assert not (tmp_path / "r").exists()


def test_exit_codes_and_resume_argv(tmp_path):
    from search.cli import exit_code, resume_argv

    R = str(tmp_path)
    assert [exit_code({"status": s}) for s in ("complete", "stopped")] == [0, 0]
    assert exit_code({"status": "interrupted", "interrupted_by": "SIGINT"}) == 130
    assert exit_code({"status": "interrupted", "interrupted_by": "SIGTERM"}) == 143
    assert resume_argv([f"resume={R}", "progress=false"]) == [f"resume={R}", "progress=false", f"hydra.run.dir='{R}'",
                                                              "hydra.output_subdir=null"]  # quoted: spaces pass
    for argv in (["seed=1"], [f"resume={R}", "hydra.run.dir=X"], ["-m", f"resume={R}"], ["resume=null"],
                 [f"resume={R}/not-there"]):
        assert resume_argv(argv) == argv


def test_unwritable_output_is_refused_before_the_work(two_runs, tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OSError, match="afile"):
        run_export({"run": str(two_runs / "0"), "out": str(tmp_path / "afile" / "out")})
    with pytest.raises(OSError, match="afile"):
        run_report({"runs": [str(two_runs)], "out": str(tmp_path / "afile" / "rep")})


def test_a_verified_export_states_its_measured_loss_and_its_card_loads_from_anywhere(two_runs, tmp_path, monkeypatch):
    """Issue 44 §5: weights forge-verify trained (verify/weights/<id>.safetensors beside verify/verify.json) give a
    card that states the measured loss; the card's load snippet runs from another folder; the CLI says what it
    wrote (not only JSON)."""
    import re

    from safetensors.torch import save_model

    from forge.genomes.genome import genome_from_dict
    from forge.lm.model import build_model
    from search.cli import export_lines

    row = read_jsonl(two_runs / "0" / "pareto.jsonl")[0]
    gid, verify = row["id"], tmp_path / "verify"
    (verify / "weights").mkdir(parents=True)
    save_model(build_model(genome_from_dict(row["genome"]), seed=3), str(verify / "weights" / f"{gid}.safetensors"))
    (verify / "verify.json").write_text(json.dumps({"picks": [{"id": gid, "role": "pick knee", "real_loss": 3.1234}]}))
    s = run_export({"run": str(two_runs / "0"), "select": f"id:{gid}", "out": str(tmp_path / "exp"),
                    "weights": str(verify / "weights")})
    card = (tmp_path / "exp" / gid / "MODEL_CARD.md").read_text()
    assert "Measured loss: 3.1234" in card and "A prediction, not a measurement" not in card
    assert card.startswith(f"# Forge export {gid}") and "Forge-DSE" not in card
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    monkeypatch.chdir(tmp_path / "verify")  # not the export folder
    scope: dict = {}
    exec(snippet, scope)  # noqa: S102 (the card's own two lines)
    assert scope["genome"].id == gid
    lines = export_lines(s)
    assert lines[0].startswith("exported 1 genome(s) of ") and "select=id:" in lines[0] and "safetensors" in lines[0]
    assert gid in lines[1] and "weights trained" in lines[1] and "load_exported(" in lines[-1]


def test_a_stopped_search_says_how_to_resume_with_a_relative_path(tmp_path, monkeypatch, capsys):
    """Issue 44 §5: the `resume=` it prints is relative to where the user ran it, as the `next:` lines are."""
    monkeypatch.chdir(tmp_path)
    run(_cfg("runs/a", "stop_after=1"))
    err = capsys.readouterr().err
    assert "continue with: forge-search resume=runs/a" in err and str(tmp_path) not in err


def test_export_shows_a_step_per_genome(two_runs, tmp_path, capsys):
    """Issue 56 §7: forge-export (a 100M-parameter hf folder takes ~20 s) says what it is doing, n of m."""
    s = run_export({"run": str(two_runs / "0"), "select": "pareto", "out": str(tmp_path / "e"), "progress": True})
    err = capsys.readouterr().err.splitlines()
    n = len(s["exported"])
    assert err[0] == f"forge-export: writing format=safetensors: 0/{n} to do" and len(err) == n + 1
    assert all(f" {i}/{n} (" in ln for i, ln in enumerate(err[1:], 1))
