"""Workload analyzer: PLAS closed forms, published parameter counts, and vectorized == per-genome."""
from __future__ import annotations

import numpy as np
import pytest

from forge.spaces.arrays import PopArrays
from forge.cli import resolve_arch
from forge.genomes.genome import Genome, LayerGene
from forge.spaces.space import load_space
from forge.lm.workload import OP_KINDS, OP_NAMES, Precision, analyze, describe, head_ops, layer_ops, model_totals

# Published totals (../shared/reference/architectures.md, from each model's config.json).
PUBLISHED = {"smollm2-135m": 134_515_008, "smollm2-360m": 361_821_120, "qwen2.5-0.5b": 494_032_768,
             "pythia-160m": 162_322_944, "gpt2": 124_439_808, "llama-3.2-1b": 1_235_814_400,
             "llama-2-7b": 6_738_415_616}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_baseline_params_equal_published(name):
    assert analyze(resolve_arch(name))["params"] == PUBLISHED[name]


def _dense(d, l, n_h, n_kv, r, mlp="swiglu"):
    hd = d // n_h
    return Genome(d_model=d, block_size=4096, vocab_size=1000, mlp=mlp, norm="rmsnorm",
                  layers=tuple(LayerGene(n_h, n_kv, hd, hd, int(r * d)) for _ in range(l)))


@pytest.mark.parametrize("d,l,n_h,n_kv,r", [(768, 12, 12, 12, 4.0), (1024, 8, 16, 4, 2.75), (2048, 4, 32, 8, 4.0)])
def test_homogeneous_gqa_matches_plas_closed_forms(d, l, n_h, n_kv, r):
    """PLAS App. E: prefill FLOPs = l·B·S·d²·ξ_F (Eq. 28-29), decode weights ξ_W^dec·d²·b_w (Eq. 30),
    and summed decode traffic over S_out steps = l·S_out·[ξ_W^dec d² b_w + 2·S̄·d·b_kv/gqa] (Eq. 37)."""
    g = _dense(d, l, n_h, n_kv, r)
    pop = PopArrays.from_genomes([g])
    gqa = n_h / n_kv
    xi_F, xi_W = 4 + 4 / gqa + 6 * r, 2 + 2 / gqa + 3 * r
    B, S_in, S_out = 2, 256, 64
    prec = Precision(weight_bytes=2, act_bytes=2, kv_bytes=1)
    gemm = np.array([k == "gemm" for k in OP_KINDS])
    pre = layer_ops(pop, tokens=S_in, context=S_in, batch=B, prec=prec)
    assert pre.flops[0][:, gemm].sum() == pytest.approx(l * B * S_in * d * d * xi_F, rel=1e-12)
    # score + value products: 4·B·S²·d per layer (PLAS Table 13, d = n_h·d_h)
    attn = pre.flops[0][:, [OP_NAMES.index("attn_score"), OP_NAMES.index("attn_value")]].sum()
    assert attn == pytest.approx(l * 4 * B * S_in**2 * d, rel=1e-12)
    w_dec = kv_total = 0.0
    for t in range(1, S_out + 1):
        step = layer_ops(pop, tokens=1, context=S_in + t, batch=1, prec=prec)
        w_dec = step.weight_bytes[0][:, gemm].sum()
        kv_total += step.kv_read_bytes[0].sum()
    assert w_dec == pytest.approx(l * xi_W * d * d * 2, rel=1e-12)
    S_bar = S_in + (S_out + 1) / 2  # Eq. 36
    assert w_dec * S_out + kv_total == pytest.approx(l * S_out * (xi_W * d * d * 2 + 2 * S_bar * d * 1 / gqa), rel=1e-12)


