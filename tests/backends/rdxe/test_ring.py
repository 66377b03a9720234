"""Ring simulation: chip geometry, area anchor, cycle bounds, TTFT/TPOT/energy composition."""
from __future__ import annotations

import numpy as np
import pytest

from backends.rdxe.profile import profile_population
from backends.rdxe.ring import (RingConstants, chip_area_mm2, chip_leak_pj_per_cycle, decode_bounds, layer_cycles,
                                mean_ceil, simulate, split_cores, vector_elems)
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import Precision

K = RingConstants()
KB = 1024


def _profile(n_layers=4, d=256, prefill=64, decode=32):
    layers = tuple(LayerGene(4, 2, 64, 64, 512 + 256 * (i % 2)) for i in range(n_layers))
    g = Genome(d_model=d, block_size=512, layers=layers, vocab_size=1000)
    return profile_population(PopArrays.from_genomes([g]), prefill, decode, Precision(1.0, 1.0, 1.0), K)[0]


def test_power_of_two_split_has_more_cores_than_tiles():
    cores = 2 ** np.arange(0, 13)
    t, c = split_cores(cores)
    assert (t * c == cores).all() and (c >= t).all()
    assert (t & (t - 1) == 0).all() and (c & (c - 1) == 0).all()
    assert split_cores(np.array([128])) == (8, 16)  # the DXE reference: 8 tiles x 16 cores


def test_area_is_anchored_to_the_dxe_reference():
    ref = (2048 * K.mac_um2 + 128 * K.acc_um2_per_core + 128 * 32 * KB * K.sram_um2_per_byte
           + 8 * K.hbuf_um2_per_tile + K.gbuf_um2_per_chip) * 1e-6
    assert chip_area_mm2(np.array([128]), 16, 24 * KB, 8 * KB, K)[0] == pytest.approx(ref)
    assert 3.5 < ref < 4.5  # 4 MB of SRAM dominates: about 4 mm² in 16 nm
    a = chip_area_mm2(np.array([128, 256]), 16, 24 * KB, 8 * KB, K)
    assert a[1] > a[0] and chip_area_mm2(np.array([128]), 64, 24 * KB, 8 * KB, K)[0] > a[0]
    leak = chip_leak_pj_per_cycle(np.array([128, 256]), 24 * KB, 8 * KB, K)
    assert leak[1] > leak[0] > 0


def test_layer_cycles_respect_the_mac_bound_and_shrink_with_more_macs():
    p = _profile()
    cores, n_mac = np.array([16, 64, 256, 64]), np.array([16, 16, 16, 64])
    cyc = layer_cycles(p, n_mac, cores, (65, 96), K)
    bound = p.macs_decode[None] / (cores * n_mac)[:, None]
    assert (cyc >= bound - 1e-9).all()  # utilization <= 1
    assert (np.diff(cyc[:3], axis=0) <= 0).all() and (cyc[3] <= cyc[1]).all()


def test_mean_ceil_matches_a_direct_mean():
    assert mean_ceil(4, 1, 8) == pytest.approx(np.mean([1, 1, 1, 1, 2, 2, 2, 2]))
    assert mean_ceil(1, 3, 5) == pytest.approx(4.0)


def _sim(p, parts, cores=64, n_mac=16, prefill=64, decode=32, k=K):
    G = len(parts)
    return simulate(p, np.full(G, n_mac), np.full(G, cores), np.full(G, 24 * KB), 8 * KB, parts, prefill, decode, k)


def test_tpot_is_every_stage_plus_every_hop():
    p = _profile()
    one, four = _sim(p, [(4,), (1, 2, 3, 4)])["tpot_ms"]
    hop_cycles = K.link_latency_cycles + np.ceil(p.hop_bytes / K.link_bytes_per_cycle)
    assert four - one == pytest.approx(3 * hop_cycles / (K.clock_mhz * 1e3))


def test_pipelining_shortens_prefill_and_ttft_composes():
    p = _profile()
    s = _sim(p, [(4,), (2, 4), (1, 2, 3, 4)])
    assert s["ttft_ms"][0] > s["ttft_ms"][1] > s["ttft_ms"][2]
    pre = layer_cycles(p, np.array([16]), np.array([64]), (1, 64), K)[0]
    hop = K.link_latency_cycles + np.ceil(p.hop_bytes / K.link_bytes_per_cycle)
    expect = pre.sum() + 2 * hop + 63 * max(pre[:2].sum(), pre[2:].sum())
    assert s["ttft_ms"][1] == pytest.approx(expect / (K.clock_mhz * 1e3))
    assert (s["ttft_ms"] > s["tpot_ms"]).all()


