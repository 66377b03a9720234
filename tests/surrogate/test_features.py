"""The `derived` per-layer costs come from forge.lm.workload and match the built model's modules."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from forge.lm.model import IHAModel
from forge.spaces.space import load_space
from surrogate.features import featurize, field_names

NAMES = field_names("derived")


def _col(name: str) -> int:
    return NAMES.index(name)


@pytest.mark.parametrize("mlp,bias", [("gelu", "none"), ("swiglu", "all"), ("gelu", "qkv")])
def test_layer_params_equal_built_modules(mlp: str, bias: str) -> None:
    """attn_params / mlp_params of each packed token = numel of that block's Attention / MLP (biases and a
    SwiGLU gate included): the surrogate's cost fields follow the model, not a private formula."""
    genomes = [dataclasses.replace(g, mlp=mlp, bias=bias)
               for g in load_space("iha-tiny").sample(6, np.random.default_rng(3))]
    x = featurize(genomes, "derived", 12)
    for i, g in enumerate(genomes):
        model = IHAModel(g)
        for t, block in enumerate(model.blocks):  # packed token t = t-th active layer
            attn = sum(p.numel() for p in block.attn.parameters()) if block.attn is not None else 0
            assert x.x[i, t, _col("attn_params")] == attn
            assert x.x[i, t, _col("mlp_params")] == sum(p.numel() for p in block.mlp.parameters())
        assert not x.x[i, len(model.blocks):, _col("mlp_params")].any()  # padding stays zero


def test_gelu_bias_free_costs_keep_the_shipped_formulas() -> None:
    """For the two-matrix GELU, bias-free MLP of iha-paper (the shipped checkpoint's space) the fields equal
    the formulas the checkpoint was trained with, so it needs no retrain."""
    space = load_space("iha-paper")
    genomes = space.sample(20, np.random.default_rng(0))
    p = featurize(genomes, "derived", space.L_max)
    f = {k: p.x[..., _col(k)] for k in NAMES}
    d, T = f["d_model"], f["T"]
    kv = f["n_kv"] * (f["d_qk"] + f["d_v"])
    attn = d * (f["n_h"] * f["d_qk"] + kv + f["n_h"] * f["d_v"])
    mlp = 2.0 * d * f["d_mlp"]
    flops = 2.0 * (attn + mlp) + 2.0 * T * f["n_h"] * (f["d_qk"] + f["d_v"])
    for name, ref in (("attn_params", attn), ("mlp_params", mlp), ("kv_per_token", kv), ("flops_per_token", flops)):
        np.testing.assert_array_equal(f[name], ref * p.mask, err_msg=name)
