"""The gene registry (forge.genomes.genes): old genomes keep their ids, the window gene is declared once, and a toy
per-layer gene registered from this test folder alone runs through a search, an export and a surrogate fit."""
from __future__ import annotations

import json

import numpy as np
import pytest

from forge.spaces.arrays import PopArrays
from forge.runtime.config import group_yaml
from forge.genomes.genes import LAYER_GENES, Gene, register, registered
from forge.genomes.genome import Genome, GenomeError, LayerGene, genome_from_dict
from forge.spaces.space import load_space, space_from_config

TOY = Gene("toy", lo=1, default=1, doc="a test-only gene with no meaning in the model")


def _genome(**layer2) -> Genome:
    layers = (LayerGene(4, 2, 64, 96, 512), LayerGene(3, 1, 32, 32, 256, attn=False),
              LayerGene.build(n_h=8, n_kv=8, d_qk=64, d_v=64, d_mlp=1024, **layer2))
    return Genome(d_model=256, block_size=512, layers=layers)


def test_a_genome_written_before_the_window_gene_keeps_its_id_and_file():
    g = _genome()
    old_form = {"d_model": 256, "block_size": 512, "layers": [
        {"n_h": 4, "n_kv": 2, "d_qk": 64, "d_v": 96, "d_mlp": 512},
        {"n_h": 3, "n_kv": 1, "d_qk": 32, "d_v": 32, "d_mlp": 256, "attn": False},
        {"n_h": 8, "n_kv": 8, "d_qk": 64, "d_v": 64, "d_mlp": 1024}]}
    loaded = genome_from_dict(old_form)
    assert loaded == g and loaded.id == g.id and all(lay.window == 0 for lay in loaded.layers)
    assert "window" not in g.to_json() and "window" not in json.dumps(g.canonical())
    assert g.id == "9392040edf9e7224"  # the id this genome had before the registry existed


def test_window_changes_the_id_except_on_identity_attention_layers():
    g, w = _genome(), _genome(window=128)
    assert w.layers[2].window == 128 and w.id != g.id
    assert genome_from_dict(json.loads(w.to_json())) == w
    blanked = g.with_layers((g.layers[0], g.layers[1].replace(window=64), g.layers[2]))
    assert blanked.layers[1].window == 64 and blanked.id == g.id  # identity attention: no window exists
    with pytest.raises(GenomeError, match=r"layers\[0\].window = -1 is invalid"):
        genome_from_dict({"d_model": 8, "block_size": 8, "layers": [{"n_h": 1, "n_kv": 1, "d_qk": 8, "d_v": 8,
                                                                     "d_mlp": 8, "window": -1}]})


def test_population_arrays_carry_the_window_masked_like_attention():
    pop = PopArrays.from_genomes([_genome(window=128), _genome()])
    assert pop.window.shape == pop.n_h.shape and pop.window.dtype == np.int64
    assert pop.window.tolist() == [[0, 0, 128], [0, 0, 0]]
    assert pop.take(np.array([0])).window.tolist() == [[0, 0, 128]]


def test_existing_spaces_keep_their_codec_and_swa_spaces_search_the_window():
    assert load_space("iha-paper").n_var == 40 * 7 and load_space("iha-tiny").codec_genes[-1] == "d_mlp"
    s = load_space("iha-tiny-swa")
    assert s.codec_genes[-1] == "window" and s.n_var == 12 * 8 and s.grid("window") == (0, 16, 32, 64, 128)
    X = s.sample_x(64, np.random.default_rng(0))
    genomes = s.decode(X)
    wins = {lay.window for g in genomes for lay in g.layers}
    assert wins == {0, 16, 32, 64, 128}
    assert np.array_equal(s.encode(genomes), X)
    assert np.array_equal(s.to_arrays(X).window, PopArrays.from_genomes(genomes).window)
    for g in genomes[:8]:
        s.validate(g)
        assert genome_from_dict(g.to_dict()) == g  # the decoder's unvalidated genomes equal validated ones
    paper = load_space("iha-paper-swa")
    assert paper.grid("window") == (0, 64, 128, 256, 512, 1024, 2048, 4096) and paper.n_var == 40 * 8


