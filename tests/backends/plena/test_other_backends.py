"""Which other backends follow a genome's own precision genes through the analyzer's per-genome bytes.

Each test compares a genome carrying formats with the same network under a workload of the same
bytes, and a narrower format with a wider one. The systolic mapper's operand widths and rDXE's
profile cache key and inter-chip hop bytes follow the genome's own bytes; the roofline's bytes, memory
check, decode slopes and peak FLOP/s follow, and it supports `batch=max` (tests below). What does NOT
follow yet is listed in README "Long context and precision".
"""
from __future__ import annotations

import numpy as np
import pytest

from backends.gpu.roofline import context_slopes
from backends.interface import CostTable, Workload
from backends.rdxe.profile import pop_key_rows, profile_population
from backends.rdxe.ring import RingConstants
from backends.registry import build_backend, resolve_workload
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import analyze, weight_storage


def _g(prec=None, d=256, layers=4, d_mlp=1024) -> Genome:
    return Genome(d_model=d, block_size=1024, vocab_size=2000, precision=prec,
                  layers=tuple(LayerGene(4, 2, 64, 64, d_mlp) for _ in range(layers)))


def _row(t: CostTable, i: int) -> tuple:
    """Costs and extras of row i; rDXE's extras["precision"] echoes the workload's bits, so it is left out."""
    return t.ttft_ms[i], t.tpot_ms[i], t.energy_per_token_uj[i], {k: v for k, v in t.extras[i].items() if k != "precision"}


def test_roofline_follows_weight_and_activation_formats():
    b = build_backend("roofline")
    own = b.evaluate([_g("int8/bf16/bf16")], Workload(weight_bits=16))
    same = b.evaluate([_g()], Workload(weight_bits=8))
    assert own.ttft_ms[0] == pytest.approx(same.ttft_ms[0], rel=1e-12)
    assert own.tpot_ms[0] == pytest.approx(same.tpot_ms[0], rel=1e-12)
    big = _g(d=2048, layers=8, d_mlp=8192)
    t16 = b.evaluate([big], Workload(decode=4)).tpot_ms[0]
    t4 = b.evaluate([big.with_precision("int4/bf16/bf16")], Workload(decode=4)).tpot_ms[0]
    assert t4 < t16  # weight-streaming decode gets faster with the genome's int4 weights


def test_systolic_weight_residency_follows_the_genome_weight_format():
    b = build_backend("dxe")  # 3 MB of resident weight memory
    g = _g(d=256, layers=2, d_mlp=1024)  # 1.95 M weights: 3.9 MB at bf16, 1.95 MB at int8
    wl = Workload(prefill=64, decode=8, weight_bits=16, act_bits=8, kv_bits=8)
    plain, small = b.evaluate([g], wl).extras[0], b.evaluate([g.with_precision("int8/int8/int8")], wl).extras[0]
    assert not plain["weights_resident"] and small["weights_resident"]


def test_rdxe_follows_weight_and_kv_formats():
    wl8 = Workload(prefill=64, decode=16, weight_bits=8, act_bits=8, kv_bits=8)
    own = build_backend("rdxe").evaluate([_g("int4/int8/int4")], wl8)
    same = build_backend("rdxe").evaluate([_g()], Workload(prefill=64, decode=16, weight_bits=4, act_bits=8, kv_bits=4))
    for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj"):
        assert getattr(own, k)[0] == pytest.approx(getattr(same, k)[0], rel=1e-9)
    assert own.energy_per_token_uj[0] != pytest.approx(build_backend("rdxe").evaluate([_g()], wl8).energy_per_token_uj[0])


def test_systolic_mapper_operand_widths_follow_the_genome_precision():
    b = build_backend("gemmini")  # 256 KB of scratchpad: the weights of this network stream from DRAM
    g = _g(d=512, layers=4, d_mlp=2048)
    wl = Workload(prefill=64, decode=8, weight_bits=16, act_bits=8, kv_bits=8)
    mixed = b.evaluate([g.with_precision("int8/int8/int8"), g.with_precision("int4/int8/int8"), g], wl)
    for i, bits in enumerate((8, 4)):  # the genome's formats override the workload's 16-bit weights
        same = b.evaluate([g], Workload(prefill=64, decode=8, weight_bits=bits, act_bits=8, kv_bits=8))
        assert _row(mixed, i) == _row(same, 0)  # mapper rows, DRAM bytes and chosen mappings alike
    assert _row(mixed, 2) == _row(b.evaluate([g], wl), 0)  # no genes: the workload's bytes, as before
    e8, e4 = mixed.extras[0], mixed.extras[1]
    assert not e8["weights_resident"] and not e4["weights_resident"]
    assert e4["decode_dram_mb_per_token"] < e8["decode_dram_mb_per_token"]
    assert mixed.energy_per_token_uj[1] < mixed.energy_per_token_uj[0]
    assert mixed.tpot_ms[1] < mixed.tpot_ms[0]


