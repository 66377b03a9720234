import math

import numpy as np
import pytest

from forge.genomes.labels import Label, LabelFileError, write_labels
from surrogate.dataset import (LabelSetError, duplicate_groups, from_labels, group_folds, load_labelset,
                               train_val_test)


def _with_duplicates(labels):
    """Append copies of 20 architectures (same id, different pruned-slot content)."""
    from forge.genomes.genome import LayerGene

    extra = [Label(l.genome.with_layers(list(l.genome.layers) + [LayerGene(2, 1, 16, 16, 128, active=False)]),
                   l.label + 0.01) for l in labels[:20]]
    return labels + extra


def test_split_leaks_nothing_and_is_deterministic(tiny_jsonl):
    from forge.genomes.labels import read_labels

    data = from_labels(_with_duplicates(list(read_labels(tiny_jsonl))))
    assert len(set(data.ids)) < len(data)  # duplicates present
    tr, va, te = train_val_test(data, seed=3)
    assert len(tr) + len(va) + len(te) == len(data)
    assert not set(tr.ids) & set(te.ids) and not set(va.ids) & set(te.ids) and not set(tr.ids) & set(va.ids)
    n_uniq = len(set(data.ids))
    assert len(set(te.ids)) == math.floor(0.2 * n_uniq + 0.5)
    tr2, va2, te2 = train_val_test(data, seed=3)
    assert te2.ids == te.ids and va2.ids == va.ids
    assert set(train_val_test(data, seed=4)[2].ids) != set(te.ids)


def test_corrupt_line_is_reported_with_its_number(tiny_jsonl, tmp_path):
    lines = tiny_jsonl.read_text().splitlines()
    lines[6] = lines[6][:40]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(LabelFileError, match=r"bad\.jsonl:7:"):
        load_labelset(bad)


def test_nonfinite_rows_are_dropped_and_counted(tiny_jsonl, tmp_path):
    from forge.genomes.labels import read_labels

    labels = list(read_labels(tiny_jsonl))[:30]
    labels[3] = Label(labels[3].genome, float("inf"), reason="diverged")
    write_labels(tmp_path / "l.jsonl", labels)
    data = load_labelset(tmp_path / "l.jsonl")
    assert len(data) == 29 and data.dropped == 1 and np.isfinite(data.y).all()


def test_several_label_files_join_and_mixed_protocols_are_refused(tiny_jsonl, tmp_path):
    from forge.genomes.labels import read_labels

    labels = list(read_labels(tiny_jsonl))[:30]
    labels[29] = Label(labels[29].genome, float("inf"), labels[29].provenance, reason="diverged")
    write_labels(tmp_path / "a.jsonl", labels[:12])
    write_labels(tmp_path / "b.jsonl", labels[12:])
    data = load_labelset([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    assert data.ids == [l.genome.id for l in labels[:29]] and data.dropped == 1
    assert data.data_hash() == load_labelset(tiny_jsonl).take(np.arange(29)).data_hash()
    other = [Label(l.genome, l.label, l.provenance, protocol_fp="0123456789abcdef") for l in labels[:5]]
    write_labels(tmp_path / "c.jsonl", other)
    with pytest.raises(LabelSetError, match="2 protocols"):
        load_labelset([tmp_path / "a.jsonl", tmp_path / "c.jsonl"])


def test_nan_label_in_memory_is_an_error(tiny_jsonl):
    from forge.genomes.labels import read_labels

    labels = list(read_labels(tiny_jsonl))[:5]
    labels[2] = Label(labels[2].genome, float("nan"))
    with pytest.raises(LabelSetError, match="#2"):
        from_labels(labels)


def test_llmforge_csv_loads_with_drop_count(shared_csv):
    data = load_labelset(shared_csv)
    assert len(data) == 1753 and data.dropped == 4


def test_group_folds_keep_an_architecture_in_one_fold_and_duplicates_are_counted(tiny_jsonl):
    from forge.genomes.labels import read_labels

    data = from_labels(_with_duplicates(list(read_labels(tiny_jsonl))))
    dup = duplicate_groups(data.ids)
    assert dup["duplicate_groups"] == 20 and dup["rows_in_duplicate_groups"] == 40
    assert dup["architectures"] == dup["rows"] - 20
    fold = group_folds(data.ids, 5, seed=0)
    for i in set(data.ids):
        assert len({int(fold[j]) for j, x in enumerate(data.ids) if x == i}) == 1  # never on two sides
    assert sorted(set(fold.tolist())) == [0, 1, 2, 3, 4] and np.bincount(fold).min() >= len(data) // 5 - 2
    assert np.array_equal(group_folds(data.ids, 5, seed=0), fold)
    assert not np.array_equal(group_folds(data.ids, 5, seed=1), fold)  # the seed shuffles the groups
    with pytest.raises(LabelSetError, match="folds"):
        group_folds(data.ids[:3], 5, seed=0)
