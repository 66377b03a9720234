"""The IHA PyTorch model: causality, KV-cached decoding, parameter count vs the analyzer, GQA mapping."""
from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from forge.runtime.config import data_dir
from forge.genomes.genome import Genome, GenomeError, LayerGene
from forge.genomes.importers import load_genome
from forge.lm.model import IHAConfig, IHAModel, build_model
from forge.spaces.space import load_space
from forge.lm.workload import analyze

torch.set_num_threads(2)
V, D, T = 61, 32, 16

# heterogeneous stack: GQA (R=3), MQA, MHA with d_qk != d_v, an identity layer and a pruned slot
HETERO = (
    LayerGene(n_h=6, n_kv=2, d_qk=8, d_v=12, d_mlp=48),
    LayerGene(n_h=3, n_kv=3, d_qk=16, d_v=6, d_mlp=40, attn=False),
    LayerGene(n_h=4, n_kv=1, d_qk=4, d_v=20, d_mlp=64),
    LayerGene(n_h=2, n_kv=2, d_qk=10, d_v=10, d_mlp=32, active=False),
    LayerGene(n_h=5, n_kv=5, d_qk=6, d_v=8, d_mlp=24),
)


def tiny(**kw) -> Genome:
    base = dict(d_model=D, block_size=T, vocab_size=V, layers=HETERO)
    return Genome(**{**base, **kw})


def option_grid() -> list[Genome]:
    """Every combination of MLP, norm, bias, positions, tying and residual form."""
    keys = ("mlp", "norm", "bias", "pos", "tied", "parallel")
    vals = (("gelu", "swiglu"), ("layernorm", "rmsnorm"), ("none", "qkv", "all"), ("rope", "learned"),
            (True, False), (False, True))
    return [tiny(**dict(zip(keys, combo))) for combo in itertools.product(*vals)]


# a few variants that together cover every option, for the (slower) numerical tests
VARIANTS = [
    tiny(),
    tiny(mlp="swiglu", norm="rmsnorm", bias="qkv", tied=False),
    tiny(norm="layernorm", bias="all", pos="learned", parallel=True),
    tiny(mlp="swiglu", bias="all", parallel=True, tied=False),
]
IDS = ["gelu-rms-rope", "swiglu-qkv-untied", "ln-all-learned-parallel", "swiglu-all-parallel"]


def tokens(B: int, n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------ parameters
def test_param_count_matches_analyzer_for_every_option_combination():
    for g in option_grid():
        m = build_model(g, device="meta")
        assert m.num_params() == analyze(g)["params"], g.globals_dict()


def test_param_count_random_iha_tiny_genomes_built_for_real():
    space = load_space("iha-tiny")
    for g in space.sample(6, np.random.default_rng(0)):
        assert build_model(g).num_params() == analyze(g)["params"]


def test_param_count_random_iha_paper_genomes_on_meta():
    space = load_space("iha-paper")
    for g in space.sample(20, np.random.default_rng(1)):
        m = build_model(g, device="meta")
        assert m.wte.weight.device.type == "meta"
        assert m.num_params() == analyze(g)["params"]


def _published_counts(shared_data: Path) -> dict[str, int]:
    ref = shared_data.parent / "reference" / "architectures.md"
    if not ref.is_file():
        pytest.fail(f"published architecture table not found at {ref}")
    out = {}
    for line in ref.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and re.fullmatch(r"[\d,]+", cells[-1]):
            out[cells[0]] = int(cells[-1].replace(",", ""))
    return out


# Baselines outside the shared table: LLaMA-3.3-70B's safetensors index lists total_size 141,107,412,992
# bytes of bf16 weights (meta-llama/Llama-3.3-70B-Instruct, model.safetensors.index.json) = 70,553,706,496.
# LLaMA-3.1-8B: total_size 16,060,522,496 bytes of bf16 weights in meta-llama/Llama-3.1-8B
# model.safetensors.index.json = 8,030,261,248 parameters (the count on its model card, "8.03B").
# Gemma-3-270M: 268,098,176 published parameters (google/gemma-3-270m model card) less what our genome does
# not model (data/archs/gemma-3-270m.yaml): per layer two extra RMSNorms over d_model 640 (pre/post
# feed-forward) and the q/k norms over head_dim 256, 18 layers: 18 · (2·640 + 2·256) = 32,256.
EXTRA_COUNTS = {"llama-3.3-70b": 70_553_706_496, "llama-3.1-8b": 8_030_261_248,
                "gemma-3-270m": 268_098_176 - 18 * (2 * 640 + 2 * 256)}


def test_baselines_match_analyzer_and_published_counts(shared_data):
    published = {**EXTRA_COUNTS, **_published_counts(shared_data)}
    files = sorted((data_dir() / "archs").glob("*.yaml"))
    assert len(files) >= 7
    for f in files:
        g = load_genome(f)
        n = build_model(g, device="meta").num_params()
        assert n == analyze(g)["params"], g.name
        assert n == published[g.name], g.name


def test_structure_identity_and_pruned_layers():
    m = build_model(tiny())
    assert len(m.blocks) == 4 and m.slots == [0, 1, 2, 4]  # pruned slot 3 has no module at all
    ident = m.blocks[1]
    assert ident.attn is None and ident.ln_attn is None  # identity: no attention, no attention norm
    assert m.blocks[0].attn.k_proj.out_features == 2 * 8 and m.blocks[0].attn.v_proj.out_features == 2 * 12
    assert m.blocks[0].attn.o_proj.in_features == 6 * 12


def test_pruned_slots_do_not_change_the_network():
    g = tiny()
    canon = g.with_layers(x for x in g.layers if x.active)
    assert canon.id == g.id
    idx = tokens(2, T)
    a, b = build_model(g, seed=3)(idx)[0], build_model(canon, seed=3)(idx)[0]
    assert torch.equal(a, b)


def test_same_seed_same_weights_other_seed_differs():
    g = VARIANTS[1]
    a, b, c = (build_model(g, seed=s).state_dict() for s in (7, 7, 8))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["wte.weight"], c["wte.weight"])


