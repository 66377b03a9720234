"""Which other backends follow a genome's own precision genes through the analyzer's per-genome bytes.

Each test compares a genome carrying formats with the same network under a workload of the same
bytes, and a narrower format with a wider one. The systolic mapper's operand widths and rDXE's
profile cache key and inter-chip hop bytes follow the genome's own bytes (tests below). What does
NOT follow yet is listed in README "Long context and precision".
"""
from __future__ import annotations

import pytest

from backends.interface import CostTable, Workload
from backends.rdxe.profile import pop_key_rows, profile_population
from backends.rdxe.ring import RingConstants
from backends.registry import build_backend
from forge.arrays import PopArrays
from forge.genome import Genome, LayerGene


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


def test_rdxe_hop_bytes_follow_the_genome_activation_format():
    wl = Workload(prefill=64, decode=16, weight_bits=8, act_bits=8, kv_bits=8)
    pop = PopArrays.from_genomes([_g("int8/bf16/int8"), _g()])  # d_model = 256
    assert [p.hop_bytes for p in profile_population(pop, 64, 16, wl.precision, RingConstants())] == [512, 256]
    own = build_backend("rdxe").evaluate([_g("int8/bf16/int8")], wl)
    same = build_backend("rdxe").evaluate([_g()], Workload(prefill=64, decode=16, weight_bits=8, act_bits=16, kv_bits=8))
    assert _row(own, 0) == _row(same, 0)
