"""Global genes in the registry (forge.genomes.genes.GLOBAL_GENES): the nine legacy globals keep every id and file,
a space may search one (d_model from a grid), and a toy global gene registered from this test folder alone
runs through a search, an export and a surrogate fit."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from forge.spaces.arrays import PopArrays
from forge.runtime.config import group_yaml
from forge.genomes.genes import GLOBAL_GENES, GlobalGene, register, registered
from forge.genomes.genome import Genome, GenomeError, LayerGene, genome_from_dict
from forge.genomes.importers import load_genome
from forge.disk.io import REPO_ROOT
from forge.spaces.space import space_from_config

TOYG = GlobalGene("toyg", lo=1, default=1, token=True, doc="a test-only global gene with no meaning in the model")
# ids of the shipped baselines computed by the tree before global genes were registered (commit f187dfb)
BASELINE_IDS = {"gemma-3-270m": "7588aea91102177f", "gpt2": "4d796c14cba7f656", "llama-3.2-1b": "1cebe328dee3a7b8",
                "pythia-160m": "dbdc98452ff6f505", "qwen2.5-0.5b": "05a440ea55e51dcc", "smollm2-135m": "87ef546906550c6f"}


def _genome(**glob) -> Genome:
    layers = (LayerGene(4, 2, 64, 96, 512), LayerGene(3, 1, 32, 32, 256, attn=False))
    return Genome.build(d_model=256, block_size=512, layers=layers, **glob)


def _space(**over):
    return space_from_config({**group_yaml("space", "iha-tiny"), **over})


def test_shipped_genomes_keep_their_ids_and_files():
    for name, gid in BASELINE_IDS.items():
        g = load_genome(REPO_ROOT / "data" / "archs" / f"{name}.yaml")
        assert g.id == gid and genome_from_dict(json.loads(g.to_json())) == g
    assert list(GLOBAL_GENES)[:9] == ["d_model", "block_size", "vocab_size", "mlp", "norm", "bias", "tied", "pos",
                                      "parallel"]
    assert list(_genome().to_dict())[:9] == list(GLOBAL_GENES)[:9]  # the YAML keeps its field order


@pytest.mark.parametrize("field,value,allowed", [
    ("mlp", "relu", "gelu | swiglu"), ("norm", "batchnorm", "layernorm | rmsnorm"), ("d_model", 0, "an integer >= 1"),
    ("tied", "yes", "true/false"), ("bias", "some", "none | qkv | all"), ("parallel", 2, "true/false")])
def test_a_bad_global_is_one_line_naming_the_field_and_what_is_allowed(field, value, allowed):
    with pytest.raises(GenomeError, match=rf"^{field} = .* is invalid; allowed: {allowed}"):
        genome_from_dict({**_genome().to_dict(), field: value})


def test_a_registered_global_gene_is_stored_only_off_its_default():
    plain = _genome()
    with registered(TOYG):
        at_default, off = _genome(toyg=1), _genome(toyg=3)
        assert at_default == plain and at_default.id == plain.id and "toyg" not in at_default.to_json()
        assert off.toyg == 3 and plain.toyg == 1 and off.id != plain.id
        assert genome_from_dict(yaml.safe_load(off.to_yaml())) == off and genome_from_dict(off.to_dict()).id == off.id
        assert off.replace(toyg=1).id == plain.id and "toyg 3" in off.describe() and "toyg" not in plain.describe()
        with pytest.raises(GenomeError, match=r"^toyg = 0 is invalid; allowed: an integer >= 1"):
            genome_from_dict({**plain.to_dict(), "toyg": 0})
        pop = PopArrays.from_genomes([off, plain])
        assert pop.toyg.tolist() == [3, 1] and pop.take(np.array([1])).toyg.tolist() == [1]
        assert pop.column("toyg").tolist() == [[3, 3], [1, 1]]
    with pytest.raises(GenomeError, match=r"^toyg = 3 is invalid; allowed: keys .*d_model"):
        genome_from_dict(off.to_dict())  # unregistered: an unknown key, named


def test_registry_refuses_clashing_or_incomplete_declarations():
    with pytest.raises(ValueError, match="already registered"):
        register(GlobalGene("window", default=0))  # a per-layer gene's name
    with pytest.raises(ValueError, match="needs a default"):
        register(GlobalGene("nodefault"))
    with pytest.raises(ValueError, match="choices"):
        register(GlobalGene("act", kind="choice", default="gelu"))
    with pytest.raises(ValueError, match="invalid; allowed: an identifier other than"):
        register(GlobalGene("layers", default=1))
    assert not {"nodefault", "act"} & set(GLOBAL_GENES)


def test_a_space_searches_d_model_as_a_column_after_the_layer_slots():
    plain, s = _space(), _space(d_model=[128, 192], mlp=["gelu", "swiglu"])
    assert s.searched_globals == ("d_model", "mlp") and s.n_var == plain.n_var + 2 and s.d_model == 128
    assert plain.searched_globals == () and plain.n_var == 12 * 7 and plain.global_genes is None
    X = s.sample_x(64, np.random.default_rng(0))
    genomes = s.decode(X)
    assert {(g.d_model, g.mlp) for g in genomes} == {(128, "gelu"), (128, "swiglu"), (192, "gelu"), (192, "swiglu")}
    assert np.array_equal(s.encode(genomes), X)
    for g in genomes[:8]:
        s.validate(g)
        assert genome_from_dict(g.to_dict()) == g and genome_from_dict(g.to_dict()).id == g.id
    a, b = s.to_arrays(X), PopArrays.from_genomes(genomes)
    for k in ("d_model", "swiglu", "n_h", "d_mlp", "layernorm", "tied"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert s.summary()["d_model"] == [128, 192] and s.summary()["n_var"] == s.n_var
    with pytest.raises(GenomeError, match=r"^d_model = 256 is invalid for space iha-tiny; allowed: \[128, 192\]"):
        s.validate(genomes[0].replace(d_model=256))


def test_a_space_refuses_a_global_it_may_not_search_in_one_line():
    with pytest.raises(GenomeError, match=r"space.vocab_size = .* allowed: one value \(vocab_size is not searchable\)"):
        _space(vocab_size=[256, 512])
    with pytest.raises(GenomeError, match=r"space.mlp = 'relu' is invalid; allowed: gelu \| swiglu"):
        _space(mlp=["gelu", "relu"])
    with pytest.raises(GenomeError, match="space.d_model is searched; allowed: a fixed d_model with attention: gqa"):
        space_from_config({**group_yaml("space", "gqa-paper"), "d_model": [512, 768]})
    assert _space(parallel=True).decode(_space().sample_x(2, np.random.default_rng(0)))[0].parallel


def test_operators_hand_on_and_step_the_global_columns():
    from search.operators import MutationParams, layer_crossover, mutate

    s = _space(d_model=[128, 160, 192], precision={"weights": ["bf16", "fp8"], "acts": ["bf16"], "kv": ["bf16", "fp8"]})
    rng = np.random.default_rng(3)
    A, B = s.sample_x(32, rng), s.sample_x(32, rng)
    c1, c2 = layer_crossover(A, B, s, rng)
    col = s.n_layer_var  # d_model's column, then the three precision genes
    assert np.array_equal(c1[:, col:], B[:, col:]) and np.array_equal(c2[:, col:], A[:, col:])
    Y = mutate(A, s, rng, MutationParams(p_precision=0.5))
    moved = Y[:, col] != A[:, col]
    assert moved.any() and np.all(np.abs(Y[moved, col] - A[moved, col]) == 1) and Y[:, col].max() <= 2
    assert {g.d_model for g in s.decode(Y)} <= {128, 160, 192}


@pytest.mark.slow
def test_searching_d_model_runs_a_tiny_search_end_to_end_through_the_cli(tmp_path):
    """`forge-search space=iha-tiny space.d_model=[128,192]` with the roofline backend (a fake loss)."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from search.cli import run
    from search.state import read_jsonl

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["space=iha-tiny", "space.d_model=[128,192]", "search.pop_size=8",
                                                 "search.offspring=8", "search.generations=3", "progress=false",
                                                 f"out_dir={tmp_path / 'run'}"])
    OmegaConf.set_struct(cfg, False)
    cfg.evaluator.predictor = {"_target_": "tests.search.fakes.FakePredictor"}
    run(cfg)
    rows = read_jsonl(tmp_path / "run" / "archive.jsonl")
    assert {r["genome"]["d_model"] for r in rows} == {128, 192}  # both widths evaluated and priced
    assert all(genome_from_dict(r["genome"]).id == r["id"] for r in rows)
    assert all(np.isfinite(r["metrics"]["ttft_ms"]) for r in rows if r["feasible"])


