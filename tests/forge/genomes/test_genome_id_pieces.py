"""The id built from cached pieces (`Genome._id_frame`, `LayerGene.canon_json`) is the hash of the canonical
form's JSON text, as it always was: for decoded genomes (shared layers, trusted copies), precision genes,
windows and a searched global gene."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from forge.genomes.genome import Genome, LayerGene
from forge.spaces.space import load_space, space_from_config


def _reference_id(g: Genome) -> str:
    """The id's definition: sha256 of the sorted, compact JSON of the canonical form."""
    blob = json.dumps(g.canonical(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", ["iha-paper", "gqa-paper", "iha-paper-mx", "iha-paper-swa", "iha-tiny-swa"])
def test_decoded_ids_match_the_canonical_hash(name: str) -> None:
    space = load_space(name)
    genomes = space.sample(60, np.random.default_rng(3))
    assert [g.id for g in genomes] == [_reference_id(g) for g in genomes]
    assert len({g.id for g in genomes}) > 1


def test_precision_copies_get_their_own_frame() -> None:
    genomes = load_space("iha-paper-mx").sample(30, np.random.default_rng(0))
    assert len({g.precision for g in genomes}) > 1  # copies of one template with other formats: own frame
    assert [g.id for g in genomes] == [_reference_id(g) for g in genomes]
    stripped = [g.with_precision(None) for g in genomes]
    assert [g.id for g in stripped] == [_reference_id(g) for g in stripped]


def test_searched_global_gene_ids() -> None:
    from forge.runtime.config import group_yaml

    space = space_from_config({**group_yaml("space", "iha-tiny"), "d_model": [128, 192]})
    genomes = space.sample(40, np.random.default_rng(1))
    assert {g.d_model for g in genomes} == {128, 192}
    assert [g.id for g in genomes] == [_reference_id(g) for g in genomes]


def test_built_genome_id_is_unchanged_by_the_fast_path() -> None:
    lay = LayerGene(n_h=8, n_kv=2, d_qk=64, d_v=32, d_mlp=1024)
    off = LayerGene(n_h=4, n_kv=4, d_qk=16, d_v=16, d_mlp=512, attn=False)
    g = Genome(d_model=256, block_size=512, layers=(lay, off, lay.replace(active=False)), mlp="swiglu")
    assert g.id == _reference_id(g)
    assert g.replace(d_model=384).id == _reference_id(g.replace(d_model=384)) != g.id
