"""PLENA backend: Table XIII area, Table III constraints, batch=max, exact decode sums, precision genes, co-search."""
from __future__ import annotations

import math

import numpy as np
import pytest

from backends.interface import Workload
from backends.plena import PlenaBackend
from backends.plena.array import Shape, matrix_area_mm2, peak_tops, sum_ceil
from backends.registry import build_backend, resolve_workload
from forge.spaces.arrays import PopArrays
from forge.cli import resolve_arch
from forge.genomes.genome import Genome, LayerGene
from forge.lm.workload import kv_cache_bytes, max_batch, weight_storage


def _g(prec=None, n_kv=2, layers=3) -> Genome:
    return Genome(d_model=256, block_size=4096, vocab_size=1000, mlp="swiglu", precision=prec,
                  layers=tuple(LayerGene(8, n_kv, 32, 32, 512) for _ in range(layers)))


def _small(**kw) -> PlenaBackend:
    system = {"cores": 1, "hbm_gb": 0.05, "hbm_gbs": 512.0, **kw.pop("system", {})}
    return PlenaBackend(shape=kw.pop("shape", {"blen": 4, "mlen": 64, "vlen": 64, "hlen": 32}), system=system, **kw)


def test_table_xiii_peak_area_and_density_from_the_area_model():
    s = Shape(blen=4, mlen=1024, vlen=1024, hlen=128)  # 4096 MACs as 4 × 1024
    area = matrix_area_mm2(s)
    assert math.floor(area * 1000) / 1000 == 0.237  # Table XIII: 0.237 mm²
    assert round(peak_tops(s) / area, 2) == 34.49  # Table XIII: 34.49 TOPS/mm² at 1 GHz
    square = Shape(64, 64, 64, 64)
    assert square.macs == s.macs and matrix_area_mm2(square) < area  # Fig. 12: flattening costs some area


@pytest.mark.parametrize("shape,needle", [({"blen": 8, "mlen": 60, "vlen": 64, "hlen": 8}, "MLEN % BLEN"),
                                          ({"blen": 8, "mlen": 64, "vlen": 64, "hlen": 128}, "MLEN >= HLEN >= BLEN"),
                                          ({"blen": 16, "mlen": 64, "vlen": 64, "hlen": 8}, "MLEN >= HLEN >= BLEN")])
def test_structural_constraints_are_infeasible_with_reasons(shape, needle):
    t = _small(shape=shape).evaluate([_g()], Workload(prefill=64, decode=4))
    assert not t.feasible[0] and needle in t.reason[0] and np.isinf(t.tpot_ms[0])


def test_bandwidth_constraint_follows_the_kv_format():
    b = _small(system={"hbm_gbs": 40.0})  # MLEN 64: bf16 KV needs 128 GB/s, int4 32 GB/s
    t = b.evaluate([_g("bf16/bf16/bf16"), _g("bf16/bf16/int4")], Workload(prefill=64, decode=4))
    assert not t.feasible[0] and "MLEN·KV width = 64·16 bit = 128 GB/s" in t.reason[0]
    assert t.feasible[1]


def test_batch_max_is_the_largest_fitting_batch_and_batch_one_miss_is_a_reason():
    b = _small()
    wl = Workload(prefill=2000, decode=100, batch="max", kv_format="mxint4")
    gs = [_g(), _g(n_kv=8), _g(layers=12)]
    t = b.evaluate(gs, wl)
    pop, cap = PopArrays.from_genomes(gs), 0.05e9
    for i, e in enumerate(t.extras):
        B = e["batch"]
        if t.feasible[i]:
            one = pop.take(np.array([i]))
            assert weight_storage(one, wl.precision)[0] + kv_cache_bytes(one, 2100, B, wl.precision)[0] <= cap
            assert weight_storage(one, wl.precision)[0] + kv_cache_bytes(one, 2100, B + 1, wl.precision)[0] > cap
    assert list(max_batch(pop, 2100, cap, wl.precision)) == [e["batch"] for e in t.extras]
    big = b.evaluate([_g(layers=40)], Workload(prefill=60000, decode=100, batch="max"))
    assert not big.feasible[0] and "does not fit" in big.reason[0]


def test_decode_sum_matches_a_per_step_loop():
    b, g, lo, n = _small(), [_g()], 300, 37
    whole = b.evaluate(g, Workload(prefill=lo, decode=n, batch=2)).tpot_ms[0] * n
    steps = sum(b.evaluate(g, Workload(prefill=lo + k, decode=1, batch=2)).tpot_ms[0] for k in range(n))
    assert whole == pytest.approx(steps, rel=2e-3)