def test_vectorized_equals_one_by_one_and_masks_hold():
    s = load_space("iha-paper")
    X = s.sample_x(64, np.random.default_rng(3))
    genomes = s.decode(X)
    fast = layer_ops(s.to_arrays(X), tokens=128, context=128)
    slow = layer_ops(PopArrays.from_genomes(genomes), tokens=128, context=128)
    for f in ("flops", "weight_bytes", "act_bytes", "kv_read_bytes", "kv_write_bytes", "M", "K", "N"):
        assert np.array_equal(getattr(fast, f), getattr(slow, f)), f
    pop = s.to_arrays(X)
    off = pop.active == 0
    assert (fast.flops[off] == 0).all()
    ident = (pop.active == 1) & (pop.attn == 0)
    attn_ops = [OP_NAMES.index(n) for n in ("norm_attn", "q_proj", "k_proj", "v_proj", "attn_score", "attn_value", "o_proj")]
    assert (fast.flops[ident][:, attn_ops] == 0).all() and (fast.kv_read_bytes[ident] == 0).all()
    gelu_gate = fast.flops[:, :, OP_NAMES.index("mlp_gate")]
    assert (gelu_gate == 0).all()  # iha-paper uses the two-matrix GELU MLP


def test_totals_and_describe_agree():
    g = resolve_arch("smollm2-135m")
    a = analyze(g, kv_bytes=2)
    assert a["kv_bytes_per_token"] == 30 * 3 * (64 + 64) * 2
    assert a["non_embedding_params"] == a["params"] - 49152 * 576
    assert a["n_active_layers"] == 30
    ops = describe(g, phase="decode", context=300)
    q = next(o for o in ops if o["name"] == "q_proj" and o["layer"] == 0)
    assert (q["M"], q["K"], q["N"], q["flops"]) == (1, 576, 576, 2 * 576 * 576)
    sc = next(o for o in ops if o["name"] == "attn_score" and o["layer"] == 29)
    assert (sc["batch"], sc["M"], sc["K"], sc["N"]) == (9, 1, 64, 300)
    h = head_ops(PopArrays.from_genomes([g]), tokens=256, logits_tokens=1)
    assert h.total("flops")[0] == pytest.approx(2 * 576 * 49152 + 5 * 256 * 576)


def test_csv_params_reproduced(shared_csv):
    """The release's params column (millions) is reproduced within 0.1% by the analyzer.

    48 rows (#idx 1969-2024, one contiguous tail batch of the release) carry `params` values that no
    consistent counting rule reproduces (off by 7-21%); they are listed, not hidden: the test pins
    that they are exactly that tail batch, so any new discrepancy fails."""
    from forge.genomes.importers import load_llmforge_csv

    rows, dropped = load_llmforge_csv(shared_csv)
    assert (len(rows), dropped) == (1753, 4)
    t = model_totals(PopArrays.from_genomes([r.genome for r in rows]))
    pub = np.array([r.params for r in rows]) * 1e6
    rel = np.abs(t["params"] - pub) / pub
    idx = np.array([r.idx for r in rows])
    bad = idx[rel > 1e-3]
    assert len(bad) == 48 and bad.min() == 1969 and bad.max() <= 2024
    assert rel[idx < 1969].max() < 1e-3


def test_workload_totals_equal_the_memory_functions():
    """kv_bytes / weight_bytes / peak_memory_bytes (the workload-total objectives) are the analyzer's own
    kv_cache_bytes and weight_storage, from one operator table."""
    from forge.lm.workload import kv_cache_bytes, weight_storage, workload_totals

    pop = PopArrays.from_genomes(load_space("iha-paper").sample(16, np.random.default_rng(3)))
    prec = Precision(1.0, 2.0, 0.5)
    t = workload_totals(pop, 4096, 3, prec)
    np.testing.assert_allclose(t["kv_bytes"], kv_cache_bytes(pop, 4096, 3, prec))
    np.testing.assert_allclose(t["weight_bytes"], weight_storage(pop, prec))
    np.testing.assert_allclose(t["peak_memory_bytes"], t["weight_bytes"] + t["kv_bytes"])
    assert (t["kv_bytes"] > 0).any()
