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
    assert {g["d_model"] for g in genomes} == {128, 192}  # searched, and every d_mlp follows its own genome's
    assert {lay["d_mlp"] / g["d_model"] for g in genomes for lay in g["layers"]} == {2, 3, 4}  # d_mlp = r * d_model
    front = [json.loads(line) for line in (run / "pareto.jsonl").read_text().splitlines()]
    assert front and all("memory_mb" in r["metrics"] for r in front)
    from forge.genomes.genome import genome_from_dict
    from tests.ext import genes  # noqa: F401  (this process reads the run's genomes, glu included)
    from tests.ext.objectives import memory_mb

    rows = [json.loads(line) for line in (run / "archive.jsonl").read_text().splitlines()]
    every = [genome_from_dict(r["genome"]) for r in rows]
    got = [r["metrics"]["memory_mb"] for r in rows]
    assert got == pytest.approx(memory_mb(every, context=512), rel=1e-4)  # the config's parameter (stored rounded)
    assert got != pytest.approx(memory_mb(every), rel=1e-4)  # and it matters (KV of 512 tokens, not 256)
    assert json.loads((run / "plugins.json").read_text()) == {  # its gene's module; its classes' (a resume needs)
        "modules": ["tests.ext.genes"], "code": ["tests.ext.objectives", "tests.ext.surrogates"]}


def test_every_command_from_the_cli(tmp_path):
    search = [EXT, f"hydra.searchpath=[file://{CONF}]", "space=ext-ratio", "backend=roofline",
              "objectives=[val_loss,params,{name:memory_mb,fn:tests.ext.objectives.memory_mb,params:{context:512}}]",
              f"evaluator.predictor={{_target_:{FOREST}}}", f"evaluator.labels={LABELS}", "search.pop_size=6",
              "search.offspring=6", "search.generations=2", "seed=4", "progress=false", "hydra.run.dir=run"]
    _cli(tmp_path, "forge-search", *search)
    run = tmp_path / "run"
    _check_run(run)
    for fmt in ("pt", "hf"):
        _cli(tmp_path, "forge-export", EXT, "run=run", f"select=id:{_gated(run)}", f"format={fmt}", f"out=export-{fmt}")
    _same_model(tmp_path / "export-pt", tmp_path / "export-hf")
    _cli(tmp_path, "forge-surrogate", EXT, f"hydra.searchpath=[file://{CONF}]", "surrogate=ext-forest",
         "space=ext-ratio", f"data={LABELS}", "hydra.run.dir=surrogate")
    assert "metrics" in json.loads((tmp_path / "surrogate" / "summary.json").read_text())
    _cli(tmp_path, "forge-report", EXT, "runs=[run]", "out=report")
    assert (tmp_path / "report" / "report.html").is_file()
    every = "plugins.modules=[tests.ext.genes,tests.ext.surrogates,tests.ext.objectives]"  # the run's classes too
    _cli(tmp_path, "forge-verify", every, "run=run", "k=2", "control=1", f"trainer={TRAINER}", "measure=none",
         "out=verify")
    assert (tmp_path / "verify" / "verify.json").is_file()


def _gated(run: Path) -> str:
    """The id of a Pareto genome that uses the extension's gene (seed 4's front has one at d_model 192)."""
    front = [json.loads(line) for line in (run / "pareto.jsonl").read_text().splitlines()]
    gated = [r["id"] for r in front if any(lay.get("glu") for lay in r["genome"]["layers"] if lay.get("active", True))]
    assert gated, "no Pareto genome of this run sets glu: the exports would not show the gene's meaning shipped"
    return gated[0]


