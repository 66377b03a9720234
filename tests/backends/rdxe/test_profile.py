"""Per-layer rDXE profiles: each active layer on its own; identity attention has no weights or KV."""
from __future__ import annotations

import numpy as np

from backends.rdxe.profile import pop_key_rows, profile_population
from backends.rdxe.ring import RingConstants
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import Precision, model_totals

INT8 = Precision(1.0, 1.0, 1.0)


def _genome(layers, d=256, **kw):
    return Genome(d_model=d, block_size=512, layers=tuple(layers), vocab_size=1000, **kw)


def _profile(g, prefill=64, decode=32, prec=INT8):
    return profile_population(PopArrays.from_genomes([g]), prefill, decode, prec, RingConstants())[0]


def test_each_layer_profiled_on_its_own():
    small, big = LayerGene(2, 1, 64, 64, 256), LayerGene(8, 4, 128, 96, 1024)
    p = _profile(_genome([small, big, big]))
    d = 256
    w_small = d * 2 * 64 + d * 64 + d * 64 + 2 * 64 * d + 2 * d * 256 + 2 * d  # q,k,v,o, MLP, two norms
    assert p.w[0] == w_small and p.w[1] == p.w[2] > p.w[0]
    assert list(p.kappa) == [1 * (64 + 64), 4 * (128 + 96), 4 * (128 + 96)]
    assert p.kT[1] == 4 * (128 + 96) * (64 + 32)  # κ·T at the maximum context
    assert p.o[1] > p.o[0]
    # identical layers of the same genome get identical profiles; the first layer is not reused
    assert len(set(p.o)) == 2


def test_identity_attention_has_no_attention_weights_or_kv():
    mlp_only = LayerGene(4, 2, 64, 64, 512, attn=False)
    p = _profile(_genome([LayerGene(4, 2, 64, 64, 512), mlp_only]))
    d = 256
    assert p.kappa[1] == 0 and p.kT[1] == 0 and p.n_h[1] == 0
    assert p.w[1] == 2 * d * 512 + d  # MLP + its norm only
    assert p.o[1] == 2 * d * 512  # MLP MACs only, no attention
    assert (p.proj_N[1, :4] == 0).all()


def test_pruned_layers_are_skipped_and_totals_match_the_workload_analyzer():
    layers = [LayerGene(4, 2, 64, 64, 512), LayerGene(4, 4, 64, 64, 512, active=False), LayerGene(2, 1, 96, 64, 768)]
    g = _genome(layers, mlp="swiglu", bias="all", norm="layernorm")
    p = _profile(g)
    assert list(p.slots) == [0, 2]
    tot = model_totals(PopArrays.from_genomes([g]), kv_bytes=1.0)
    final_norm = 2 * g.d_model  # layernorm weight + bias
    assert sum(p.w) == tot["non_embedding_params"][0] - final_norm
    assert p.kappa.sum() == tot["kv_bytes_per_token"][0]


def test_precision_scales_bytes_and_decode_ops_grow_with_context():
    g = _genome([LayerGene(4, 2, 64, 64, 512)])
    p8, p16 = _profile(g), _profile(g, prec=Precision(2.0, 2.0, 2.0))
    assert p16.w[0] == 2 * p8.w[0] and p16.kT[0] == 2 * p8.kT[0] and p16.o == p8.o
    assert _profile(g, prefill=512).o[0] > p8.o[0]
    assert p8.e_decode_pj[0] > p8.e_prefill_pj[0] > 0  # decode attends over a longer cache


def test_population_keys_identify_the_network():
    a = _genome([LayerGene(4, 2, 64, 64, 512), LayerGene(2, 1, 64, 64, 256, active=False)])
    b = _genome([LayerGene(4, 2, 64, 64, 512), LayerGene(8, 8, 64, 64, 1024, active=False)])
    c = _genome([LayerGene(4, 2, 64, 64, 768)])
    ka, kb, kc = pop_key_rows(PopArrays.from_genomes([a, b, c]))
    assert ka == kb != kc
    assert np.array_equal(_profile(a).o, _profile(b).o)