def test_sum_ceil_closed_form():
    for b in (1, 4, 32):
        assert sum_ceil(90_001, 98_000, b) == sum(-(-c // b) for c in range(90_001, 98_001))


def test_precision_genes_follow_like_workload_formats():
    b, wl = _small(), Workload(prefill=512, decode=16, batch=2)
    own = b.evaluate([_g("int8/bf16/mxint4")], wl)
    same = b.evaluate([_g()], Workload(prefill=512, decode=16, batch=2, weight_format="int8", kv_format="mxint4"))
    for k in ("ttft_ms", "tpot_ms", "energy_per_token_uj"):
        assert getattr(own, k)[0] == pytest.approx(getattr(same, k)[0], rel=1e-12)
    assert own.extras[0]["precision"] == "int8/bf16/mxint4"
    wide = b.evaluate([_g("bf16/bf16/bf16")], wl)
    assert wide.tpot_ms[0] > own.tpot_ms[0]  # decode is memory bound: fewer bytes, faster


def test_flattened_beats_square_utilization_at_small_batch():
    sysd = {"cores": 1, "hbm_gb": 1e3, "hbm_gbs": 1e9}
    g, wl = [_g(layers=2)], Workload(prefill=1024, decode=8, batch=4)
    flat = PlenaBackend(shape={"blen": 4, "mlen": 1024, "vlen": 64, "hlen": 32}, system=sysd).evaluate(g, wl)
    sq = PlenaBackend(shape={"blen": 64, "mlen": 64, "vlen": 64, "hlen": 64}, system=sysd).evaluate(g, wl)
    assert flat.extras[0]["array_util_decode"] > 3 * sq.extras[0]["array_util_decode"]
    assert flat.tpot_ms[0] < sq.tpot_ms[0]


def test_co_search_returns_pareto_top_k_and_skips_infeasible_shapes():
    grid = {"blen": [4, 16], "mlen": [64, 256], "vlen": [64], "hlen": [16, 32, 128]}
    b = _small(shapes=grid, top_k=3, rank_by="tpot", system={"hbm_gbs": 1e6})
    t = b.evaluate([_g()], Workload(prefill=256, decode=8))
    e = t.extras[0]
    assert t.feasible[0] and 1 <= len(e["top_shapes"]) <= 3
    tp = [s["tpot_ms"] for s in e["top_shapes"]]
    first = e["top_shapes"][0]
    assert tp == sorted(tp) and (e["blen"], e["mlen"], e["hlen"]) == (first["blen"], first["mlen"], first["hlen"])
    assert t.tpot_ms[0] == pytest.approx(first["tpot_ms"])
    assert all(s["mlen"] >= s["hlen"] >= s["blen"] for s in e["top_shapes"])


def test_shipped_config_and_workload_resolve_formats_and_batch_max():
    b = build_backend("plena")
    wl = resolve_workload({"prefill": 90000, "decode": 8000, "batch": "max"}, b)
    assert wl.kv_format == "mxint4" and wl.batch_max
    assert resolve_workload({"prefill": 10, "decode": 1, "kv_bits": 16}, b).kv_format is None
    t = b.evaluate([resolve_arch("llama-3.3-70b")], wl)
    e = t.extras[0]
    assert t.feasible[0] and e["batch"] >= 16 and e["shape"].startswith("BLEN=32 MLEN=2048")
    assert e["precision"] == "mxint4/mxint4/mxint4"


def test_forge_hw_prints_shape_precision_and_batch(tmp_path, capsys):
    from tests.backends.test_cli import cfg
    from backends.cli import run

    s = run(cfg("arch=llama-3.3-70b", "backend=plena", "workload=agentic-90k", out=tmp_path))
    out = capsys.readouterr().out
    assert s["feasible"] and s["batch"] == 32 and s["precision"] == "mxint4/mxint4/mxint4" # 33 fit; pow2 takes 32
    for text in ("BLEN=32 MLEN=2048 VLEN=2048 HLEN=128", "mxint4/mxint4/mxint4", "batch"):
        assert text in out
    bad = run(cfg("arch=llama-3.3-70b", "backend=plena", "workload=agentic-90k", "workload.batch=8",
                  "workload.kv_format=bf16", "workload.weight_format=bf16", "quiet=true", out=tmp_path))
    assert not bad["feasible"] and "batch 8 does not fit" in bad["reason"]
    with pytest.raises(Exception, match="batch = max is not supported by backend 'gemmini'"):
        run(cfg("backend=gemmini", "workload=agentic-90k", "quiet=true", out=tmp_path))


def test_table_xi_peak_bandwidth_row():
    """Table XI, MLEN 2048 at 1 GHz: 8192 / 8192 / 5120 / 2048 GB/s for W/A/KV 16/16/16, 4/16/16, 4/4/16, 4/4/4."""
    b = PlenaBackend(system={"cores": 16, "hbm_gb": 1e4, "hbm_gbs": 1e5})
    got = [b.evaluate([_g(p)], Workload(prefill=64, decode=2)).extras[0]["peak_bandwidth_gbs"]
           for p in ("fp16/fp16/fp16", "int4/fp16/fp16", "int4/int4/fp16", "int4/int4/int4")]
    assert got == [8192, 8192, 5120, 2048]
