"""Forge extended from outside the package (tests/ext): a per-layer gene of its own, a space with a ratio gene and
tied genes written in YAML, an objective function with a parameter and an unfitted scikit-learn surrogate, run
through every command (search, export pt and hf, surrogate training, report, verify) from the CLI and the API."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ext import forget

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "data" / "labels" / "iha-tiny-cpu-proxy.jsonl"
CONF = ROOT / "tests" / "ext" / "conf"
EXT = "plugins.modules=[tests.ext.genes]"
FOREST = "tests.ext.surrogates.ForestSurrogate"
TRAINER = "{_target_:tests.search.fakes.FakeTrainer}"


@pytest.fixture(autouse=True)
def clean():
    forget()
    yield
    forget()


def _cli(cwd: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", "import sys; from importlib.metadata import entry_points as e; "
                           "name = sys.argv.pop(1); sys.argv[0] = name; "
                           "e(group='console_scripts', name=name)[name].load()()", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _genomes(run: Path) -> list[dict]:
    return [json.loads(line)["genome"] for line in (run / "archive.jsonl").read_text().splitlines()]


def _check_run(run: Path) -> None:
    genomes = _genomes(run)
    layers = [lay for g in genomes for lay in g["layers"] if lay.get("active", True) and lay.get("attn", True)]
    assert {lay.get("glu", 0) for lay in layers} == {0, 1}  # the extension's gene is searched
    assert all(lay["n_kv"] == lay["n_h"] and lay["d_v"] == lay["d_qk"] for lay in layers)  # tied in YAML
    assert {lay["d_mlp"] for g in genomes for lay in g["layers"]} <= {256, 384, 512}  # d_mlp = r * d_model
    front = [json.loads(line) for line in (run / "pareto.jsonl").read_text().splitlines()]
    assert front and all("memory_mb" in r["metrics"] for r in front)
    assert json.loads((run / "plugins.json").read_text()) == {"modules": ["tests.ext.genes"]}


@pytest.mark.slow
def test_every_command_from_the_cli(tmp_path):
    search = [EXT, f"hydra.searchpath=[file://{CONF}]", "space=ext-ratio", "backend=roofline",
              "objectives=[val_loss,params,{name:memory_mb,fn:tests.ext.objectives.memory_mb,params:{context:512}}]",
              f"evaluator.predictor={{_target_:{FOREST}}}", f"evaluator.labels={LABELS}", "search.pop_size=6",
              "search.offspring=6", "search.generations=2", "progress=false", "hydra.run.dir=run"]
    _cli(tmp_path, "forge-search", *search)
    run = tmp_path / "run"
    _check_run(run)
    for fmt in ("pt", "hf"):
        _cli(tmp_path, "forge-export", EXT, "run=run", "select=knee", f"format={fmt}", f"out=export-{fmt}")
        assert any((tmp_path / f"export-{fmt}").iterdir())
    _cli(tmp_path, "forge-surrogate", EXT, f"hydra.searchpath=[file://{CONF}]", "surrogate=ext-forest",
         "space=ext-ratio", f"data={LABELS}", "hydra.run.dir=surrogate")
    assert "metrics" in json.loads((tmp_path / "surrogate" / "summary.json").read_text())
    _cli(tmp_path, "forge-report", EXT, "runs=[run]", "out=report")
    assert (tmp_path / "report" / "report.html").is_file()
    every = "plugins.modules=[tests.ext.genes,tests.ext.surrogates,tests.ext.objectives]"  # the run's classes too
    _cli(tmp_path, "forge-verify", every, "run=run", "k=2", "control=1", f"trainer={TRAINER}", "measure=none",
         "out=verify")
    assert (tmp_path / "verify" / "verify.json").is_file()


def test_every_call_from_the_api(tmp_path):
    import forge
    from forge.space import space_config, space_from_config
    import search.api
    from surrogate.cli import run as surrogate_run
    from tests.ext import genes  # noqa: F401  (the API's user imports their module)
    from tests.ext.objectives import memory_mb
    from tests.ext.surrogates import ForestSurrogate
    import yaml

    space = space_from_config(yaml.safe_load((CONF / "space" / "ext-ratio.yaml").read_text()))
    res = forge.search(space=space, backend="roofline", out_dir=tmp_path / "run",
                       objectives=["val_loss", "params", {"name": "memory_mb", "fn": memory_mb,
                                                          "params": {"context": 512}}],
                       evaluator={"predictor": ForestSurrogate(), "labels": str(LABELS)},
                       search={"pop_size": 6, "offspring": 6, "generations": 2},
                       plugins={"modules": ["tests.ext.genes"]})  # recorded, so later commands can name it
    _check_run(res.run_dir)
    assert res.export(format="pt", out=tmp_path / "pt")["exported"]
    assert res.export(format="hf", out=tmp_path / "hf")["exported"]
    res.plot(out=tmp_path / "report")
    assert (tmp_path / "report" / "report.html").is_file()
    out = res.verify(k=2, control=1, trainer={"_target_": "tests.search.fakes.FakeTrainer"}, measure="none",
                     out=str(tmp_path / "verify"))
    assert out["front_size"] >= 1
    cfg = search.api.compose("forge-surrogate", mode="train",
                             data=str(LABELS), out_dir=str(tmp_path / "surrogate"),
                             surrogate={"_target_": FOREST, "n_estimators": 20}, space=space_config(space))
    assert "metrics" in surrogate_run(cfg)


def test_the_gene_changes_cost_and_means_the_same_in_the_model_and_the_hf_export(tmp_path):
    """glu is its declaration, its meaning in the model and its count in the workload, all in tests/ext/genes.py:
    the analyzer counts its gate (params, FLOPs, latency), the model builds it, the HF export ships it."""
    import torch

    import forge
    from forge.genome import genome_from_dict
    from forge.model import build_model
    from forge.workload import analyze
    from search.hf_export import write_hf
    from tests.ext import genes  # noqa: F401

    layer = {"n_h": 2, "n_kv": 1, "d_qk": 16, "d_v": 16, "d_mlp": 256}
    base = {"d_model": 128, "block_size": 64, "vocab_size": 256, "mlp": "gelu", "norm": "layernorm"}
    plain = genome_from_dict({**base, "layers": [layer, layer]})
    gated = genome_from_dict({**base, "layers": [{**layer, "glu": 1}, layer]})
    assert analyze(gated)["params"] - analyze(plain)["params"] == 128 * 256  # one gate: d_model x d_mlp
    model = build_model(gated, seed=1).eval()
    assert model.num_params() == analyze(gated)["params"] and model.blocks[0].mlp.gate is not None
    cost = forge.cost([plain, gated], backend="roofline")
    assert cost["ttft_ms"][1] > cost["ttft_ms"][0]
    transformers = pytest.importorskip("transformers")
    write_hf(model, gated, tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()
    x = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(hf(x).logits, model(x)[0], atol=1e-5, rtol=0)
