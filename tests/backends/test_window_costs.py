"""Every backend family prices a sliding-window genome through `forge.lm.workload` and its helpers: cheaper KV
and attention than full attention at a long context, equal when the window covers the context."""
from __future__ import annotations

import numpy as np
import pytest

from backends.gpu.roofline import RooflineBackend
from backends.interface import Workload
from backends.registry import build_backend
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import head_ops, kv_cache_bytes, layer_ops
from tests.forge.lm.windows import windowed_pop

LAYERS = tuple(LayerGene(n_h=8, n_kv=2, d_qk=64, d_v=64, d_mlp=1536) for _ in range(6))
G = Genome(d_model=512, block_size=4096, vocab_size=32000, layers=LAYERS, mlp="swiglu")
LOCAL = [256, 256, 0, 256, 256, 0]  # Gemma-3-like: local layers around global ones


@pytest.fixture(autouse=True)
def carry_windows(monkeypatch):
    """Until the gene registry merges, PopArrays has no `window` field: keep an attached one through the
    copies a backend makes (masked, take, with_bytes, the roofline's compaction). A no-op afterwards."""
    if isinstance(getattr(PopArrays.from_genomes([G]), "genes", None), dict):
        return

    def wrap(name, pick):
        orig = getattr(PopArrays, name)

        def method(self, *a, **k):
            out = orig(self, *a, **k)
            if "window" in self.__dict__:
                out.window = pick(self, *a)
            return out
        monkeypatch.setattr(PopArrays, name, method)

    wrap("masked", lambda s: s.window)
    wrap("take", lambda s, idx: s.window[idx])
    wrap("with_bytes", lambda s: s.window)
    orig_compact = RooflineBackend.compact

    def compact(pop):
        out = orig_compact(pop)
        if "window" in pop.__dict__:
            order = np.argsort(~pop.active.astype(bool), axis=1, kind="stable")
            out.window = np.take_along_axis(pop.window, order, axis=1)[:, :out.L]
        return out
    monkeypatch.setattr(RooflineBackend, "compact", staticmethod(compact))


def costs(backend, windows, wl):
    c = backend.evaluate(windowed_pop([G], [windows]), wl)
    return np.array([c.ttft_ms[0], c.tpot_ms[0], c.energy_per_token_uj[0]]), c.extras[0]


FAMILIES = [("roofline", Workload(prefill=4096, decode=256), "memory_gb"),
            ("gemmini", Workload(prefill=1024, decode=64), "decode_dram_mb_per_token"),
            ("rdxe", Workload(prefill=1024, decode=64), None),
            ("plena", Workload(prefill=90000, decode=8000, batch="max"), "batch")]


@pytest.mark.parametrize("name, wl, kv_key", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_windows_cost_less_at_long_context_and_the_same_when_they_cover_it(name, wl, kv_key):
    b = build_backend(name)
    full, e_full = costs(b, [0] * 6, wl)
    local, e_local = costs(b, LOCAL, wl)
    wide, _ = costs(b, [wl.prefill + wl.decode] * 6, wl)
    np.testing.assert_array_equal(wide, full)  # w >= every context: full attention, to the bit
    assert (local[:2] < full[:2]).all(), (name, local, full)  # TTFT and TPOT: fewer keys per query
    assert local[2] <= full[2]
    if kv_key == "batch":  # batch=max: the bounded KV cache fits more sequences
        assert e_local["batch"] > e_full["batch"]
    elif kv_key is not None:
        assert e_local[kv_key] < e_full[kv_key]


def test_rdxe_packs_kappa_times_min_window_context():
    from backends.rdxe.profile import profile_population
    from backends.rdxe.ring import RingConstants
    from forge.lm.workload import Precision

    pop = windowed_pop([G], [LOCAL])
    prof = profile_population(pop, 1024, 64, Precision(), RingConstants())[0]
    assert [k / prof.kappa[0] for k in prof.kT] == [256, 256, 1088, 256, 256, 1088]


def test_roofline_decode_sum_is_exact_across_a_window_boundary():
    """Ideal roofline TPOT = the mean over decode steps of Σ_ops max(FLOPs/peak, bytes/bandwidth), step by step."""
    b = build_backend("roofline", ideal=True)
    wl = Workload(prefill=100, decode=300)  # the 256 windows start binding at step 157
    pop = windowed_pop([G], [LOCAL])
    got = b.evaluate(pop, wl).tpot_ms[0]
    fs, bs = b.rates(wl)
    steps = []
    for c in range(wl.prefill + 1, wl.prefill + wl.decode + 1):
        t, h = layer_ops(pop, 1, c, 1, wl.precision), head_ops(pop, 1, 1, 1, wl.precision)
        steps.append(np.maximum(t.flops / fs, t.bytes / bs).sum() + np.maximum(h.flops / fs, h.bytes / bs).sum())
    assert got == pytest.approx(np.mean(steps) * 1e3, rel=1e-12)
    assert kv_cache_bytes(pop, 400)[0] < kv_cache_bytes(PopArrays.from_genomes([G]), 400)[0]