# ------------------------------------------------------------------------------------ causality
@pytest.mark.parametrize("g", VARIANTS, ids=IDS)
def test_causality_future_tokens_never_change_earlier_logits(g):
    m = build_model(g, seed=1).eval()
    idx = tokens(2, T, seed=2)
    for t in (0, 5, T - 1):
        alt = idx.clone()
        alt[:, t] = (alt[:, t] + 1) % V
        a, b = m(idx)[0], m(alt)[0]
        assert torch.equal(a[:, :t], b[:, :t]), f"logits before position {t} changed"
        assert not torch.allclose(a[:, t], b[:, t]), "the changed position itself must change"


# ----------------------------------------------------------------------------------- KV cache
@pytest.mark.parametrize("g", VARIANTS, ids=IDS)
def test_kv_cached_decoding_reproduces_full_forward(g):
    m = build_model(g, seed=4).eval()
    idx = tokens(3, T, seed=5)
    with torch.no_grad():
        full = m(idx)[0]
    cache = m.new_kv_cache(3)
    pre = m.prefill(idx[:, :5], cache)
    steps = [m.decode_step(idx[:, t], cache) for t in range(5, T)]
    got = torch.cat([pre, torch.stack(steps, dim=1)], dim=1)
    assert cache.length == T
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("g", VARIANTS[:3], ids=IDS[:3])
def test_chunked_prefill_matches_full_forward(g):
    m = build_model(g, seed=4).eval()
    idx = tokens(2, T, seed=6)
    with torch.no_grad():
        full = m(idx)[0]
    cache = m.new_kv_cache(2)
    chunks = [m.prefill(idx[:, a:b], cache) for a, b in ((0, 3), (3, 9), (9, T))]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, atol=1e-5, rtol=1e-5)


