"""Sliding-window attention in the IHA model: banded training mask, rolling KV cache, equal logits.

Windows are set with `tests.forge.lm.windows.with_window`: the registry's `LayerGene.window` once it is
declared, an attached attribute (what `forge.lm.model.layer_window` reads) before.
"""
from __future__ import annotations

import math
import pytest
import torch
import torch.nn.functional as F

from forge.genomes.genome import Genome, LayerGene
from forge.lm.model import Attention, build_model
from tests.forge.lm.windows import with_window

torch.set_num_threads(2)
V, D, T = 53, 32, 24


def windowed(windows: tuple[int, ...], **kw) -> Genome:
    """GQA, MQA, MHA with d_qk != d_v, an identity layer (window ignored) and a pruned slot."""
    base = (LayerGene(n_h=6, n_kv=2, d_qk=8, d_v=12, d_mlp=48),
            LayerGene(n_h=3, n_kv=3, d_qk=16, d_v=6, d_mlp=40, attn=False),
            LayerGene(n_h=4, n_kv=1, d_qk=4, d_v=20, d_mlp=64),
            LayerGene(n_h=2, n_kv=2, d_qk=10, d_v=10, d_mlp=32, active=False),
            LayerGene(n_h=5, n_kv=5, d_qk=6, d_v=8, d_mlp=24))
    layers = tuple(with_window(g, w) for g, w in zip(base, windows))
    return Genome(**{**dict(d_model=D, block_size=T, vocab_size=V, layers=layers), **kw})


WINDOWS = (4, 3, 0, 5, 7)  # slot 1 is identity attention, slot 3 pruned: both ignore their window
GENOMES = [windowed(WINDOWS), windowed(WINDOWS, pos="learned", norm="layernorm", bias="all", parallel=True),
           windowed((1, 0, 2, 0, 0), mlp="swiglu", tied=False)]
IDS = ["rope-gqa", "learned-parallel", "window-1-and-2"]


def tokens(B: int, n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (B, n), generator=torch.Generator().manual_seed(seed))


def naive_attention(self: Attention, x, rope, cache, li):
    """Reference: explicit per-head softmax with the window written out as i - w < j <= i."""
    B, n, _ = x.shape
    q = self.q_proj(x).view(B, n, self.n_h, self.d_qk).transpose(1, 2)
    k = self.k_proj(x).view(B, n, self.n_kv, self.d_qk).transpose(1, 2)
    v = self.v_proj(x).view(B, n, self.n_kv, self.d_v).transpose(1, 2)
    if rope is not None:
        from forge.lm.model import apply_rope

        cos, sin = rope[self.d_qk]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    R = self.n_h // self.n_kv
    k, v = k.repeat_interleave(R, dim=1), v.repeat_interleave(R, dim=1)
    w = self.window or n
    allowed = torch.tensor([[i - w < j <= i for j in range(n)] for i in range(n)])
    s = (q @ k.transpose(-1, -2) / math.sqrt(self.d_qk)).masked_fill(~allowed, float("-inf"))
    y = F.softmax(s, dim=-1) @ v
    return self.o_proj(y.transpose(1, 2).reshape(B, n, self.n_h * self.d_v))


@pytest.mark.parametrize("g", GENOMES, ids=IDS)
def test_windowed_forward_equals_naive_masked_reference(g, monkeypatch):
    m = build_model(g, seed=2).eval()
    idx = tokens(2, T, seed=1)
    with torch.no_grad():
        got = m(idx)[0]
        monkeypatch.setattr(Attention, "forward", naive_attention)
        ref = m(idx)[0]
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_window_changes_the_network_and_a_window_past_the_sequence_does_not():
    full = windowed((0,) * 5)
    idx = tokens(2, T, seed=3)
    with torch.no_grad():
        a = build_model(full, seed=1)(idx)[0]
        b = build_model(windowed(WINDOWS), seed=1)(idx)[0]
        c = build_model(windowed((T, 0, T + 5, 0, T)), seed=1)(idx)[0]
    assert torch.equal(a, c)  # w >= sequence: plain causal attention
    torch.testing.assert_close(a[:, :3], b[:, :3])  # inside every window: the same
    assert not torch.allclose(a[:, -1], b[:, -1], atol=1e-4)


def test_a_token_outside_a_one_layer_window_never_reaches_a_later_position():
    g = Genome(d_model=D, block_size=T, vocab_size=V,
               layers=(with_window(LayerGene(n_h=4, n_kv=2, d_qk=8, d_v=8, d_mlp=32), 5),))
    m = build_model(g, seed=0).eval()
    idx = tokens(1, T, seed=4)
    alt = idx.clone()
    alt[:, 2] = (alt[:, 2] + 1) % V
    with torch.no_grad():
        a, b = m(idx)[0], m(alt)[0]
    assert torch.equal(a[:, 7:], b[:, 7:])  # query i sees keys i-4 … i: position 2 is gone from 7 on
    assert not torch.allclose(a[:, 6], b[:, 6])  # 6 - 5 < 2: still seen


@pytest.mark.parametrize("g", GENOMES, ids=IDS)
def test_cached_decode_equals_full_forward_past_the_window(g):
    m = build_model(g, seed=4).eval()
    idx = tokens(3, T, seed=5)
    with torch.no_grad():
        full = m(idx)[0]
    cache = m.new_kv_cache(3)
    pre = m.prefill(idx[:, :6], cache)  # the prompt alone is longer than the windows 1…5
    steps = [m.decode_step(idx[:, t], cache) for t in range(6, T)]
    got = torch.cat([pre, torch.stack(steps, dim=1)], dim=1)
    assert cache.length == T
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunks", [((0, 3), (3, 9), (9, 10), (10, T)), ((0, 1), (1, 2), (2, 13), (13, T))])
def test_chunked_prefill_with_windows_matches_full_forward(chunks):
    m = build_model(GENOMES[0], seed=4).eval()
    idx = tokens(2, T, seed=6)
    with torch.no_grad():
        full = m(idx)[0]
    cache = m.new_kv_cache(2)
    got = torch.cat([m.prefill(idx[:, a:b], cache) for a, b in chunks], dim=1)
    torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-5)


def test_the_cache_of_a_windowed_layer_never_holds_more_than_w_positions():
    g = GENOMES[0]
    m = build_model(g, seed=0).eval()
    cache = m.new_kv_cache(2)
    want = {0: 4, 1: None, 2: T, 3: 7}  # block index → slots (identity: none; full: max_len)
    for li, n in want.items():
        if n is None:
            assert cache.k[li] is None and cache.v[li] is None
        else:
            assert cache.k[li].size(2) == n and cache.v[li].size(2) == n
    assert m.new_kv_cache(1, max_len=3).k[3].size(2) == 3  # never more than the sequence either


def test_greedy_generate_with_windows_matches_the_uncached_loop():
    m = build_model(GENOMES[2], seed=9).eval()
    prompt = tokens(2, 3, seed=1)
    out = m.generate(prompt, 12, greedy=True)
    ref = prompt
    with torch.no_grad():
        for _ in range(12):
            ref = torch.cat([ref, m(ref)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ref)


def test_a_windowed_genome_trains_every_parameter():
    m = build_model(GENOMES[0], seed=1)
    idx = tokens(2, T, seed=7)
    _, loss = m(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())
