"""LLMForge importers: the per-model YAML (both layouts) and the label CSV, with clear errors."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from forge.genomes.genome import GenomeError
from forge.genomes.importers import load_genome
from forge.genomes.importers import genome_from_llmforge_yaml, iter_llmforge_csv, load_llmforge_csv
from forge.genomes.labels import LabelFileError, from_llmforge_csv, read_labels, write_labels
from forge.lm.workload import analyze

EXPECTED = {"smollm2_135m.yaml": 134_515_008, "smollm2_360m.yaml": 361_821_120, "qwen2_5_0_5b.yaml": 494_032_768,
            "pythia_160m.yaml": 162_322_944}


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_release_yaml_fills_published_globals(shared_data, fname):
    g = load_genome(shared_data / "llmforge_archs" / fname)
    assert analyze(g)["params"] == EXPECTED[fname]


def test_gpt2_release_yaml_and_layers_list(shared_data):
    g = load_genome(shared_data / "llmforge_archs" / "gpt2_small.yaml")
    assert g.mlp == "gelu" and g.n_active == 12 and g.pos == "learned"
    explicit = genome_from_llmforge_yaml({"name": "x", "n_embd": 64, "block_size": 32, "layers": [
        {"n_head": 4, "n_kv_group": 2, "n_qk_head_dim": 16, "n_v_head_dim": 8, "mlp_size": 128, "attention_variant": "identity"},
        {"n_head": 3, "n_kv_group": 3, "n_qk_head_dim": 16, "n_v_head_dim": 16, "mlp_size": 64}]})
    assert [layer.attn for layer in explicit.layers] == [False, True]
    assert explicit.mlp == "swiglu"  # the release's global default when no mlp_variant is given


def test_release_yaml_errors_name_the_field():
    with pytest.raises(GenomeError, match=r"layers\[0\] is missing field 'mlp_size'"):
        genome_from_llmforge_yaml({"n_embd": 64, "block_size": 32, "layers": [
            {"n_head": 4, "n_kv_group": 2, "n_qk_head_dim": 16, "n_v_head_dim": 8}]})
    with pytest.raises(GenomeError, match="attention_variant = 'sparse'.*infinite \\| identity"):
        genome_from_llmforge_yaml({"n_embd": 64, "block_size": 32, "n_layers": 1, "layer_template": {
            "n_head": 4, "n_kv_group": 2, "n_qk_head_dim": 16, "n_v_head_dim": 8, "mlp_size": 8, "attention_variant": "sparse"}})
    with pytest.raises(GenomeError, match="n_kv"):
        genome_from_llmforge_yaml({"n_embd": 64, "block_size": 32, "n_layers": 1, "layer_template": {
            "n_head": 4, "n_kv_group": 3, "n_qk_head_dim": 16, "n_v_head_dim": 8, "mlp_size": 8}})


def test_csv_import_drops_inf_and_keeps_masks(shared_csv):
    rows, dropped = load_llmforge_csv(shared_csv)
    assert len(rows) == 1753 and dropped == 4
    r = rows[0]
    assert len(r.genome.layers) == 40 and 1 <= r.genome.n_active <= 40 and r.genome.d_model == 768
    assert len({x.genome.id for x in rows}) > 1700


def _tiny_csv(src: Path, dst: Path, n: int, corrupt: dict[str, str] | None = None) -> None:
    with src.open() as f, dst.open("w", newline="") as g:
        reader = csv.DictReader(f)
        w = csv.DictWriter(g, reader.fieldnames)
        w.writeheader()
        for i, row in enumerate(reader):
            if i == n:
                break
            if corrupt and i == 1:
                row.update(corrupt)
            w.writerow(row)


def test_corrupt_csv_row_is_reported_by_line(shared_csv, tmp_path):
    p = tmp_path / "bad.csv"
    _tiny_csv(shared_csv, p, 3, {"layer2_n_kv_group": "5", "layer2_n_head": "4"})
    with pytest.raises(GenomeError, match="line 3: layer 2"):
        list(iter_llmforge_csv(p))
    _tiny_csv(shared_csv, p, 3, {"val_loss": "abc"})
    with pytest.raises(GenomeError, match=":3: val_loss"):
        list(iter_llmforge_csv(p))


def test_label_jsonl_round_trip_and_corrupt_line(shared_csv, tmp_path):
    labels, dropped = from_llmforge_csv(shared_csv)
    path = tmp_path / "labels.jsonl"
    write_labels(path, labels[:20])
    back = list(read_labels(path))
    assert [b.genome.id for b in back] == [a.genome.id for a in labels[:20]]
    assert [b.label for b in back] == [a.label for a in labels[:20]]
    lines = path.read_text().splitlines()
    lines[6] = lines[6][:40]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LabelFileError, match="labels.jsonl:7"):
        list(read_labels(path))
