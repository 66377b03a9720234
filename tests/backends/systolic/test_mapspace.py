"""The release's constrained DRAM mapspace on Simba and FLAT (issue 29): loop-order reuse, capacities, and why it
does not explain the release's faster Simba and FLAT prefill (docs/concepts/fidelity.md)."""
from __future__ import annotations

import pytest

from backends.systolic import reference as R
from backends.systolic.mapspace import RELEASE, fetches, least_traffic, prefill_savings, traffic
from forge.runtime.config import data_dir
from forge.genomes.importers import load_genome


def genome(arch: str):
    return load_genome(data_dir() / "archs" / f"{arch}.yaml")


def test_simba_spills_partial_sums_when_e_is_split_at_dram():
    """simba/constraints.yaml:17 permutation [L, D, E], inner to outer: E outermost."""
    o = RELEASE["simba"].order
    assert fetches(o, {"L": 4, "D": 1, "E": 2}, "output") == 2  # written twice, read back once
    assert fetches(o, {"L": 4, "D": 3, "E": 1}, "input") == 3  # D outside the split L: inputs re-read per D tile
    assert fetches(o, {"L": 1, "D": 3, "E": 2}, "input") == 1  # D inside the only split input loop: reused
    assert fetches(o, {"L": 4, "D": 3, "E": 2}, "weight") == 1  # L innermost: weights stay


def test_flat_keeps_partial_sums_on_chip_whatever_the_split():
    """flat_edge/constraints.yaml:19 permutation [E, D, L]: E innermost."""
    o = RELEASE["flat"].order
    assert fetches(o, {"L": 2, "D": 3, "E": 8}, "output") == 1
    assert fetches(o, {"L": 2, "D": 3, "E": 8}, "input") == 3
    assert fetches(o, {"L": 2, "D": 3, "E": 1}, "input") == 1
    assert fetches(o, {"L": 2, "D": 3, "E": 1}, "weight") == 2


def test_tiles_must_fit_the_buffer_under_dram():
    ms = RELEASE["simba"]  # 65,536 words for an L x E input and an L x D output tile
    assert not traffic(ms, 256, 576, 1536, {"L": 1, "E": 1, "D": 1})["fits"]
    assert traffic(ms, 256, 576, 1536, {"L": 16, "E": 1, "D": 1})["fits"]  # 16 x (576 + 1536) words
    assert not traffic(ms, 256, 576, 1536, {"L": 8, "E": 1, "D": 1})["fits"]


@pytest.mark.parametrize("arch", ["smollm2-135m", "gemma-3-270m"])
@pytest.mark.parametrize("name", ["simba", "flat"])
def test_the_least_traffic_mapping_is_compulsory_on_the_issue_models(name, arch):
    """What `fusion_traffic: compulsory` counts is what the constrained mapspace reaches: inputs read and outputs
    written once, no partial sums back, for every prefill GEMM."""
    g = genome(arch)
    for x in {x for i in range(len(g.layers)) for x in R.layer_gemms(g, i, 256, "prefill")}:
        r = least_traffic(name, x.L, x.E, x.D)
        assert (r["in_rd"], r["out_wr"], r["out_rd"], r["w_rd"]) == (x.L * x.E, x.L * x.D, 0, x.E * x.D), x


def test_wider_models_leave_the_compulsory_traffic_on_simba():
    """SmolLM2-360M's FC2 (2560 -> 960) does not fit beside its inputs: the least-traffic tiling splits E at DRAM
    and spills partial sums once."""
    r = least_traffic("simba", 256, 2560, 960)
    assert r["E_d"] == 2 and r["out_rd"] == 256 * 960


def test_least_traffic_is_not_the_releases_counting_on_eyeriss():
    """Eyeriss's weights live in 384-word PE spads (D spread over 168 PEs): the least-traffic FC2 tiling re-reads
    its inputs, yet compulsory counting matches the release's eyeriss TTFT, so the stand-in cannot be adopted."""
    r = least_traffic("eyeriss", 256, 1536, 576)
    assert r["in_rd"] > 256 * 1536 and r["out_rd"] == 0
    p = prefill_savings("eyeriss", genome("smollm2-135m"))
    assert p["ttft_constrained_ms"] < 0.95 * p["ttft_ms"]


def test_unknown_substrate_lists_the_allowed_ones():
    with pytest.raises(KeyError, match="allowed: simba, flat, eyeriss"):
        least_traffic("gemmini", 256, 576, 576)


def test_reading_back_every_output_is_not_a_release_convention():
    """Counting each producer output's read-back like its write would speed Simba and FLAT by 1.18x / 1.10x but
    gemmini by 1.16x, whose release TTFT the compulsory counting already matches (issue 29)."""
    g = genome("smollm2-135m")
    p = {n: prefill_savings(n, g) for n in ("simba", "flat", "gemmini")}
    assert p["simba"]["ttft_ms"] == pytest.approx(R.release_reading("simba", g)["ttft_ms"], rel=1e-9)
    ratio = {n: v["ttft_ms"] / v["ttft_readback_ms"] for n, v in p.items()}
    assert ratio["gemmini"] > 1.1 and ratio["simba"] > 1.1 and ratio["flat"] > 1.05
    assert p["simba"]["ttft_constrained_ms"] == pytest.approx(p["simba"]["ttft_ms"], rel=1e-9)
