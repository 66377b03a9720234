"""α/β least-squares fit from a backend's decode steps, and the roofline-afd wrapper's extras."""
from __future__ import annotations

import numpy as np
import pytest

from backends.interface import BackendError, CostTable, Workload
from backends.registry import build_backend
from backends.serving.afd import AfdWorkload
from backends.serving.afd_backend import AfdBackend, build_inner
from backends.serving.fit import ATTN_OPS, FFN_OPS, Link, comm_coefficients, fit_afd
from forge.spaces.arrays import PopArrays
from forge.cli import resolve_arch

GRID = {"batch_scale": [0.5, 1, 2], "load_scale": [0.5, 1, 1.5], "ffn_scale": [1, 4, 16]}
WL = AfdWorkload(B=32, mu_P=128, mu_D=128, N=1000)


class LinearFake:
    """Per-layer linear costs: layer l's attention a_l·(B·c) + b_l, FFN f_l·B + g_l, split over its operators."""

    name, default_bits = "fake", (16, 16, 16)

    def __init__(self, a, b, f, g):
        self.a, self.b, self.f, self.g = map(np.asarray, (a, b, f, g))

    def evaluate(self, pop, wl: Workload) -> CostTable:
        c, B = wl.prefill + 1, wl.batch
        att = float((self.a * B * c + self.b).sum())  # a step runs every layer once: the sides sum
        ffn = float((self.f * B + self.g).sum())
        ops = {**{k: att / len(ATTN_OPS) for k in ATTN_OPS}, **{k: ffn / len(FFN_OPS) for k in FFN_OPS}}
        n = pop.P
        one = np.ones(n)
        return CostTable(one, one * (att + ffn), one, np.ones(n, bool), [""] * n, [{"tpot_ops_ms": dict(ops)} for _ in range(n)])


def test_fit_recovers_summed_per_layer_coefficients():
    fake = LinearFake(a=[1e-5, 3e-5, 0.0], b=[0.2, 0.1, 0.0], f=[2e-3, 1e-3, 4e-3], g=[0.3, 0.3, 0.4])
    pop = PopArrays.from_genomes([resolve_arch("smollm2-135m")])
    p, q = fit_afd(fake, pop, WL, (16, 16, 16), Link(), GRID)
    assert float(p.alpha_A[0]) == pytest.approx(4e-5) and float(p.beta_A[0]) == pytest.approx(0.3)
    assert float(p.alpha_F[0]) == pytest.approx(7e-3) and float(p.beta_F[0]) == pytest.approx(1.0)
    assert q["r2_attention"][0] == pytest.approx(1.0) and q["r2_ffn"][0] == pytest.approx(1.0)


def test_roofline_fit_is_linear_and_matches_appendix_b_slope():
    """Paper 001 Eq. 26: α_A = KV bytes per token / effective bandwidth; the roofline's fit lands near it."""
    g = resolve_arch("smollm2-135m")
    b = build_inner("roofline")
    p, q = fit_afd(b, PopArrays.from_genomes([g]), WL, (16, 16, 16), Link(), GRID)
    assert q["r2_attention"][0] > 0.99 and q["r2_ffn"][0] > 0.98
    kv_per_token = 30 * 2 * 3 * 64 * 2  # 30 layers, K and V, 3 KV heads of 64, bf16
    eq26_ms = kv_per_token / (b.hw.mem_bw_gbs * 1e9 * b.eta_memory) * 1e3
    assert float(p.alpha_A[0]) == pytest.approx(eq26_ms, rel=0.25)


def test_comm_is_one_round_trip_per_layer():
    pop = PopArrays.from_genomes([resolve_arch("smollm2-135m")])
    a, b = comm_coefficients(pop, Link(gbs=100.0, latency_us=5.0), 16)
    assert float(a[0]) == pytest.approx(2 * 30 * 576 * 2 / 100e9 * 1e3) and float(b[0]) == pytest.approx(2 * 30 * 5e-3)


def test_afd_backend_keeps_inner_costs_and_adds_extras():
    from forge.spaces.space import load_space

    pop = load_space("iha-tiny").sample(5, np.random.default_rng(0))
    wl = Workload(prefill=64, decode=16)
    afd = build_backend("roofline-afd", B=16, grid=GRID)
    t, ref = afd.evaluate(pop, wl), build_backend("roofline").evaluate(pop, wl)
    assert np.allclose(t.ttft_ms, ref.ttft_ms) and np.allclose(t.tpot_ms, ref.tpot_ms)
    r, thr = t.objective("r_star"), t.objective("throughput_per_instance")
    assert np.all(r > 0) and np.all(np.isfinite(r)) and np.all(thr > 0)
    assert np.allclose(t.objective("afd_ms_per_token_instance"), 1e3 / thr)


def test_backend_without_breakdown_is_a_clear_error():
    class NoOps(LinearFake):
        def evaluate(self, pop, wl):
            t = super().evaluate(pop, wl)
            t.extras = [{} for _ in t.extras]
            return t

    pop = PopArrays.from_genomes([resolve_arch("smollm2-135m")])
    with pytest.raises(BackendError, match="tpot_ops_ms"):
        fit_afd(NoOps([1e-5], [0.1], [1e-3], [0.1]), pop, WL, (16, 16, 16), Link(), GRID)
    with pytest.raises(BackendError, match="head_side"):
        AfdBackend(inner="roofline", head_side="middle").evaluate(pop, Workload())


def test_heterogeneous_layers_add_up():
    """Identity attention in half the layers removes their KV reads from α_A and their attention
    operators from β_A; the FFN side is unchanged (per-layer costs sum over the step)."""
    import dataclasses

    g = resolve_arch("smollm2-135m")
    half = dataclasses.replace(g, layers=tuple(dataclasses.replace(x, attn=(i % 2 == 0)) for i, x in enumerate(g.layers)))
    b = build_inner("roofline")
    pop = PopArrays.from_genomes([g, half])
    p, q = fit_afd(b, pop, WL, (16, 16, 16), Link(), GRID)
    a = np.asarray(p.alpha_A)
    assert a[1] == pytest.approx(a[0] / 2, rel=0.05) and float(p.beta_A[1]) < float(p.beta_A[0])
    assert float(p.alpha_F[1]) == pytest.approx(float(p.alpha_F[0]), rel=1e-6)
    assert np.all(q["r2_attention"] > 0.99)
