"""Ratio and tied genes declared in a space yaml (forge.links): grids, sampling, repair, validation, round trip."""
from __future__ import annotations

import numpy as np
import pytest

from forge.config import group_yaml
from forge.genome import GenomeError
from forge.space import space_config, space_from_config

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
    with pytest.raises(GenomeError, match=r"space.d_mlp.of = 'd_model' is invalid"):
        space_from_config({**NODE, "d_model": [128, 192]})
    with pytest.raises(GenomeError, match=r"space.n_kv.same_as = 'nope' is invalid"):
        space_from_config({**NODE, "n_kv": {"same_as": "nope"}})
