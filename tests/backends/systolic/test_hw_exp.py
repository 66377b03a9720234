"""The release's per-layer driver (hw_exp.py) as read by `backends.systolic.reference` and followed by
`conventions=llmforge`: SmolLM2-135M's GEMMs and fusion savings per edge, derived by hand.

SmolLM2-135M: d_model 576, n_h 9, n_kv 3, d_qk = d_v = 64, d_mlp 1536; 256 prompt / 256 decode tokens.
GEMMs (hw_exp.py evaluate_layer, 'infinite' attention; L rows × E → D, × scale):
    QK_gen    L = proj, E = 576, D = 64·(9 + 3) = 768          V_gen     L = proj, E = 576, D = 64·3 = 192
    QK_attn   L = 9 // 3 = 3, E = 64, D = 256, × 3            PV_attn   L = 3, E = 256, D = 64, × 3
    ATTN_proj L = proj, E = 64·9 = 576, D = 576              MLP_FC1   L = proj, 576 → 1536; MLP_FC2 1536 → 576
with proj = 256 in prefill and 1 in decode, and the attention GEMMs at L = 3 in both (the prompt is only their
context, 256 = block_size in both passes). On dxe-relaxed `_pad_D_for_arch` rounds D > 128 up to a multiple of
128: V_gen 192 → 256, ATTN_proj and FC2 576 → 640 (768, 1536 and 256 are multiples; 64 ≤ 128 passes through).

Fusion savings per edge, prefill, in cycles (`_estimate_saved_cycles`: producer output writes / write bw +
consumer input reads / read bw, × the larger endpoint scale, 3 on edges touching QK_attn or PV_attn), with
compulsory traffic (outputs written once: L·D; inputs read once: L·E; `fusion_traffic: compulsory`, the
default) and DRAM 4 B/cycle each way:
    QK_gen→QK_attn     (256·768 + 3·64) / 4 · 3  = (49152 + 48) · 3   = 147600
    V_gen→PV_attn      (256·192 + 3·256) / 4 · 3 = (12288 + 192) · 3  = 37440
    QK_attn→PV_attn    (3·256 + 3·256) / 4 · 3   = 384 · 3             = 1152
    PV_attn→ATTN_proj  (3·64 + 256·576) / 4 · 3  = (48 + 36864) · 3   = 110736
    ATTN_proj→FC1      (256·576 + 256·576) / 4                         = 73728
    FC1→FC2            (256·1536 + 256·1536) / 4                       = 196608
flat: DRAM 25 B/cycle: every edge above × 4/25.
dxe-relaxed: padded V_gen writes 256·256 → (16384 + 192)·3 = 49728; padded ATTN_proj writes 256·640 →
40960 + 36864 = 77824; the rest as above.
With the traffic our mapper actually moves (`fusion_traffic: mapper`, the reading's traffic="modelled"):
gemmini: FC2's 256 × 1536 inputs (384 KB) exceed half the double-buffered 512 KB scratchpad, so they are read
once per D tile of 262144 / (256 · 4 B) = 256 columns: ⌈576 / 256⌉ = 3 reads → FC1→FC2 = 98304 + 3·98304 = 393216.
eyeriss: an input block beside its partial sums exceeds the 128 KB buffer for ATTN_proj, FC1 and FC2; D tiles
of (131072 − 256·12) // (256·2) = 250 columns → 3, 7 and 3 reads: PV_attn→ATTN_proj (48 + 3·36864)·3 = 331920,
ATTN_proj→FC1 36864 + 7·36864 = 294912, FC1→FC2 98304 + 3·98304 = 393216 (simba, flat, dxe-relaxed: as above).
"""
from __future__ import annotations

import pytest

from backends.interface import Workload
from backends.registry import build_backend
from backends.systolic.reference import layer_edges, layer_gemms, release_reading
from forge.runtime.config import data_dir
from forge.genomes.importers import load_genome
from tests.backends.systolic.test_conventions import llmforge

NAMES = ["gemmini", "eyeriss", "simba", "flat", "dxe-relaxed"]
BASE = [147600, 37440, 1152, 110736, 73728, 196608]
EDGES = {"gemmini": BASE, "eyeriss": BASE, "simba": BASE, "flat": [x * 4 / 25 for x in BASE],
         "dxe-relaxed": [147600, 49728, 1152, 110736, 77824, 196608]}
MODELLED = {**EDGES, "gemmini": BASE[:5] + [393216], "eyeriss": BASE[:3] + [331920, 294912, 393216]}


@pytest.fixture(scope="module")
def smollm():
    return load_genome(data_dir() / "archs" / "smollm2-135m.yaml")