def test_energy_adds_links_and_leakage_over_the_token_time():
    p = _profile()
    s = _sim(p, [(4,), (1, 2, 3, 4)])
    no_leak = _sim(p, [(4,), (1, 2, 3, 4)], k=RingConstants(leak_sram_pj_per_byte=0, leak_acc_pj_per_core=0,
                                                            leak_hbuf_pj_per_tile=0, leak_gbuf_pj_per_chip=0,
                                                            leak_mac_pj=0))
    links = np.array([1, 4]) * p.hop_bytes * 8 * K.link_pj_per_bit
    assert no_leak["energy_per_token_uj"] * 1e6 == pytest.approx(p.e_decode_pj.sum() + links)
    leak = (s["energy_per_token_uj"] - no_leak["energy_per_token_uj"]) * 1e6
    per_cycle = chip_leak_pj_per_cycle(np.array([64]), 24 * KB, 8 * KB, K, n_mac=16)[0]  # MACs leak too
    tpot_cycles = s["tpot_ms"] * K.clock_mhz * 1e3
    assert leak == pytest.approx(np.array([1, 4]) * per_cycle * tpot_cycles)
    assert (s["area_mm2"] == np.array([1, 4]) * chip_area_mm2(np.array([64]), 16, 24 * KB, 8 * KB, K)).all()
    assert ((0 < s["mac_utilization"]) & (s["mac_utilization"] <= 1)).all()


def test_a_gemv_costs_at_least_its_weight_bytes_over_the_ports_and_more_macs_do_not_buy_decode():
    p = _profile()
    cores = np.array([16, 64, 256, 16, 64, 256])
    n_mac = np.array([16, 16, 16, 64, 64, 64])
    cyc = layer_cycles(p, n_mac, cores, (65, 96), K)
    w_bytes = (p.proj_K * p.proj_N).sum(-1)  # int8: one byte per weight
    assert (cyc >= w_bytes[None] / (K.wmem_port_bytes * cores[:, None]) - 1e-9).all()
    assert (cyc[3:].sum(1) > 0.5 * cyc[:3].sum(1)).all()  # 4x the MACs, not even 2x faster: port-bound
    wide = layer_cycles(p, n_mac, cores, (65, 96), RingConstants(wmem_port_bytes=64.0))
    assert (wide <= cyc).all() and (wide < cyc).any()


def test_vector_unit_is_overlapped_or_serial_by_config():
    p = _profile()
    args = (p, np.array([16]), np.array([64]), (65, 96))
    over, ser = layer_cycles(*args, K), layer_cycles(*args, RingConstants(vector_overlap=0.0))
    assert (ser >= over).all() and (ser > over).any()
    slow = layer_cycles(*args, RingConstants(vector_overlap=0.0, vector_elems_per_cycle=1.0))
    fast = layer_cycles(*args, RingConstants(vector_overlap=0.0, vector_elems_per_cycle=1e12))
    assert slow[0] - fast[0] == pytest.approx(vector_elems(p, (65 + 96) / 2), rel=1e-9)


def test_more_macs_cost_area_and_leakage_and_prefill_shares_weight_reads():
    p = _profile()
    s16, s64 = _sim(p, [(2, 4)], n_mac=16), _sim(p, [(2, 4)], n_mac=64)
    assert s64["area_mm2"][0] > s16["area_mm2"][0]
    leak = [chip_leak_pj_per_cycle(np.array([64]), 24 * KB, 8 * KB, K, n_mac=m)[0] for m in (16, 64)]
    assert leak[1] - leak[0] == pytest.approx(64 * 48 * K.leak_mac_pj)  # every MAC leaks
    assert s64["tpot_ms"][0] > 0.5 * s16["tpot_ms"][0]  # ... while decode is port-bound
    args = (p, np.array([16]), np.array([64]), (1, 64))
    assert (layer_cycles(*args, K, rows=64) <= layer_cycles(*args, K)).all()


def test_decode_bounds_bracket_tpot():
    p = _profile()
    parts = [(4,), (2, 4), (1, 2, 3, 4)]
    for cores, n_mac in ((16, 16), (64, 32), (256, 64)):
        s = _sim(p, parts, cores=cores, n_mac=n_mac)
        lo, hi = decode_bounds(p, np.full(3, n_mac), np.full(3, cores), s["n_chips"], 64, 32, K)
        assert (lo <= s["tpot_ms"] + 1e-12).all() and (s["tpot_ms"] <= hi + 1e-12).all() and (lo < hi).all()