def test_rdxe_caches_tell_apart_the_same_network_at_two_formats():
    g8, g4 = _g("int8/int8/int8"), _g("int4/int8/int8")
    wl = Workload(prefill=64, decode=16, weight_bits=8, act_bits=8, kv_bits=8)
    ref = [build_backend("rdxe").evaluate([g], wl) for g in (g8, g4)]  # one fresh backend per genome
    assert ref[1].energy_per_token_uj[0] < ref[0].energy_per_token_uj[0]
    pop = PopArrays.from_genomes([g8, g4])
    assert len(set(pop_key_rows(pop))) == 2
    w8, w4 = (sum(p.w) for p in profile_population(pop, 64, 16, wl.precision, RingConstants()))
    assert w4 < w8
    both = build_backend("rdxe").evaluate(pop, wl)  # one population: both rows in one fill
    b = build_backend("rdxe")
    seq = [b.evaluate(PopArrays.from_genomes([g]), wl) for g in (g8, g4)]  # two calls on one backend's caches
    ids = [b.evaluate([g], wl) for g in (g8, g4)]  # the genome-id row key after the PopArrays rows
    for i in range(2):
        assert _row(both, i) == _row(ref[i], 0) == _row(seq[i], 0) == _row(ids[i], 0)
    assert [both.extras[i]["precision"]["weight_bits"] for i in range(2)] == [8, 4]  # the genome's, not the workload's


def test_rdxe_hop_bytes_follow_the_genome_activation_format():
    wl = Workload(prefill=64, decode=16, weight_bits=8, act_bits=8, kv_bits=8)
    pop = PopArrays.from_genomes([_g("int8/bf16/int8"), _g()])  # d_model = 256
    assert [p.hop_bytes for p in profile_population(pop, 64, 16, wl.precision, RingConstants())] == [512, 256]
    own = build_backend("rdxe").evaluate([_g("int8/bf16/int8")], wl)
    same = build_backend("rdxe").evaluate([_g()], Workload(prefill=64, decode=16, weight_bits=8, act_bits=16, kv_bits=8))
    assert _row(own, 0) == _row(same, 0)


# ------------------------------------------------------------------------------------------- roofline
def _llama(prec=None) -> Genome:
    from forge.runtime.config import data_dir
    from forge.genomes.importers import load_genome

    g = load_genome(data_dir() / "archs" / "llama-2-7b.yaml")
    return g.with_precision(prec) if prec else g


def test_roofline_int4_weights_shrink_memory_and_memory_bound_decode():
    b = build_backend("roofline", hardware="orin-nano")  # 8 GB: llama-2-7b fits only with 4-bit weights
    wl = Workload(prefill=1024, decode=16)
    t = b.evaluate([_llama(), _llama("int4/bf16/bf16")], wl)
    w16, w4 = (weight_storage(PopArrays.from_genomes([g]), wl.precision)[0] for g in (_llama(), _llama("int4/bf16/bf16")))
    assert w4 == pytest.approx(w16 / 4, rel=1e-12)  # the memory check counts the genome's own weight bytes
    assert not t.feasible[0] and t.reason[0].startswith(f"needs {(w16 + 1040 * 32 * 2 * 4096 * 2) / 1e9:.2f} GB") and t.feasible[1]
    assert t.extras[1]["memory_gb"] < t.extras[0]["memory_gb"] / 3.5
    agx = build_backend("roofline", hardware="orin-agx")  # 64 GB: both fit
    t16, t4 = (agx.evaluate([_llama(p)], wl).row(0) for p in (None, "int4/bf16/bf16"))
    assert t4["tpot_ms"] < 0.35 * t16["tpot_ms"]  # batch-1 decode streams the weights: ~4× fewer bytes
    assert t4["ttft_ms"] == pytest.approx(t16["ttft_ms"], rel=0.05)  # W4A16 prefill: the same bf16 compute peak