def test_the_layer_gemms_in_prefill_and_decode(smollm):
    for mode, proj in (("prefill", 256), ("decode", 1)):
        got = [(x.name, x.L, x.E, x.D, x.scale) for x in layer_gemms(smollm, 0, 256, mode)]
        assert got == [("QK_gen", proj, 576, 768, 1), ("V_gen", proj, 576, 192, 1), ("QK_attn", 3, 64, 256, 3),
                       ("PV_attn", 3, 256, 64, 3), ("ATTN_proj", proj, 576, 576, 1),
                       ("MLP_FC1", proj, 576, 1536, 1), ("MLP_FC2", proj, 1536, 576, 1)]


@pytest.mark.parametrize("name", NAMES)
def test_fusion_savings_per_edge_match_the_hand_derivation(name, smollm):
    edges = layer_edges(name, smollm, 0, 256, "prefill")
    assert [e[0] for e in edges] == ["QK_gen->QK_attn", "V_gen->PV_attn", "QK_attn->PV_attn", "PV_attn->ATTN_proj",
                                     "ATTN_proj->MLP_FC1", "MLP_FC1->MLP_FC2"]
    assert [e[1] for e in edges] == pytest.approx(EDGES[name])
    assert [e[1] for e in layer_edges(name, smollm, 0, 256, "prefill", "modelled")] == pytest.approx(MODELLED[name])
    dec = layer_edges(name, smollm, 0, 256, "decode")  # one token: QK_gen writes 768, QK_attn reads 3·64, × 3
    assert dec[0][1] == pytest.approx((768 + 192) * 3 / (25 if name == "flat" else 4))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("traffic", ["compulsory", "mapper"])
def test_the_backend_subtracts_the_same_savings(name, traffic, smollm):
    """conventions=llmforge subtracts, for SmolLM2-135M, the savings derived by hand (compulsory traffic) or with
    the re-reads our mapper really does (mapper)."""
    wl = Workload(prefill=256, decode=256, weight_bits=8, act_bits=8, kv_bits=8)
    r = llmforge(name, fusion_traffic=traffic).evaluate([smollm], wl).row(0)
    read = "compulsory" if traffic == "compulsory" else "modelled"
    per_layer = sum(e[1] for e in layer_edges(name, smollm, 0, 256, "prefill", read))
    assert r["fusion_saved"]["ttft_ms"] == pytest.approx(30 * per_layer / 1e6, rel=5e-3)
    off = llmforge(name, fusion=False).evaluate([smollm], wl).row(0)
    assert off["ttft_ms"] - r["ttft_ms"] == pytest.approx(r["fusion_saved"]["ttft_ms"], rel=1e-6)
    assert r["ttft_ms"] == pytest.approx(release_reading(name, smollm, traffic=read)["ttft_ms"], rel=0.02)


def test_prefill_attention_rows_and_padding_fields(smollm):
    """attention_rows=tokens restores R·L_p rows; pad_d=0 on dxe-relaxed reads unpadded weights (fewer bytes)."""
    wl = Workload(prefill=256, decode=256, weight_bits=8, act_bits=8, kv_bits=8)
    lf = build_backend("gemmini", conventions="llmforge").evaluate([smollm], wl).row(0)
    tok = llmforge("gemmini", attention_rows="tokens").evaluate([smollm], wl).row(0)
    assert tok["ttft_ops_ms"]["attn_score"] > 10 * lf["ttft_ops_ms"]["attn_score"]
    pad = build_backend("dxe-relaxed", conventions="llmforge").evaluate([smollm], wl).row(0)
    raw = llmforge("dxe-relaxed", pad_d=0).evaluate([smollm], wl).row(0)
    assert raw["decode_dram_mb_per_token"] < pad["decode_dram_mb_per_token"]
    assert build_backend("gemmini", conventions="llmforge").t.rank == "edp"


def test_edp_ranking_trades_delay_for_energy():
    """rank: edp (the release's mapper.yaml) may pick a slower, leaner mapping than rank: delay; never a worse EDP."""
    from dataclasses import replace

    from backends.systolic.mapper import map_many

    t = build_backend("dxe-relaxed", conventions="llmforge").t
    edp, delay = map_many(t, 16, 576, 1536), map_many(replace(t, rank="delay"), 16, 576, 1536)
    assert edp["cycles"][0] > delay["cycles"][0] and edp["energy"][0] < delay["energy"][0]
    assert edp["cycles"][0] * edp["energy"][0] <= delay["cycles"][0] * delay["energy"][0]
