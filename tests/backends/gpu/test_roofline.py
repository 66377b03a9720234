"""Roofline: PLAS closed forms in ideal mode, exact decode summation, memory feasibility, calibration."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from backends.gpu.calibrate import calibrate
from backends.interface import Workload
from backends.gpu.hardware import load_hardware
from backends.gpu.roofline import ALL_OPS, RooflineBackend, sum_max_affine
from backends.registry import build_backend
from forge.spaces.arrays import PopArrays
from forge.runtime.config import data_dir
from forge.genomes.genome import Genome, LayerGene
from forge.genomes.importers import load_genome
from forge.spaces.space import load_space
from forge.lm.workload import OP_NAMES, head_ops, layer_ops

GEMMS = ("q_proj", "k_proj", "v_proj", "o_proj", "mlp_gate", "mlp_up", "mlp_down")


def dense(l=8, d=2048, n_h=16, n_kv=8, d_mlp=5504) -> Genome:
    gene = LayerGene(n_h=n_h, n_kv=n_kv, d_qk=d // n_h, d_v=d // n_h, d_mlp=d_mlp)
    return Genome(d_model=d, block_size=4096, layers=(gene,) * l, mlp="swiglu", norm="rmsnorm")


@settings(max_examples=200, deadline=None)
@given(st.floats(-50, 50), st.floats(-3, 3), st.floats(-50, 50), st.floats(-3, 3), st.integers(1, 300))
def test_sum_max_affine_matches_brute_force(f0, fs, g0, gs, n):
    u = np.arange(n)
    brute = np.maximum(f0 + fs * u, g0 + gs * u).sum()
    got = sum_max_affine(np.array(f0), np.array(fs), np.array(g0), np.array(gs), n)
    assert got == pytest.approx(brute, rel=1e-9, abs=1e-7)


def test_ideal_prefill_reproduces_plas_eq29():
    g, wl = dense(), Workload(prefill=2048, decode=16)
    b = RooflineBackend(hardware="a100-40gb", ideal=True)
    ops = b.evaluate([g], wl).extras[0]["ttft_ops_ms"]
    l, d, gqa, r = 8, 2048, 16 / 8, 5504 / 2048
    xi_f = 4 + 4 / gqa + 6 * r  # Eq. 24
    eq29 = l * 1 * wl.prefill * d**2 * xi_f / 312e12 * 1e3  # Eq. 29, ms
    assert sum(ops[k] for k in GEMMS) == pytest.approx(eq29, rel=1e-9)


def test_ideal_decode_reproduces_plas_eq37():
    g, wl = dense(), Workload(prefill=512, decode=64)
    b = RooflineBackend(hardware="a100-40gb", ideal=True)
    tpot_ops = b.evaluate([g], wl).extras[0]["tpot_ops_ms"]
    layers_ms = sum(tpot_ops.get(k, 0.0) for k in OP_NAMES) * wl.decode
    l, d, gqa, r, bw, bkv, beta = 8, 2048, 2.0, 5504 / 2048, 2, 2, 1555e9
    s_bar = wl.prefill + (wl.decode + 1) / 2  # Eq. 36
    xi_w = 2 + 2 / gqa + 3 * r  # Eq. 25
    eq37 = l * wl.decode / beta * (xi_w * d**2 * bw + 2 * s_bar * d * bkv / gqa) * 1e3  # Eq. 37, ms
    # Eq. 37 neglects activation loads/stores, KV stores and norm weights: add exactly those bytes.
    pop, extra = PopArrays.from_genomes([g]), 0.0
    gemm = np.array([n in GEMMS for n in OP_NAMES])
    for c in range(wl.prefill + 1, wl.prefill + wl.decode + 1):
        t = layer_ops(pop, 1, c, 1, wl.precision)
        extra += t.bytes.sum() - t.weight_bytes[..., gemm].sum() - t.kv_read_bytes.sum()
    assert layers_ms == pytest.approx(eq37 + extra / beta * 1e3, rel=1e-9)
    assert extra / beta * 1e3 < 0.02 * eq37  # the neglected terms are small


def brute_tpot(b: RooflineBackend, g: Genome, wl: Workload) -> float:
    pop, (fs, bs) = PopArrays.from_genomes([g]), b.rates(wl)
    total = 0.0
    for c in range(wl.prefill + 1, wl.prefill + wl.decode + 1):
        for t in (layer_ops(pop, 1, c, wl.batch, wl.precision), head_ops(pop, 1, 1, wl.batch, wl.precision)):
            total += (np.maximum(t.flops / fs, t.bytes / bs) + t.exists * b.launch_us * 1e-6).sum()
        total += pop.active.sum() * b.layer_us * 1e-6
    return total / wl.decode * 1e3


def test_tpot_exact_mean_over_decode_steps_with_bound_crossings():
    hw = dict(load_hardware("orin-nano").__dict__, name="slow", peak_tflops_16=0.004)  # ridge ≈ 0.06 FLOP/B
    b = RooflineBackend(hardware=hw, launch_us=3.0, layer_us=7.0)
    g = load_space("iha-tiny").sample(1, np.random.default_rng(3))[0]
    wl = Workload(prefill=5, decode=40, batch=2)
    assert b.evaluate([g], wl).tpot_ms[0] == pytest.approx(brute_tpot(b, g, wl), rel=1e-9)


def test_population_fast_path_equals_genome_list():
    sp = load_space("iha-paper")
    X = sp.sample_x(20, np.random.default_rng(0))
    b = RooflineBackend(chunk=7)
    fast, slow = b.evaluate(sp.to_arrays(X), Workload()), b.evaluate(sp.decode(X), Workload())
    for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj"):
        np.testing.assert_allclose(getattr(fast, k), getattr(slow, k), rtol=1e-12)
    assert len(fast.extras) == 20 and "ttft_ops_ms" in fast.extras[0]


def test_memory_infeasible_gets_inf_and_reason_and_int8_fits():
    g = load_genome(data_dir() / "archs" / "llama-2-7b.yaml")
    b = build_backend("roofline", hardware="orin-nano")
    r = b.evaluate([g], Workload())
    assert not r.feasible[0] and np.isinf(r.tpot_ms[0]) and "GB" in r.reason[0] and "orin-nano" in r.reason[0]
    r8 = b.evaluate([g], Workload(weight_bits=8, act_bits=8, kv_bits=8))
    assert r8.feasible[0] and np.isfinite(r8.tpot_ms[0]) and r8.reason[0] == ""


def test_more_bandwidth_or_peak_never_slower_and_energy_positive():
    g = load_genome(data_dir() / "archs" / "smollm2-135m.yaml")
    a = RooflineBackend(hardware="a100-40gb").evaluate([g], Workload())
    h = RooflineBackend(hardware="h100-sxm").evaluate([g], Workload())
    assert h.ttft_ms[0] <= a.ttft_ms[0] and h.tpot_ms[0] <= a.tpot_ms[0]
    assert a.energy_per_token_uj[0] > 0
    ops = a.extras[0]["tpot_ops_ms"]
    assert set(ops) <= set(ALL_OPS) and max(ops, key=ops.get) in ("lm_head", "mlp_up", "mlp_gate", "mlp_down")


def test_overheads_add_per_kernel_and_per_layer():
    g = load_genome(data_dir() / "archs" / "smollm2-135m.yaml")
    base = RooflineBackend(launch_us=0.0, layer_us=0.0).evaluate([g], Workload()).tpot_ms[0]
    plus = RooflineBackend(launch_us=0.0, layer_us=100.0).evaluate([g], Workload()).tpot_ms[0]
    assert plus - base == pytest.approx(30 * 0.1, rel=1e-9)  # 30 layers × 100 µs


def test_calibrate_recovers_known_overheads(tmp_path):
    sp, rng = load_space("iha-paper"), np.random.default_rng(7)
    genomes = sp.sample(30, rng)
    wl = Workload(prefill=2048, decode=32)
    truth = dict(eta_compute=0.55, eta_memory=0.7, launch_us=12.0, layer_us=300.0)
    r = RooflineBackend(**truth).evaluate(genomes, wl)
    noise = lambda: np.exp(rng.normal(0, 0.01, len(genomes)))  # noqa: E731
    samples = list(zip(genomes, r.ttft_ms * noise(), r.tpot_ms * noise()))
    cfg = calibrate(samples, workload=wl, out=tmp_path / "fit.yaml")
    for k, v in truth.items():
        assert cfg[k] == pytest.approx(v, rel=0.1), k
    cal = cfg["calibration"]
    assert cal["rms_rel_error_after"] < 0.03 < cal["rms_rel_error_before"]
    import yaml

    loaded = yaml.safe_load((tmp_path / "fit.yaml").read_text())
    again = build_backend(loaded).evaluate(genomes[:3], wl)
    np.testing.assert_allclose(again.tpot_ms, RooflineBackend(**{**truth}).evaluate(genomes[:3], wl).tpot_ms, rtol=0.1)


def test_calibrate_rejects_bad_samples_and_parameters():
    from backends.interface import BackendError

    g = load_genome(data_dir() / "archs" / "gpt2.yaml")
    with pytest.raises(BackendError, match="finite positive"):
        calibrate([(g, float("nan"), 1.0)])
    with pytest.raises(BackendError, match="cannot fit 'peak'"):
        calibrate([(g, 1.0, 1.0)], fit=("peak",))
    with pytest.raises(BackendError, match="no samples"):
        calibrate([])


def test_tpot_exact_for_very_wide_heads_too():
    g = Genome(d_model=512, block_size=256, vocab_size=1000, layers=(LayerGene(260, 4, 8, 8, 256), LayerGene(2, 1, 64, 64, 256)))
    b, wl = RooflineBackend(launch_us=2.0), Workload(prefill=7, decode=9)
    assert b.evaluate([g], wl).tpot_ms[0] == pytest.approx(brute_tpot(b, g, wl), rel=1e-9)
