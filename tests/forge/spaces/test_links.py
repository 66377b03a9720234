"""Ratio and tied genes declared in a space yaml (forge.spaces.links): grids, sampling, repair, validation, round trip,
and a ratio of a searched d_model that follows each genome's own width."""
from __future__ import annotations

import numpy as np
import pytest

from forge.runtime.config import group_yaml
from forge.genomes.genome import GenomeError
from forge.spaces.space import space_config, space_from_config

NODE = {**group_yaml("space", "iha-tiny"), "d_mlp": {"ratio": [2, 3, 4], "of": "d_model"},
        "n_kv": {"same_as": "n_h"}, "d_v": {"same_as": "d_qk"}}


def test_a_ratio_is_a_grid_of_the_global_and_ties_hold_in_every_sampled_and_repaired_genome():
    s = space_from_config(NODE)
    assert s.d_mlp == (256, 384, 512) and s.n_kv == s.n_h and s.d_v == s.d_qk
    X = s.sample_x(32, np.random.default_rng(0))
    X[:, 3::s.n_genes] = 0  # break every n_kv column: repair restores the tie
    genomes = s.decode(s.repair_x(X))
    attn = [lay for g in genomes for lay in g.layers if lay.active and lay.attn]
    assert attn and all(lay.n_kv == lay.n_h and lay.d_v == lay.d_qk for lay in attn)
    assert len({lay.n_h for lay in attn}) > 1  # the tie follows the source, which still varies
    for g in genomes:
        s.validate(g)
    assert space_from_config(space_config(s)) == s


def test_a_broken_tie_and_a_bad_ratio_are_one_line():
    s = space_from_config(NODE)
    g = s.sample(4, np.random.default_rng(1))[0]
    i = next(i for i, lay in enumerate(g.layers) if lay.active and lay.attn and lay.n_h > 1)
    bad = g.with_layers(tuple(lay.replace(n_kv=1) if j == i else lay for j, lay in enumerate(g.layers)))
    with pytest.raises(GenomeError, match=rf"layers\[{i}\].n_kv = 1 is invalid .*allowed: equal to n_h"):
        s.validate(bad)
    with pytest.raises(GenomeError, match=r"space.d_mlp.ratio = \[1.3\] is invalid"):
        space_from_config({**NODE, "d_mlp": {"ratio": [1.3], "of": "d_model"}})
    with pytest.raises(GenomeError, match=r"space.d_mlp.ratio = \[1.5\] is invalid with d_model = 129; allowed: "
                                          r"numbers whose products with every value of it are positive integers"):
        space_from_config({**NODE, "d_model": [128, 129], "d_mlp": {"ratio": [1.5], "of": "d_model"}})
    with pytest.raises(GenomeError, match=r"space.d_mlp.of = 'mlp' is invalid; allowed: an integer global gene"):
        space_from_config({**NODE, "d_mlp": {"ratio": [2], "of": "mlp"}})
    with pytest.raises(GenomeError, match=r"space.n_kv.same_as = 'nope' is invalid"):
        space_from_config({**NODE, "n_kv": {"same_as": "nope"}})


def test_a_ratio_of_a_searched_d_model_follows_each_genome():
    """d_model: [128, 192] with d_mlp: {ratio: [2, 3, 4]}: the codec column holds r, each genome stores r * its own
    d_model (valid in the space, same id through encode/repair/decode and as a fixed-width space's genome), and
    moving only the d_model column moves every d_mlp with it, so the workload's cost follows."""
    from forge.lm.workload import analyze

    s = space_from_config({**NODE, "d_model": [128, 192]})
    assert s.d_mlp == (256, 384, 512, 576, 768) and s.index_grid("d_mlp") == (2, 3, 4)
    X = s.sample_x(48, np.random.default_rng(2))
    genomes = s.decode(X)
    assert {g.d_model for g in genomes} == {128, 192}
    assert {lay.d_mlp / g.d_model for g in genomes for lay in g.layers} == {2, 3, 4}
    for g in genomes:
        s.validate(g)
    assert (s.encode(genomes) == X).all() and (s.repair_x(X) == X).all()
    fixed = space_from_config(NODE)  # d_model 128 fixed: the same genome, the same id, whatever the space's form
    at128 = [g for g in genomes if g.d_model == 128]
    assert [g.id for g in fixed.decode(fixed.encode(at128))] == [g.id for g in at128]
    wide = X.copy()
    wide[:, s.n_layer_var] = 1  # every genome at d_model 192, the ratio columns untouched
    moved = s.decode(wide)
    for a, b in zip(genomes, moved):
        s.validate(b)
        assert [lb.d_mlp * a.d_model for lb in b.layers] == [la.d_mlp * 192 for la in a.layers]
    small = [i for i, g in enumerate(genomes) if g.d_model == 128]
    assert all(analyze(moved[i])["params"] > analyze(genomes[i])["params"] for i in small)
    bad = next(g for g in genomes if 256 in {lay.d_mlp for lay in g.layers}).replace(d_model=192)  # 256 = 2 * 128
    with pytest.raises(GenomeError, match=r"layers\[\d+\].d_mlp = 256 is invalid for space iha-tiny; allowed: "
                                          r"384:192:768"):  # 2, 3 and 4 times this genome's d_model
        s.validate(bad)
    assert space_from_config(space_config(s)) == s and space_config(s)["d_mlp"] == {"ratio": [2, 3, 4], "of": "d_model"}
    assert s.summary()["ranges"]["d_mlp"] == "2:1:4 x d_model" and s.summary()["d_model"] == [128, 192]


def test_forge_space_shows_a_tied_gene_by_its_source_and_a_bool_gene_by_its_spelling():
    """Issue 55 §7: not `n_kv 1:1:8` (its source's grid) nor `False, True` (Python's spelling)."""
    from forge.genomes.genes import Gene, register, unregister
    from forge.runtime.config import group_yaml
    from forge.spaces.space import space_from_config

    register(Gene("flag_t", kind="bool", lo=0, default=False, doc="a test bool gene"))
    try:
        s = space_from_config({**group_yaml("space", "iha-tiny"), "n_kv": {"same_as": "n_h"}, "flag_t": [False, True]})
        assert s.summary()["ranges"] == {"n_h": "1:1:8", "n_kv": "same as n_h", "d_qk": "16:8:64", "d_v": "16:8:64",
                                         "d_mlp": "128:64:1024", "flag_t": "false, true"}
    finally:
        unregister("flag_t")
