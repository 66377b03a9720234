"""Genome: validation errors, YAML/JSON round-trip, and the canonical id."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from forge.genomes.genome import Genome, GenomeError, LayerGene, genome_from_dict, save_genome
from forge.genomes.importers import load_genome


def _g(**kw) -> Genome:
    layers = (LayerGene(4, 2, 64, 96, 512), LayerGene(3, 1, 32, 32, 256, attn=False),
              LayerGene(8, 8, 64, 64, 1024, active=False))
    return Genome(d_model=128, block_size=256, layers=layers, **kw)


def test_round_trip_yaml_and_json(tmp_path):
    g = _g(mlp="swiglu", bias="qkv", pos="learned", tied=False, name="x")
    for ext in ("yaml", "json"):
        save_genome(g, tmp_path / f"g.{ext}")
        back = load_genome(tmp_path / f"g.{ext}")
        assert back == g and back.id == g.id and back.layers == g.layers


def test_id_ignores_pruned_slots_and_identity_fields_but_not_real_changes():
    g = _g()
    pruned_changed = g.with_layers(g.layers[:2] + (replace(g.layers[2], n_h=2, n_kv=1),))
    identity_changed = g.with_layers((g.layers[0], replace(g.layers[1], n_h=6, d_qk=512)) + g.layers[2:])
    assert pruned_changed.id == g.id == identity_changed.id
    assert g.with_layers(g.layers[:2]).id == g.id  # dropping the pruned slot: same network
    assert g.with_layers((replace(g.layers[0], d_v=64),) + g.layers[1:]).id != g.id
    assert replace(g, vocab_size=300).id != g.id
    assert replace(g, name="other").id == g.id  # the name is not part of the network


@pytest.mark.parametrize("field,value,allowed", [
    ("n_kv", 3, "divisor of n_h=4"), ("d_qk", 0, "integer >= 1"), ("n_h", 2.5, "integer"), ("active", "yes", "true/false")])
def test_layer_errors_name_field_value_and_domain(field, value, allowed):
    d = _g().to_dict()
    d["layers"][0][field] = value
    with pytest.raises(GenomeError) as e:
        genome_from_dict(d)
    msg = str(e.value)
    assert f"layers[0].{field}" in msg and repr(value) in msg and allowed in msg


@pytest.mark.parametrize("field,value", [("mlp", "relu"), ("norm", "batchnorm"), ("bias", "some"), ("pos", "alibi"),
                                         ("d_model", -1), ("colour", "red")])
def test_global_errors(field, value):
    d = _g().to_dict()
    d[field] = value
    with pytest.raises(GenomeError, match=field):
        genome_from_dict(d)


def test_all_pruned_and_missing_fields_are_rejected(tmp_path):
    d = _g().to_dict()
    for layer in d["layers"]:
        layer["active"] = False
    with pytest.raises(GenomeError, match="at least one active layer"):
        genome_from_dict(d)
    d = _g().to_dict()
    del d["layers"][1]["d_mlp"]
    with pytest.raises(GenomeError, match=r"layers\[1\] is missing field.*d_mlp"):
        genome_from_dict(d)
    bad = tmp_path / "bad.yaml"
    bad.write_text("d_model: [1, 2\n")
    with pytest.raises(GenomeError, match="malformed"):
        load_genome(bad)
    with pytest.raises(FileNotFoundError):
        load_genome(tmp_path / "missing.yaml")


def test_template_shorthand_and_json_is_canonical():
    g = genome_from_dict({"d_model": 64, "block_size": 32, "n_layers": 3,
                          "layer_template": {"n_h": 2, "n_kv": 1, "d_qk": 16, "d_v": 16, "d_mlp": 128}})
    assert g.n_active == 3 and len({x for x in g.layers}) == 1
    assert json.loads(g.to_json())["layers"][0]["n_h"] == 2