def test_greedy_generate_matches_uncached_argmax_loop():
    m = build_model(VARIANTS[0], seed=9).eval()
    prompt = tokens(2, 4, seed=1)
    out = m.generate(prompt, 8, greedy=True)
    ref = prompt
    with torch.no_grad():
        for _ in range(8):
            ref = torch.cat([ref, m(ref)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    assert out.shape == (2, 12) and torch.equal(out, ref)


def test_sampling_is_reproducible_from_a_generator_seed():
    m = build_model(VARIANTS[2], seed=9).eval()
    prompt = tokens(1, 3)
    a = m.generate(prompt, 6, greedy=False, generator=torch.Generator().manual_seed(0))
    b = m.generate(prompt, 6, greedy=False, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)


def test_padded_fused_attention_equals_unpadded_math_path():
    g = VARIANTS[1]  # layers with d_qk < d_v and d_qk > d_v
    idx = tokens(2, T, seed=3)
    with torch.no_grad():
        a = build_model(IHAConfig(g, pad_attn=True), seed=1)(idx)[0]
        b = build_model(IHAConfig(g, pad_attn=False), seed=1)(idx)[0]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ grouped mapping
@pytest.mark.parametrize("n_h,n_kv", [(6, 3), (8, 2), (4, 4)])
def test_query_head_h_reads_kv_group_floor_h_over_R(n_h, n_kv):
    g = Genome(d_model=D, block_size=T, vocab_size=V, pos="learned",
               layers=(LayerGene(n_h=n_h, n_kv=n_kv, d_qk=8, d_v=5, d_mlp=16),))
    m = build_model(g, seed=0).eval()
    attn, R, d_v = m.blocks[0].attn, n_h // n_kv, 5
    heads = {}
    attn.o_proj.register_forward_hook(lambda mod, inp, out: heads.update(y=inp[0]))
    for grp in range(n_kv):
        with torch.no_grad():
            w = attn.v_proj.weight.view(n_kv, d_v, D)
            w.copy_(torch.randn_like(w))
            w[torch.arange(n_kv) != grp] = 0.0  # only KV group `grp` carries values
            m(tokens(1, 6))
        norms = heads["y"].view(1, 6, n_h, d_v).abs().sum(dim=(0, 1, 3))
        live = {h for h in range(n_h) if norms[h] > 0}
        assert live == {h for h in range(n_h) if h // R == grp}, (grp, live)


# ------------------------------------------------------------------------------- loss and modes
def test_loss_is_mean_cross_entropy_and_every_parameter_gets_a_gradient():
    g = VARIANTS[3]
    m = build_model(g, seed=2)
    idx, tgt = tokens(2, T, seed=1), tokens(2, T, seed=2)
    logits, loss = m(idx, tgt)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
    torch.testing.assert_close(loss, ref)
    assert abs(loss.item() - np.log(V)) < 0.5  # near-uniform at init
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())


def test_parallel_block_is_x_plus_attn_plus_mlp():
    g = VARIANTS[2]
    m = build_model(g, seed=5).eval()
    blk, x = m.blocks[0], torch.randn(1, 6, D)
    with torch.no_grad():
        ref = x + blk.attn(blk.ln_attn(x), None, None, 0) + blk.mlp(blk.ln_mlp(x))
        torch.testing.assert_close(blk(x, None, None, 0), ref)
        seq = build_model(replace(g, parallel=False), seed=5).blocks[0](x, None, None, 0)
    assert not torch.allclose(seq, ref)


def test_bfloat16_build_runs():
    m = build_model(VARIANTS[1], dtype=torch.bfloat16)
    logits, loss = m(tokens(1, 8), tokens(1, 8, seed=3))
    assert logits.dtype == torch.bfloat16 and torch.isfinite(loss)


# ------------------------------------------------------------------------------------ bad input
def test_odd_d_qk_with_rope_is_a_clear_error_but_fine_with_learned_positions():
    layers = (LayerGene(n_h=2, n_kv=1, d_qk=7, d_v=8, d_mlp=16),)
    with pytest.raises(GenomeError, match=r"layers\[0\]\.d_qk = 7.*even"):
        IHAModel(tiny(layers=layers))
    assert build_model(tiny(layers=layers, pos="learned")).num_params() == analyze(tiny(layers=layers, pos="learned"))["params"]


def test_a_plain_dict_is_rejected_with_a_pointer_to_the_loader():
    with pytest.raises(GenomeError, match="genome_from_dict"):
        build_model(tiny().to_dict())


def test_overflows_are_clear_errors():
    m = build_model(tiny(pos="learned"))
    with pytest.raises(ValueError, match="block_size=16"):
        m(tokens(1, T + 1))
    cache = build_model(tiny()).new_kv_cache(1, max_len=4)
    with pytest.raises(ValueError, match="KV cache overflow"):
        build_model(tiny()).prefill(tokens(1, 5), cache)
