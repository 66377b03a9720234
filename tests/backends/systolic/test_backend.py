"""Systolic mapper: SCALE-Sim goldens, mapping properties, caching, template behaviours (DXE, FLAT)."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from backends.interface import BackendError, Workload
from backends.registry import backend_config, build_backend
from backends.systolic.gemm import _CACHE, map_gemm
from backends.systolic.template import make_template, template_names
from forge.runtime.config import data_dir
from forge.genomes.genome import Genome, LayerGene
from forge.genomes.importers import load_genome

GOLDENS = json.loads((Path(__file__).parent / "data" / "scalesim_goldens.json").read_text())
TEMPLATES = ("gemmini", "eyeriss", "flat", "dxe", "simba", "dxe-relaxed")
INT8 = Workload(weight_bits=8, act_bits=8, kv_bits=8)


def ws_array(R: int, C: int):
    t = make_template("gemmini")
    return replace(t, name=f"ws{R}x{C}", rows=R, cols=C, dataflows=("ws",))


def test_shipped_templates_are_listed():
    assert set(TEMPLATES) <= set(template_names())


@pytest.mark.parametrize("g", GOLDENS["goldens"], ids=lambda g: f"{g['rows']}x{g['cols']}-{g['name']}")
def test_scalesim_mode_matches_goldens_to_the_cycle(g):
    c = map_gemm(ws_array(g["rows"], g["cols"]), g["M"], g["K"], g["N"], mode="scalesim")
    assert c.cycles == g["formula_cycles"]
    if g["scalesim_cycles"] is not None:  # SCALE-Sim reports the 0-based index of the last cycle
        assert c.cycles == g["scalesim_cycles"] + 1


shapes = st.tuples(st.integers(1, 600), st.integers(1, 3000), st.integers(1, 3000))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(TEMPLATES), shapes)
def test_mapping_bounds(name, shape):
    M, K, N = shape
    t = make_template(name)
    c = map_gemm(t, M, K, N)
    compulsory = M * K + K * N + M * N  # int8 operands, nothing resident
    assert c.dram_bytes >= compulsory
    assert c.cycles >= M * K * N / t.macs - 1e-9
    assert c.cycles >= compulsory / t.dram_bytes_per_cycle - 1e-9
    assert 0 < c.utilization <= 1
    assert c.energy_pj >= c.macs * t.mac_pj + c.dram_bytes * t.dram_pj_per_byte - 1e-6


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(TEMPLATES), shapes, st.sampled_from([1.5, 2.0, 4.0]))
def test_latency_never_rises_with_more_bandwidth_or_buffer(name, shape, f):
    t = make_template(name)
    base = map_gemm(t, *shape).cycles
    more_bw = replace(t, dram_bytes_per_cycle=t.dram_bytes_per_cycle * f,
                      buffers=tuple(replace(b, bytes_per_cycle=b.bytes_per_cycle * f) for b in t.buffers))
    more_buf = replace(t, buffers=tuple(replace(b, bytes=int(b.bytes * f)) for b in t.buffers))
    assert map_gemm(more_bw, *shape).cycles <= base
    assert map_gemm(more_buf, *shape).cycles <= base


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), shapes)
def test_scalesim_mode_is_the_formula(R, C, shape):
    M, K, N = shape
    assert map_gemm(ws_array(R, C), M, K, N, mode="scalesim").cycles == math.ceil(K / R) * math.ceil(N / C) * (2 * R + C + M - 2)


def test_batch_scales_and_results_are_cached():
    a = map_gemm("gemmini", 64, 768, 768)
    b = map_gemm("gemmini", 64, 768, 768, batch=12)
    assert b.cycles == pytest.approx(12 * a.cycles) and b.dram_bytes == pytest.approx(12 * a.dram_bytes)
    assert map_gemm("gemmini", 64, 768, 768) is a  # same object: cached by (template, shape)
    assert a.mapping["dataflow"] in ("ws", "os") and set(a.accesses) >= {"dram", "scratchpad", "mac"}


def test_decode_tpot_is_the_exact_sum_of_steps():
    g = load_genome(data_dir() / "archs" / "pythia-160m.yaml")
    b, Lp, n = build_backend("gemmini"), 9, 5
    tpot = b.evaluate([g], Workload(prefill=Lp, decode=n, weight_bits=8, act_bits=8, kv_bits=8)).tpot_ms[0]
    steps = [b.evaluate([g], Workload(prefill=Lp + s - 1, decode=1, weight_bits=8, act_bits=8, kv_bits=8)).tpot_ms[0]
             for s in range(1, n + 1)]
    assert tpot * n == pytest.approx(sum(steps), rel=1e-9)


def tiny() -> Genome:
    return Genome(d_model=128, block_size=512, vocab_size=2048, layers=(LayerGene(4, 2, 32, 32, 512),) * 2)


def test_dxe_decode_moves_no_dram_when_the_model_fits_on_chip():
    r = build_backend("dxe").evaluate([tiny()], INT8)
    assert r.extras[0]["weights_resident"] and r.extras[0]["kv_resident"]
    assert r.extras[0]["decode_dram_mb_per_token"] == 0.0
    big = build_backend("dxe").evaluate([load_genome(data_dir() / "archs" / "smollm2-135m.yaml")], INT8)
    assert not big.extras[0]["weights_resident"] and big.extras[0]["decode_dram_mb_per_token"] > 100
    assert big.feasible[0] and big.tpot_ms[0] > r.tpot_ms[0]


def test_flat_fused_attention_keeps_scores_off_dram():
    g = load_genome(data_dir() / "archs" / "smollm2-135m.yaml")
    cfg = backend_config("flat")
    fused = build_backend(cfg).evaluate([g], Workload(prefill=1024, decode=4, weight_bits=8, act_bits=8, kv_bits=8))
    cfg["template"]["fused_attention"] = False
    unfused = build_backend(cfg).evaluate([g], Workload(prefill=1024, decode=4, weight_bits=8, act_bits=8, kv_bits=8))
    f, u = fused.extras[0]["ttft_ops_ms"], unfused.extras[0]["ttft_ops_ms"]
    assert f["attn_score"] <= u["attn_score"] and f["softmax"] < u["softmax"]
    assert fused.energy_per_token_uj[0] < unfused.energy_per_token_uj[0]


def test_new_accelerator_from_yaml_only():
    cfg = {"_target_": "backends.systolic.SystolicBackend", "name": "my-npu",
           "template": {"name": "my-npu", "rows": 8, "cols": 8, "clock_ghz": 0.5, "dataflows": ["os"],
                        "dram_bytes_per_cycle": 2, "dram_pj_per_byte": 40, "mac_pj": 0.1,
                        "buffers": [{"name": "sram", "bytes": 65536, "holds": ["input", "weight", "output"],
                                     "bytes_per_cycle": 32, "read_pj_per_byte": 0.5, "write_pj_per_byte": 0.5}]}}
    r = build_backend(cfg).evaluate([tiny()], INT8)
    assert r.feasible[0] and 0 < r.ttft_ms[0] < np.inf and r.extras[0]["template"] == "my-npu"


def test_bad_templates_list_what_is_allowed():
    with pytest.raises(BackendError, match="gemmini"):
        map_gemm("tpu-v9", 1, 2, 3)
    with pytest.raises(BackendError, match="allowed: a non-empty subset"):
        make_template({**backend_config("gemmini")["template"], "dataflows": ["zz"]})
    with pytest.raises(BackendError, match="template.colz is unknown"):
        make_template({**backend_config("gemmini")["template"], "colz": 3})
    with pytest.raises(BackendError, match="overlapped, scalesim"):
        map_gemm("gemmini", 1, 2, 3, mode="fast")
    assert _CACHE  # the population cache is shared across calls
