"""Precision formats, precision genes on genomes, per-genome bytes in the analyzer, and memory capacity."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from forge.spaces.arrays import PopArrays
from forge.cli import resolve_arch
from forge.genomes.genome import Genome, GenomeError, LayerGene, genome_from_dict, save_genome
from forge.genomes.importers import load_genome
from forge.genomes.precision import (FORMATS, TABLE_VI, TABLE_VI_BASE, PrecisionError, PrecisionGenes, QuantPenalty,
                             paper_deltas, parse_format)
from forge.lm.workload import (Precision, head_ops, kv_cache_bytes, layer_ops, max_batch, model_totals,
                            weight_storage)

GIB = 2 ** 30


def _g(prec=None) -> Genome:
    layers = (LayerGene(4, 2, 64, 96, 512), LayerGene(3, 1, 32, 32, 256, attn=False), LayerGene(8, 4, 32, 32, 384))
    return Genome(d_model=128, block_size=256, layers=layers, vocab_size=1000, precision=prec)


def test_table_xi_llama_3_3_70b_kv_and_weights_exact():
    """PLENA Table XI (90k + 8k tokens, B = 8): GB there are GiB (2^30 bytes) and k = 1000 tokens;
    weight storage excludes the input embedding table; 4-bit is exactly 0.5 byte (scales ignored)."""
    pop = PopArrays.from_genomes([resolve_arch("llama-3.3-70b")])
    for bits, kv, w in ((16, 239.26, 129.46), (4, 59.81, 32.36)):
        prec = Precision.from_bits(bits, 16, bits)
        assert round(float(kv_cache_bytes(pop, 90_000 + 8_000, 8, prec)[0]) / GIB, 2) == kv
        assert round(float(weight_storage(pop, prec, embedding=False)[0]) / GIB, 2) == w
    # the same through a genome's own precision genes; MXINT4 counts its E8M0 scale (4.25 bits)
    g4 = resolve_arch("llama-3.3-70b").with_precision({"weights": "int4", "acts": "bf16", "kv": "int4"})
    assert round(float(kv_cache_bytes(PopArrays.from_genomes([g4]), 98_000, 8)[0]) / GIB, 2) == 59.81
    mx = PopArrays.from_genomes([g4.with_precision("mxint4/bf16/mxint4")])
    assert kv_cache_bytes(mx, 98_000, 8)[0] / GIB == pytest.approx(239.2578125 * 4.25 / 16)


def test_format_bytes_count_the_shared_scale():
    assert parse_format("bf16").bytes == 2.0 and parse_format("int4").bytes == 0.5
    assert parse_format("mxint4").bytes == (4 + 8 / 32) / 8
    assert parse_format("mxfp8_b16").bytes == (8 + 8 / 16) / 8 and parse_format("MXINT4_b32").name == "mxint4"


@pytest.mark.parametrize("bad", ["int3", "fp12", "bf16_b16"])
def test_bad_precision_name_is_one_line_listing_valid_ones(bad):
    with pytest.raises(PrecisionError) as e:
        parse_format(bad)
    msg = str(e.value)
    assert "\n" not in msg and repr(bad) in msg and all(f in msg for f in FORMATS)
    d = _g().to_dict() | {"precision": {"weights": bad, "acts": "bf16", "kv": "bf16"}}
    with pytest.raises(GenomeError, match="mxint4"):
        genome_from_dict(d)


def test_precision_genes_round_trip_and_id(tmp_path):
    plain = _g()
    legacy = hashlib.sha256(json.dumps({**plain.globals_dict(), "layers": [x.canonical() for x in plain.active_layers]},
                                       sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    assert plain.id == legacy  # no precision genes: the id is exactly the pre-precision hash
    g = _g(PrecisionGenes("mxint4", "mxint8", "mxfp4_b16"))
    assert g.id != plain.id and g.with_precision(None).id == plain.id
    assert g.with_precision("mxint4/mxint8/mxfp4").id != g.id
    for ext in ("yaml", "json"):
        save_genome(g, tmp_path / f"g.{ext}")
        back = load_genome(tmp_path / f"g.{ext}")
        assert back == g and back.id == g.id and back.precision == g.precision
    assert "precision" not in plain.to_dict()


def test_genome_bytes_flow_through_the_analyzer_like_workload_bytes():
    g = _g({"w": "int8", "a": "fp16", "kv": "mxint4"})
    own = layer_ops(PopArrays.from_genomes([g]), 7, 300, 3, Precision())
    same = layer_ops(PopArrays.from_genomes([g.with_precision(None)]), 7, 300, 3, Precision(1.0, 2.0, 4.25 / 8))
    for f in ("weight_bytes", "act_bytes", "kv_read_bytes", "kv_write_bytes", "flops"):
        np.testing.assert_allclose(getattr(own, f), getattr(same, f))
    h1, h2 = head_ops(PopArrays.from_genomes([g]), 7, 1, 3), head_ops(PopArrays.from_genomes([g.with_precision(None)]), 7, 1, 3, Precision(1.0, 2.0, 2.0))
    np.testing.assert_allclose(h1.bytes, h2.bytes)
    # a mixed population: the genome without genes keeps the workload's precision
    mixed = layer_ops(PopArrays.from_genomes([g, g.with_precision(None)]), 7, 300, 3, Precision())
    np.testing.assert_allclose(mixed.kv_write_bytes[1], layer_ops(PopArrays.from_genomes([g.with_precision(None)]), 7, 300, 3).kv_write_bytes[0])
    # parameter counts do not depend on the formats
    t1, t2 = model_totals(PopArrays.from_genomes([g])), model_totals(PopArrays.from_genomes([g.with_precision(None)]))
    assert t1["params"][0] == t2["params"][0]


def test_max_batch_matches_brute_force_capacity_check():
    rng = np.random.default_rng(0)
    genomes = [_g(), _g("int4/bf16/int4"), _g("mxint8/bf16/mxfp4"), resolve_arch("smollm2-135m")]
    pop = PopArrays.from_genomes(genomes)
    for _ in range(5):
        mem, ctx = float(rng.uniform(1e6, 5e8)), int(rng.integers(1_000, 120_000))
        got = max_batch(pop, ctx, mem)
        w = weight_storage(pop)
        for i in range(pop.P):
            b = 0
            while w[i] + kv_cache_bytes(pop.take(np.array([i])), ctx, b + 1)[0] <= mem:
                b += 1
            assert got[i] == b, (i, mem, ctx)
    assert max_batch(pop, 100_000, 1.0).tolist() == [0, 0, 0, 0]  # batch 1 does not fit: 0


def test_quant_penalty_model_and_measured_table():
    q = QuantPenalty()
    assert q(None) == 0.0 and q(PrecisionGenes()) == 0.0
    w4 = q(PrecisionGenes("mxint4", "bf16", "bf16"))
    assert w4 == pytest.approx(paper_deltas()["mxint"]["weights"])
    assert q(PrecisionGenes("mxint8", "bf16", "bf16")) == pytest.approx(w4 / 256)
    full = {f: q(PrecisionGenes(f"{f}4", f"{f}4", f"{f}4")) for f in ("mxint", "int", "mxfp")}
    assert full["mxint"] < full["int"] < full["mxfp"]  # Table VI: PLENA MXINT < QuaRot INT4 < MXFP at W4A4KV4
    per_model = [np.log(p / b) for p, b in zip(TABLE_VI["mxint"][2], TABLE_VI_BASE)]
    assert min(per_model) < full["mxint"] < max(per_model)  # the least-squares fit sits inside the models' spread
    measured = QuantPenalty.from_config({"table": {"mxint4": {"weights": 0.5}}, "scale": 2.0})
    assert measured(PrecisionGenes("mxint4", "bf16", "bf16")) == pytest.approx(1.0)
    with pytest.raises(PrecisionError, match="allowed: scale, table"):
        QuantPenalty.from_config({"tabel": {}})
