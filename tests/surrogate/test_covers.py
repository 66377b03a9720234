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