def _same_model(pt: Path, hf: Path) -> None:
    """The pt export and the HF folder (loaded by transformers with its remote code) are one model, whose genome
    uses the extension's gene: its meaning shipped in modeling_forge.py, not added to Forge."""
    import torch

    from search.export import load_exported
    from tests.ext import genes  # noqa: F401  (this process reads the exported genome, glu included)

    folder = json.loads((pt / "export_summary.json").read_text())["exported"][0]["id"]
    genome, model = load_exported(pt / folder)
    assert any(lay.glu for lay in genome.active_layers)
    assert "def glu_block" in (hf / folder / "modeling_forge.py").read_text()
    transformers = pytest.importorskip("transformers")
    remote = transformers.AutoModelForCausalLM.from_pretrained(str(hf / folder), trust_remote_code=True).eval()
    x = torch.randint(0, genome.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(remote(x).logits, model(x)[0], atol=1e-5, rtol=0)


def test_every_call_from_the_api(tmp_path):
    import importlib

    import yaml

    import forge
    from forge.spaces.space import space_config, space_from_config
    from surrogate.cli import run as train_surrogate
    from tests.ext import genes  # noqa: F401  (the API's user imports their module)
    from tests.ext.objectives import memory_mb
    from tests.ext.surrogates import ForestSurrogate

    space = space_from_config(yaml.safe_load((CONF / "space" / "ext-ratio.yaml").read_text()))
    forest = ForestSurrogate()
    res = forge.search(space=space, backend="roofline", out_dir=tmp_path / "run",
                       objectives=["val_loss", "params", {"name": "memory_mb", "fn": memory_mb,
                                                          "params": {"context": 512}}],
                       evaluator={"predictor": forest, "labels": str(LABELS)},
                       search={"pop_size": 6, "offspring": 6, "generations": 2}, seed=4,
                       plugins={"modules": ["tests.ext.genes"]})  # recorded, so later commands can name it
    _check_run(res.run_dir)
    assert len(forest.model.estimators_) == 50  # surrogate training: the search fitted the object on the labels
    for fmt in ("pt", "hf"):
        assert res.export(select=f"id:{_gated(res.run_dir)}", format=fmt, out=tmp_path / fmt)["exported"]
    _same_model(tmp_path / "pt", tmp_path / "hf")
    res.plot(out=tmp_path / "report")
    assert (tmp_path / "report" / "report.html").is_file()
    out = res.verify(k=2, control=1, trainer={"_target_": "tests.search.fakes.FakeTrainer"}, measure="none",
                     out=str(tmp_path / "verify"))
    assert out["front_size"] >= 1 and (tmp_path / "verify" / "verify.json").is_file()
    api = importlib.import_module(forge.search.__module__)  # the API's own compose, wherever the API module lives
    cfg = api.compose("forge-surrogate", mode="train", data=str(LABELS), out_dir=str(tmp_path / "surrogate"),
                      surrogate={"_target_": FOREST, "n_estimators": 20}, space=space_config(space))
    assert "metrics" in train_surrogate(cfg)


def test_the_gene_changes_cost_and_means_the_same_in_the_model_and_the_hf_export(tmp_path):
    """glu is its declaration, its meaning in the model and its count in the workload, all in tests/ext/genes.py:
    the analyzer counts its gate (params, FLOPs, latency), the model builds it, the HF export ships it."""
    import torch

    import forge
    from forge.genomes.genome import genome_from_dict
    from forge.lm.model import build_model
    from forge.lm.workload import analyze
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


PACKAGE = ("forge", "backends", "surrogate", "search", "conf")  # the package's code and its shipped configs


def test_the_gene_is_its_declaration_its_model_meaning_and_its_workload_count_only():
    """tests/ext/genes.py holds one `register` call, one model hook and one workload hook, and importing it adds
    exactly those to Forge; no file of the package names the gene (each of them reads the registry instead)."""
    import ast
    import re

    from forge.genomes import genes
    from forge.lm import model, workload

    tree = ast.parse((ROOT / "tests" / "ext" / "genes.py").read_text())
    defs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    calls = [ast.unparse(n.value) for n in tree.body if isinstance(n, (ast.Assign, ast.Expr))][1:]  # after the doc
    assert defs == ["glu_block", "glu_ops"] and calls == [
        "register(Gene('glu', lo=0, default=0, doc='1: a gated (GLU) MLP on this layer, 0: a plain one'))",
        "hook('mlp', model=glu_block, workload=glu_ops)"]
    before = (set(genes.LAYER_GENES), set(genes.GLOBAL_GENES), list(model.Block.hooks), list(workload.OP_HOOKS))
    from tests.ext import genes as ext

    assert set(genes.LAYER_GENES) - before[0] == {"glu"} and set(genes.GLOBAL_GENES) == before[1]
    assert model.Block.hooks == [*before[2], ext.glu_block] and workload.OP_HOOKS == [*before[3], ext.glu_ops]
    word = re.compile(r"\bglu\b")  # the gene's name (SwiGLU, the shipped gated MLP, is another word)
    named = [str(f.relative_to(ROOT)) for d in PACKAGE for f in sorted((ROOT / d).rglob("*"))
             if f.is_file() and f.suffix in (".py", ".yaml", ".yml", ".json", ".html", ".jinja", ".md", ".txt")
             and word.search(f.read_text(errors="replace"))]
    assert named == []


@pytest.mark.parametrize("order", [["tests.ext.genes", "tests.ext.off"], ["tests.ext.off", "tests.ext.genes"]])
def test_two_plugins_on_the_mlp_compose_alike_in_the_model_the_workload_and_the_hf_export(order, tmp_path):
    """tests/ext/off hooks the MLP too, after tests/ext/genes (its declared order, whichever is imported first): a
    layer with both genes has no MLP, gate included, in the model and the workload (the issue's 838,528 vs 699,264
    came from composing them differently), and the HF export ships off's helper class and gives the same logits."""
    import torch

    from forge import plugins
    from forge.genomes.genome import genome_from_dict
    from forge.lm.hooks import check_agreement
    from forge.lm.model import build_model
    from forge.lm.workload import analyze

    plugins.load_modules(order)
    layer = {"n_h": 4, "n_kv": 2, "d_qk": 32, "d_v": 32, "d_mlp": 512}
    base = {"d_model": 128, "block_size": 64, "vocab_size": 256, "mlp": "gelu", "norm": "layernorm"}
    both = genome_from_dict({**base, "layers": [{**layer, "glu": 1, "mlp_off": True}, {**layer, "glu": 1}, layer]})
    glu_only = genome_from_dict({**base, "layers": [{**layer, "glu": 1}, {**layer, "glu": 1}, layer]})
    model = build_model(both, seed=1).eval()
    assert model.num_params() == analyze(both)["params"]
    mlp = 2 * 128 * 512 + 128 * 512  # up, down and the glu gate: all gone from the first layer
    assert analyze(glu_only)["params"] - analyze(both)["params"] == mlp
    check_agreement([both, glu_only])  # no disagreement to refuse
    transformers = pytest.importorskip("transformers")
    from search.hf_export import write_hf

    write_hf(model, both, tmp_path / "hf")
    assert "class ZeroMLP" in (tmp_path / "hf" / "modeling_forge.py").read_text()
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "hf"), trust_remote_code=True).eval()
    x = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(hf(x).logits, model(x)[0], atol=1e-5, rtol=0)