@pytest.mark.slow
def test_toy_global_gene_search_export_and_surrogate_fit(tmp_path):
    from backends.interface import Workload
    from search.export import export_one
    from search.evaluators import LossEvaluator
    from search.build import build_search
    from search.state import read_jsonl
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend, FakePredictor

    with registered(TOYG):
        space = _space(name="iha-tiny-toyg", toyg=[1, 2, 3])  # a top-level key naming the gene: its grid
        assert space.searched_globals == ("toyg",) and space.n_var == 12 * 7 + 1
        build_search(tiny_cfg(), tmp_path / "run", {"space": space, "evaluator": LossEvaluator(FakePredictor()),
                                                     "backend": FakeBackend(), "workload": Workload()}).run()
        rows = read_jsonl(tmp_path / "run" / "archive.jsonl")
        assert {r["genome"].get("toyg", 1) for r in rows} == {1, 2, 3}  # the search moved it over its grid
        row = next(r for r in rows if r["genome"].get("toyg", 1) > 1)
        info = export_one(row, tmp_path / "export", "yaml", 0, None, {}, {})
        assert f"toyg {row['genome']['toyg']}" in (tmp_path / "export" / "MODEL_CARD.md").read_text()
        assert info["id"] == row["id"] == load_genome(tmp_path / "export" / "genome.yaml").id
        _fit_with_global_token(space)
    assert "toyg" not in GLOBAL_GENES


def _fit_with_global_token(space) -> None:
    """A surrogate whose tokens carry the toy global gene (broadcast to every layer) fits and predicts."""
    from forge.genomes.labels import Label
    from surrogate.dataset import from_labels
    from surrogate.features import featurize
    from surrogate.fit import train_forgeformer
    from surrogate.training import Recipe

    genomes = space.sample(48, np.random.default_rng(1))
    y = [3.0 + 0.2 * g.toyg for g in genomes]
    p = featurize(genomes, "paper+toyg", L_max=space.L_max)
    assert p.x.shape[-1] == 10 and set(np.unique(p.x[..., -1][p.mask])) == {1.0, 2.0, 3.0}
    assert np.all(p.x[..., -1][~p.mask] == 0)
    data = from_labels([Label(genome=g, label=v) for g, v in zip(genomes, y)])
    pred = train_forgeformer(data, None, Recipe(field_set="paper+toyg", epochs=2, n_members=1), space.name,
                             L_max=space.L_max)
    mu, _ = pred.predict(genomes[:4])
    assert np.all(np.isfinite(mu)) and pred.field_set == "paper+toyg"
