"""Issue 43 §5: every shipped checkpoint declares the genes and value ranges its training split holds
(surrogate.checkpoints.covers_of, bench/declare_covers.py); `forge-surrogate mode=eval` of a checkpoint on labels
outside them says its predictions were blind."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from surrogate.checkpoints import covers_of, shipped_sidecars

ROOT = Path(__file__).resolve().parents[2]
SHAPE = ("n_h", "n_kv", "d_qk", "d_v", "d_mlp")


def _derived(name: str, meta: dict) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from declare_covers import derived
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return derived(name, meta)


@pytest.mark.parametrize("name", ["forgeformer-iha-tiny", "forgeformer-iha-tiny-swa"])
def test_a_shipped_tiny_checkpoint_declares_what_its_training_split_holds(name):
    meta = shipped_sidecars()[name]
    assert all(isinstance(meta["covers"].get(g), list) for g in SHAPE)
    assert meta["covers"] == _derived(name, meta)  # re-made from data/labels, checked against its data hash
    assert ("window" in meta["covers"]) == name.endswith("-swa")


@pytest.mark.parametrize("name", ["forgeformer-iha-paper", "forgeformer-iha-paper-all"])
def test_a_shipped_paper_checkpoint_declares_what_the_shared_labels_hold(name, shared_csv):
    meta = shipped_sidecars()[name]
    assert meta["covers"] == _derived(name, meta) and meta["covers"]["d_mlp"] == [512, 4096]


def test_a_silent_sidecar_covers_the_range_of_its_normalization_statistics():
    meta = {k: v for k, v in shipped_sidecars()["forgeformer-iha-paper"].items() if k != "covers"}
    cov = covers_of(meta)
    assert cov["d_mlp"] == [512, 4096] and cov["n_h"][1] == 16 and cov["active"] == [0, 1] and "window" not in cov


def test_surrogate_eval_of_a_blind_checkpoint_says_so(tmp_path):
    from hydra import compose, initialize_config_module

    from surrogate.cli import human, run as run_surrogate

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose(config_name="forge-surrogate", overrides=[
            "mode=eval", "ckpt=forgeformer-iha-tiny", f"data={ROOT / 'data/labels/iha-tiny-swa-cpu-proxy.jsonl'}",
            f"out_dir={tmp_path}", "threads=1", "progress=false"])
    res = run_surrogate(cfg)
    assert set(res["blind_to"]) == {"window"} and "never seen" in res["blind_to"]["window"]
    assert "BLIND" in human(res) and "extrapolation" in human(res)
    seen = OmegaConf.merge(cfg, {"ckpt": "forgeformer-iha-tiny-swa", "out_dir": str(tmp_path / "b")})
    assert "blind_to" not in run_surrogate(seen)  # the checkpoint trained on windows


def _wider(labels, d_mlp: int, n: int):
    """`n` labels whose genomes' first layer has d_mlp = `d_mlp` (beyond iha-tiny's 1024), each a new genome."""
    from dataclasses import replace as dc_replace

    from forge.genomes.genome import genome_from_dict

    out = []
    for lab in labels[:n]:
        d = lab.genome.to_dict()
        d["layers"][0]["d_mlp"] = d_mlp
        out.append(dc_replace(lab, genome=genome_from_dict(d)))
    return out


def test_a_finetuned_checkpoint_covers_its_base_and_its_new_data_and_says_from_which_rows(tmp_path):
    """Issue 55 §3: 8 new labels with d_mlp up to 2048 widen the fine-tune's d_mlp to [128, 2048] (the base's
    [128, 1024] alone refused the range it was fine-tuned on); the ranges re-make from the rows of each recorded
    data hash, and survive the save (co-evolution's state/surrogate-v<N> is such a save)."""
    import torch

    from forge.genomes.labels import load_any
    from forge.runtime.config import data_dir
    from surrogate.checkpoints import data_covers, union_covers
    from surrogate.dataset import from_labels
    from surrogate.fit import finetune
    from surrogate.loading import load_predictor

    torch.set_num_threads(1)
    labels, _ = load_any(data_dir() / "labels" / "iha-tiny-cpu-proxy.jsonl")
    new = _wider(labels, 2048, 8)
    base = shipped_sidecars()["forgeformer-iha-tiny"]
    assert base["covers"]["d_mlp"] == [128, 1024]
    p = finetune("forgeformer-iha-tiny", new, labels[8:24], epochs=1)
    assert p.meta["covers"]["d_mlp"] == [128, 2048] and p.meta["covers"]["n_h"] == base["covers"]["n_h"]
    parts = p.meta["covers_from"]
    assert parts["new"]["data_hash"] == p.meta["finetune"]["new_data_hash"] == from_labels(new).data_hash()
    assert parts["new"]["covers"] == data_covers(from_labels(new)) and parts["base"]["covers"] == base["covers"]
    assert p.meta["covers"] == union_covers(*(part["covers"] for part in parts.values()))
    p.save(tmp_path / "ft")
    assert load_predictor(tmp_path / "ft").covers["d_mlp"] == [128, 2048]


def test_the_union_of_covers_spans_each_gene_and_a_default_where_one_side_held_only_it():
    from surrogate.checkpoints import union_covers

    assert union_covers({"d_mlp": [128, 1024], "attn": [0, 1]}, {"d_mlp": [256, 2048]}) == {
        "d_mlp": [128, 2048], "attn": [0, 1]}
    assert union_covers({"window": [0, 64]}, {}) == {"window": [0, 64]}  # 0 (its default) is inside already
    assert union_covers({}, {"window": [32, 64]}) == {"window": [0, 64]}  # the other side held the default, 0
    assert union_covers({"d_qk": None}, {}) == {"d_qk": None}
