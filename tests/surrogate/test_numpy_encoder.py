"""The numpy encoder (surrogate/numpy_encoder.py) against the torch float64 path it replaces on the CPU: every
shipped checkpoint, deterministic and MC dropout, to 1e-12 relative (issue 45); saving what was loaded
without torch gives the shipped bytes back."""
from __future__ import annotations

import json

import numpy as np
import pytest

from forge.runtime.config import data_dir
from forge.spaces.space import load_space
from surrogate.numpy_encoder import WHOLE, FFConfig, NumpyForgeFormer, param_shapes
from surrogate.predictor import FORMAT
from surrogate.loading import load_predictor

SHIPPED = sorted(p.stem for p in (data_dir() / "surrogate").glob("*.json")
                 if json.loads(p.read_text()).get("format") == FORMAT)


def test_every_shipped_forgeformer_is_checked():
    assert len(SHIPPED) >= 4 and "forgeformer-iha-paper-all" in SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_numpy_and_torch_encoders_agree_on_a_shipped_checkpoint(name):
    p = load_predictor(name)
    assert all(isinstance(m, NumpyForgeFormer) for m in p.members)  # loaded without torch modules
    genomes = load_space(p.space["name"]).sample(WHOLE + 40, np.random.default_rng(7))  # a chunked batch too
    mu, _ = p.encoder_predict(genomes, 0)
    p.seed_mc(11)
    mc_mu, mc_sigma = p.encoder_predict(genomes, 6)
    ref, _ = p.torch_encoder_predict(genomes, 0)
    p.seed_mc(11)
    ref_mu, ref_sigma = p.torch_encoder_predict(genomes, 6)
    assert np.allclose(mu, ref, rtol=1e-12, atol=0)
    assert np.allclose(mc_mu, ref_mu, rtol=1e-12, atol=0)
    # σ is a difference of nearby passes: relative to the passes' own size, not to σ
    assert np.allclose(mc_sigma, ref_sigma, rtol=0, atol=1e-12 * np.abs(ref_mu).max())
    assert (mc_sigma > 0).all() and not np.allclose(mu, mc_mu)  # the MC passes did drop


def test_loaded_then_saved_without_torch_gives_the_shipped_bytes(tmp_path):
    name = SHIPPED[0]
    load_predictor(name).save(tmp_path / "again")
    assert (tmp_path / "again.safetensors").read_bytes() == (data_dir() / "surrogate" / f"{name}.safetensors").read_bytes()


def test_a_member_of_another_shape_is_refused():
    cfg = FFConfig(n_layers=1)
    w = {k: np.zeros(s, np.float32) for k, s in param_shapes(cfg).items()}
    NumpyForgeFormer(cfg, w)
    with pytest.raises(ValueError, match="linear1.weight"):
        NumpyForgeFormer(cfg, {**w, "encoder.layers.0.linear1.weight": np.zeros((3, 64), np.float32)})
    with pytest.raises(ValueError, match="head.bias"):
        NumpyForgeFormer(cfg, {k: v for k, v in w.items() if k != "head.bias"})


def test_a_large_batch_runs_in_depth_sorted_chunks_with_the_same_values():
    p = load_predictor(SHIPPED[0])
    x, mask = p.arrays(load_space(p.space["name"]).sample(3 * WHOLE + 5, np.random.default_rng(3)))
    m = p.members[0]
    whole = m._forward(x, mask, None)
    assert np.allclose(m(x, mask), whole, rtol=1e-12, atol=0) and not np.array_equal(mask.sum(1), np.sort(mask.sum(1)))