def test_roofline_genome_without_genes_equals_the_workload_bits_path():
    b = build_backend("roofline")
    g = _g(d=512, layers=6, d_mlp=2048)
    cases = (("int8/int8/int8", Workload(prefill=2048, decode=64, weight_bits=8, act_bits=8, kv_bits=8)),
             ("bf16/bf16/int4", Workload(prefill=2048, decode=64, kv_bits=4)),
             ("mxint4/bf16/mxint8", Workload(prefill=2048, decode=64, weight_format="mxint4", kv_format="mxint8")))
    base = Workload(prefill=2048, decode=64)
    for prec, same_wl in cases:  # genes override the workload's bf16; the plain row keeps the workload's
        mixed = b.evaluate([g.with_precision(prec), g], base)
        same, plain = b.evaluate([g], same_wl), b.evaluate([g], base)
        for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj"):
            assert getattr(mixed, k)[0] == pytest.approx(getattr(same, k)[0], rel=1e-12), (prec, k)
            assert getattr(mixed, k)[1] == pytest.approx(getattr(plain, k)[0], rel=1e-12)  # no genes: workload bits
        assert mixed.extras[0]["memory_gb"] == pytest.approx(same.extras[0]["memory_gb"], rel=1e-12)
        assert mixed.extras[1]["memory_gb"] == plain.extras[0]["memory_gb"]
        pop = PopArrays.from_genomes([g.with_precision(prec), g])  # genes: the direct slopes on the population
        for own, fast in zip(context_slopes(pop, 2049, base), context_slopes(PopArrays.from_genomes([g]), 2049, base)):
            assert np.array_equal(own[1], fast[0])  # ... equal the deduplicated fast path's for the plain genome
    own = b.evaluate([g.with_precision("bf16/bf16/int4")], base).tpot_ms[0]
    assert own < b.evaluate([g], base).tpot_ms[0]  # the context-growing KV reads follow the genome's KV bytes


def test_roofline_peak_flops_per_genome():
    b = build_backend("roofline", hardware="h100-sxm")
    pop = PopArrays.from_genomes([_g(p) for p in (None, "int8/int8/int8", "int4/bf16/bf16", "mxint4/mxint8/bf16", "int4/int4/int4")])
    fs, _ = b.rates(Workload(), pop)
    p16, p8 = 989e12 * b.eta_compute, 1979e12 * b.eta_compute  # h100-sxm preset, dense
    assert fs.tolist() == pytest.approx([p16, p8, p16, p8, p8], rel=1e-12)
    assert b.rates(Workload(weight_bits=8, act_bits=8), pop)[0][0] == pytest.approx(p8)  # no genes: workload bits
    wl = Workload(prefill=4096, decode=4)  # a compute-bound prefill runs ~2× faster on the int8 peak
    t = b.evaluate([_g(d=2048, d_mlp=8192), _g("int8/int8/int8", d=2048, d_mlp=8192)], wl)
    assert t.ttft_ms[1] < 0.6 * t.ttft_ms[0]


def _brute_batch(g: Genome, ctx: int, budget: float, wb: float, kvb: float) -> int:
    """Largest batch by counting up, from parameters and per-layer KV widths (independent of the analyzer)."""
    weights = analyze(g)["params"] * wb
    kv_seq = sum(l.n_kv * (l.d_qk + l.d_v) for l in g.layers if l.active and l.attn) * kvb * ctx
    b = 0
    while weights + (b + 1) * kv_seq <= budget:
        b += 1
    return b


def test_roofline_batch_max_matches_a_brute_force_capacity_check():
    b = build_backend("roofline", hardware="a100-40gb")
    wl = Workload(prefill=7000, decode=2000, batch="max")
    gs = [_llama(), _llama("int4/bf16/int4"), _llama("bf16/bf16/int8"), _g(d=1024, layers=12, d_mlp=4096),
          _llama().with_precision("fp32/fp32/fp32")]  # the last: 27 GB of weights + one 9k-token KV cache > 36 GB
    t = b.evaluate(gs, wl)
    budget = 40e9 * 0.9
    want = [_brute_batch(g, 9000, budget, *((g.precision.bytes()[0], g.precision.bytes()[2]) if g.precision else (2.0, 2.0)))
            for g in gs]
    assert [e["batch"] for e in t.extras] == want and want[0] >= 1 and want[1] > 4 * want[0] and want[4] == 0
    assert list(t.feasible) == [True] * 4 + [False] and t.reason[4].startswith("batch 1 does not fit")
    for i in range(4):  # the same numbers as a fixed batch of that size, which fits and one more does not
        fixed = b.evaluate([gs[i]], Workload(prefill=7000, decode=2000, batch=want[i]))
        assert fixed.tpot_ms[0] == pytest.approx(t.tpot_ms[i], rel=1e-12) and fixed.feasible[0]
        assert t.extras[i]["memory_gb"] <= budget / 1e9
        assert not b.evaluate([gs[i]], Workload(prefill=7000, decode=2000, batch=want[i] + 1)).feasible[0]
    assert resolve_workload({"prefill": 7000, "decode": 2000, "batch": "max"}, b).batch_max
