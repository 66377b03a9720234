"""The workload analyzer under sliding-window layers: min(w, context) keys, bounded KV cache, split decode sums."""
from __future__ import annotations

import numpy as np
import pytest

from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import (OP_NAMES, attended_keys, causal_keys, kv_cache_bytes, layer_ops, layer_windows,
                            model_totals, sum_capped_steps, window_steps)
from tests.forge.lm.windows import windowed_pop

LAYERS = (LayerGene(n_h=8, n_kv=2, d_qk=64, d_v=32, d_mlp=512),
          LayerGene(n_h=4, n_kv=4, d_qk=32, d_v=32, d_mlp=384, attn=False),  # identity: its window means nothing
          LayerGene(n_h=6, n_kv=1, d_qk=48, d_v=48, d_mlp=256),
          LayerGene(n_h=4, n_kv=2, d_qk=32, d_v=64, d_mlp=128))
G = Genome(d_model=256, block_size=4096, vocab_size=1000, layers=LAYERS)
WIN = [[128, 64, 0, 1024]]  # local, (ignored), global, local
ATT = [OP_NAMES.index(n) for n in ("attn_score", "softmax", "attn_value")]


def full() -> PopArrays:
    return PopArrays.from_genomes([G])


def test_no_window_array_means_every_layer_full():
    assert layer_windows(full()) is None
    assert layer_windows(windowed_pop([G], [[0, 64, 0, 0]])) is None  # a window on identity attention is ignored
    np.testing.assert_array_equal(layer_windows(windowed_pop([G], WIN)), [[128, 0, 0, 1024]])


@pytest.mark.parametrize("tokens, context", [(1, 100), (1, 500), (1, 90_000), (256, 256), (2048, 2048)])
def test_each_layer_attends_min_window_context_keys(tokens, context):
    win, ref = layer_ops(windowed_pop([G], WIN), tokens, context), layer_ops(full(), tokens, context)
    for i, w in enumerate((128, 0, 0, 1024)):
        keys = min(w, context) if w else context
        at = layer_ops(full(), tokens, keys)  # the same layer under full attention over `keys` keys
        for f in ("flops", "act_bytes", "kv_read_bytes", "N", "K"):
            np.testing.assert_allclose(getattr(win, f)[0, i], getattr(at, f)[0, i], err_msg=f"{f} layer {i}")
        others = [j for j in range(len(OP_NAMES)) if j not in ATT]  # projections, MLP, norms, KV writes: unchanged
        np.testing.assert_array_equal(win.flops[0, i, others], ref.flops[0, i, others])
        np.testing.assert_array_equal(win.kv_write_bytes[0, i], ref.kv_write_bytes[0, i])
    assert win.total("flops")[0] <= ref.total("flops")[0]
    assert (win.total("kv_read_bytes")[0] < ref.total("kv_read_bytes")[0]) == (context > 128)


def test_windows_at_least_the_context_change_nothing():
    pop = windowed_pop([G], [[4096, 7, 0, 5000]])
    for S, C in ((1, 4096), (4096, 4096), (1, 3000)):
        a, b = layer_ops(pop, S, C), layer_ops(full(), S, C)
        for f in ("flops", "weight_bytes", "act_bytes", "kv_read_bytes", "kv_write_bytes"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    np.testing.assert_array_equal(kv_cache_bytes(pop, 4096), kv_cache_bytes(full(), 4096))


def test_kv_cache_holds_min_window_context_positions_per_layer():
    per_pos = layer_ops(full(), 1, 1).kv_write_bytes.sum(axis=2)[0]  # bytes of one position per layer
    pop = windowed_pop([G], WIN)
    for ctx in (50, 128, 1000, 90_000):
        want = sum(per_pos[i] * (min(w, ctx) if w else ctx) for i, w in enumerate((128, 0, 0, 1024)))
        assert kv_cache_bytes(pop, ctx)[0] == pytest.approx(want)
        assert kv_cache_bytes(pop, ctx, batch=3)[0] == pytest.approx(3 * want)
    assert kv_cache_bytes(pop, 90_000)[0] < kv_cache_bytes(full(), 90_000)[0] / 3


def test_decode_sum_splits_at_each_window_exactly():
    """Σ over decode steps of the per-step cost = n·f(lo) + slope·Σ min(u, window_steps): checked step by step."""
    pop = windowed_pop([G], WIN)
    lo, n = 100, 1500  # the 128 and 1024 windows both fall inside the decode range
    steps = [layer_ops(pop, 1, lo + u) for u in range(n)]
    a, b = steps[0], steps[1]
    cap = window_steps(pop, lo)
    np.testing.assert_array_equal(cap, [[28, np.inf, np.inf, 924]])
    for f in ("flops", "kv_read_bytes", "act_bytes"):
        brute = sum(getattr(t, f) for t in steps)
        slope = getattr(b, f) - getattr(a, f)
        closed = n * getattr(a, f) + slope * sum_capped_steps(cap, n)[:, :, None]
        np.testing.assert_allclose(closed, brute, rtol=1e-12, err_msg=f)


def test_causal_keys_and_flops_per_token_follow_the_window():
    pop = windowed_pop([G], WIN)
    T = 4096
    brute = [np.mean([min(w, t) if w else t for t in range(1, T + 1)]) for w in (128, 0, 0, 1024)]
    np.testing.assert_allclose(causal_keys(pop, T)[0], brute)
    np.testing.assert_allclose(causal_keys(full(), T)[0], [(T + 1) / 2] * 4)
    a, b = model_totals(pop), model_totals(full())
    attn = [2 * g.n_h * (g.d_qk + g.d_v) * k for g, k in zip(LAYERS, brute) if g.attn]
    full_attn = sum(2 * g.n_h * (g.d_qk + g.d_v) * (T + 1) / 2 for g in LAYERS if g.attn)
    assert b["flops_per_token"][0] - a["flops_per_token"][0] == pytest.approx(full_attn - sum(attn))
    np.testing.assert_array_equal(a["params"], b["params"])  # a window adds no weights
    np.testing.assert_array_equal(attended_keys(full(), 77), [[77.0]])  # full populations keep the (P, 1) shape


@pytest.mark.parametrize("lo, hi", [(100, 1599), (2000, 2500), (10, 40), (300, 300)])
def test_decode_sum_from_two_endpoints_equals_the_step_by_step_sum(lo, hi):
    from forge.lm.workload import decode_sum

    pop = windowed_pop([G], WIN)
    brute = sum(layer_ops(pop, 1, c).flops for c in range(lo, hi + 1))
    got = decode_sum(pop, lo, hi, layer_ops(pop, 1, lo).flops, layer_ops(pop, 1, hi).flops)
    np.testing.assert_allclose(got, brute, rtol=1e-12)