def test_a_gene_needs_a_default_and_a_name_keeps_its_declaration():
    with pytest.raises(ValueError, match="needs a default"):
        register(Gene("nodefault"))
    with pytest.raises(ValueError, match="already registered"):
        register(Gene("window", lo=1, default=0))
    assert "nodefault" not in LAYER_GENES


def _toy_space():
    node = dict(group_yaml("space", "iha-tiny"), name="iha-tiny-toy", toy=[1, 2, 3])
    return space_from_config(node)


@pytest.mark.slow
def test_toy_gene_search_export_and_surrogate_fit(tmp_path):
    from backends.interface import Workload
    from search.export import export_one
    from search.evaluators import LossEvaluator
    from search.build import build_search
    from search.state import read_jsonl
    from tests.search.conftest import tiny_cfg
    from tests.search.fakes import FakeBackend, FakePredictor

    with registered(TOY):
        space = _toy_space()
        assert space.codec_genes[-1] == "toy"
        build_search(tiny_cfg(), tmp_path / "run", {"space": space, "evaluator": LossEvaluator(FakePredictor()),
                                                     "backend": FakeBackend(), "workload": Workload()}).run()
        rows = read_jsonl(tmp_path / "run" / "archive.jsonl")
        toys = {lay.get("toy", 1) for r in rows for lay in r["genome"]["layers"]}
        assert toys == {1, 2, 3}  # the search moved the gene over its whole grid
        row = next(r for r in rows if any(lay.get("toy", 1) > 1 for lay in r["genome"]["layers"]))
        info = export_one(row, tmp_path / "export", "yaml", 0, None, {}, {})
        card = (tmp_path / "export" / "MODEL_CARD.md").read_text()
        assert "| toy |" in card and info["id"] == row["id"]
        assert genome_from_dict(row["genome"]).id == row["id"]
        _fit_with_toy_tokens(space)
    assert "toy" not in LAYER_GENES


def _fit_with_toy_tokens(space) -> None:
    """A surrogate whose tokens carry the toy gene learns a loss that depends on it alone."""
    from forge.genomes.labels import Label
    from surrogate.features import featurize
    from surrogate.fit import train_forgeformer
    from surrogate.dataset import from_labels
    from surrogate.training import Recipe

    genomes = space.sample(48, np.random.default_rng(1))
    y = [3.0 + 0.2 * float(np.mean([lay.toy for lay in g.active_layers])) for g in genomes]
    p = featurize(genomes, "paper+toy", L_max=space.L_max)
    assert p.x.shape[-1] == 10 and set(np.unique(p.x[..., -1][p.mask])) <= {1.0, 2.0, 3.0}
    data = from_labels([Label(genome=g, label=v) for g, v in zip(genomes, y)])
    pred = train_forgeformer(data, None, Recipe(field_set="paper+toy", epochs=2, n_members=1), space.name,
                             L_max=space.L_max)
    mu, _ = pred.predict(genomes[:4])
    assert np.all(np.isfinite(mu)) and pred.field_set == "paper+toy"


def test_a_bool_gene_is_a_bool_in_every_genome_the_space_decodes():
    """Decoded slots held 1 where a file's genome holds True: one type, one printed form, the same id."""
    from forge.genomes.genes import show

    with registered(Gene("toy_off", kind="bool", lo=0, default=False)):
        space = space_from_config({**group_yaml("space", "iha-tiny"), "toy_off": [False, True]})
        genomes = space.sample(8, np.random.default_rng(0))
        values = [lay.toy_off for g in genomes for lay in g.layers]
        assert set(map(type, values)) == {bool} and set(values) == {False, True}
        assert {show("bool", v) for v in values} == {"true", "false"}
        assert all(genome_from_dict(g.to_dict()).id == g.id for g in genomes)
