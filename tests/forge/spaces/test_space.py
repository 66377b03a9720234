"""Search spaces: grids, the paper's configuration counts, sampling, repair and the integer codec."""
from __future__ import annotations

import numpy as np
import pytest

from forge.genomes.genome import GenomeError, LayerGene
from forge.spaces.space import N_GENES, load_space

SPACES = ("iha-paper", "gqa-paper", "iha-tiny")


def test_configs_per_layer_reproduce_llmforge_claim():
    # LLMForge Appendix A: 27 attention configurations under GQA, 50 x 15 x 15 = 11,250 under IHA.
    assert load_space("iha-paper").configs_per_layer() == {"gqa": 27, "iha": 11250}
    assert load_space("gqa-paper").configs_per_layer()["iha"] == 27


def test_configs_per_layer_count_what_tied_genes_allow():
    """n_kv tied to n_h and d_v to d_qk: 2 head counts x 2 widths are 4 configurations, 2 GQA pairs (the tie
    ignored, the tied grids would count 3 pairs and 12 configurations)."""
    from forge.spaces.space import space_from_config

    base = {"name": "tied", "d_model": 128, "block_size": 64, "L_max": 2, "n_h": [2, 4], "d_qk": [16, 32],
            "d_mlp": [64]}
    tied = space_from_config({**base, "n_kv": {"same_as": "n_h"}, "d_v": {"same_as": "d_qk"}})
    assert tied.configs_per_layer() == {"gqa": 2, "iha": 4}
    free = space_from_config({**base, "n_kv": [1, 2, 4], "d_v": [16, 32]})
    assert free.configs_per_layer() == {"gqa": 5, "iha": 20}  # (2,1), (2,2), (4,1), (4,2), (4,4) x 2 x 2


def test_an_unregistered_gene_in_a_space_says_how_to_register_it():
    from forge.spaces.space import space_from_config

    node = {"name": "x", "d_model": 128, "block_size": 64, "L_max": 2, "n_h": [2], "n_kv": [1], "d_qk": [16],
            "d_v": [16], "d_mlp": [64], "no_such_gene": [0, 1]}  # never registered (glu may be, by an earlier test)
    with pytest.raises(GenomeError, match=r"^space config: no_such_gene is neither a field of SearchSpace nor a registered "
                                          r"gene; allowed: .*plugins.modules=\[mypkg.genes\]"):
        space_from_config(node)


def test_unknown_space_lists_valid_ones():
    with pytest.raises(GenomeError, match="iha-paper.*iha-tiny"):
        load_space("nope")


@pytest.mark.parametrize("name", SPACES)
def test_sampling_is_valid_deterministic_and_round_trips(name):
    s = load_space(name)
    X = s.sample_x(200, np.random.default_rng(1))
    assert np.array_equal(X, s.sample_x(200, np.random.default_rng(1)))
    xl, xu = s.bounds()
    assert (X >= xl).all() and (X <= xu).all()
    genomes = s.decode(X)
    for g in genomes:
        s.validate(g)
        assert g.n_active >= 1
    assert np.array_equal(s.encode(genomes), X)
    # the struct-of-arrays fast path agrees with decoding one by one
    v = s.values(X)
    assert v["n_h"][3, 5] == genomes[3].layers[5].n_h and v["d_mlp"][7, 0] == genomes[7].layers[0].d_mlp


@pytest.mark.parametrize("name", SPACES)
def test_repair_snaps_divides_keeps_a_layer_and_is_idempotent(name):
    s = load_space(name)
    rng = np.random.default_rng(2)
    xl, xu = s.bounds()
    X = rng.integers(xl - 3, xu + 4, size=(300, s.n_var)).astype(float) + rng.normal(0, 0.3, (300, s.n_var))
    X[:5, 0::N_GENES] = 0  # every layer pruned
    R = s.repair_x(X)
    assert np.array_equal(s.repair_x(R), R)
    assert (R >= xl).all() and (R <= xu).all()
    v = s.values(R)
    assert (v["n_h"] % v["n_kv"] == 0).all()
    assert (v["active"].sum(axis=1) >= 1).all()


def test_nkv_snaps_to_nearest_divisor():
    s = load_space("iha-paper")
    g = s.genome([LayerGene(n_h=12, n_kv=12, d_qk=64, d_v=64, d_mlp=512)] * 2)
    X = s.encode([g])
    X[0, 3] = s.n_kv.index(5)  # n_h=12, n_kv=5 -> nearest divisor 4 (6 is farther)
    X[0, 7 + 3] = s.n_kv.index(9)  # n_kv=9 -> ties between 6 and 12? |9-6|=3, |9-12|=3 -> smaller, 6
    v = s.values(s.repair_x(X))
    assert v["n_kv"][0, 0] == 4 and v["n_kv"][0, 1] == 6


def test_off_grid_genome_is_snapped_and_validate_names_field():
    s = load_space("iha-paper")
    g = s.genome([LayerGene(n_h=4, n_kv=2, d_qk=70, d_v=500, d_mlp=600)])
    with pytest.raises(GenomeError, match=r"layers\[0\].d_qk = 70.*64:32:512"):
        s.validate(g)
    r = s.repair(g)
    s.validate(r)
    assert (r.layers[0].d_qk, r.layers[0].d_v, r.layers[0].d_mlp) == (64, 512, 512)
    assert len(r.layers) == s.L_max and r.n_active == 1


def test_gqa_space_couples_head_dims():
    s = load_space("gqa-paper")
    assert s.n_h == (1, 2, 3, 4, 6, 8, 12, 16)
    for g in s.sample(50, np.random.default_rng(0)):
        for layer in g.layers:
            assert layer.d_qk == layer.d_v == 768 // layer.n_h
