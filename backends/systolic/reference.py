"""What the LLMForge release's Timeloop pipeline would report, by hand-derived closed forms (no mapper search).

Sources (../shared/reference/llmforge-release): the per-layer driver `hw_exp.py`, the two-pass aggregation
`evaluators/hw_timeloop.py`, the architecture/constraint YAMLs under `hw_eval/arch`. Our reading, point by point:

- GEMMs of a layer (hw_exp.py `evaluate_layer`), each (L rows × E)·(E × D): attention layers ('infinite')
  QK_gen (E = d_model, D = (n_h + n_kv)·d_qk), V_gen (D = n_kv·d_v), QK_attn (L = n_h // n_kv, E = d_qk,
  D = context) and PV_attn (L = n_h // n_kv, E = context, D = d_v), both × n_kv, ATTN_proj (E = n_h·d_v,
  D = d_model), MLP_FC1, MLP_FC2; other layers FC1 and FC2 only. Projections have L = prompt length in
  prefill and 1 in decode; the attention GEMMs have L = n_h // n_kv in both, the prompt length being only the
  context — so prefill attention costs (n_h // n_kv) rows, not that × tokens (not physical).
- Fusion savings (`compute_fusion_savings`, `_estimate_saved_cycles`, fused=True on every substrate): per edge
  QK_gen→QK_attn, V_gen→PV_attn, QK_attn→PV_attn, PV_attn→ATTN_proj, ATTN_proj→FC1, FC1→FC2 (a layer without
  attention: FC1→FC2) the producer's DRAM output writes / write bw + the consumer's DRAM input reads / read bw,
  and their DRAM energy, × n_kv when an endpoint is QK_attn or PV_attn; energy capped at 90% of the layer's.
  Compulsory traffic by default (inputs read once, outputs written once; `traffic="modelled"` takes the re-reads
  and spills modelled below, the counterpart of the backend's `fusion_traffic: mapper`).
- D padding (`_pad_D_for_arch`): on the DXE variants (d_axis_spatial 128) D > 128 and ragged is rounded up
  to a multiple of 128 inside the problem, so the padded weights are read and padded outputs written.
- Passes (hw_timeloop.py): prefill at block_size = prefill_len, decode at block_size = decode_len (context),
  TTFT = prefill cycles / 1e9, TPOT = decode cycles / 1e9 (1 GHz for every substrate), energy per token =
  (prefill energy + decode_len · decode energy) / (prefill_len + decode_len); GEMMs only carry energy.
- Per GEMM, latency is the slowest of compute and each level's traffic over its bandwidth:
      compute = L · (E / s_E) · folds_D,   s_E, s_D the spatial factors the arch's constraints allow;
  the 'uber' mapspace factorizes exactly, so s is the largest product of allowed factors that divides the
  dimension (eyeriss: D = 576 uses 12 of 14 columns); on the DXE variants D runs over the 128-wide mesh.
      DRAM = max(reads / read_bandwidth, writes / write_bandwidth),
  reads = compulsory inputs + weights, writes = outputs (int8); a weight matrix larger than dxe-relaxed's 3 MB
  weight memory streams in parts and the inputs are re-read once per part; an L × E input block that does not
  stay on chip (eyeriss: beside the L × D partial sums in the 128 KB global buffer that weights bypass; gemmini:
  in half its double-buffered 512 KB scratchpad) is re-read once per D tile, the widest whose partial sums fit
  (eyeriss: beside an L × s_E input slice; gemmini: in the 256 KB accumulator; gemmini's block shares the
  scratchpad with an E × s_D weight slice). FLAT's one 200 KB buffer keeps all three operands: when an L × E
  input block, an E × s_D weight slice and the L × s_D partial sums do not fit, E is split at DRAM into k parts
  (the widest multiple of s_E that fits) and, unless all L × D partial sums stay beside an s_E-wide input
  slice, the 16-bit partial sums spill: L·D·(1 + (k−1)·2) bytes written, L·D·(k−1)·2 read back — traffic the release's fusion savings count on FLAT's producer edges. Of the on-chip ports only the one
  feeding inputs can bind (Gemmini's 16 B/cycle scratchpad, which weights also cross, and dxe-relaxed's
  16 B/cycle global SRAM): inputs are multicast across D's spatial factor, so each is read once per D fold.
- Energy per GEMM with the same canonical mapping (the template's energy table, conf/backend/<name>.yaml):
  MACs · (MAC + register pJ) + DRAM bytes · pJ/B + per buffer: the feeder of inputs reads each once per D
  fold, the feeder of weights each once, the feeder of outputs reads and writes a partial sum per E fold
  (2·folds_E − 1 accesses per output, half of them reads; row-stationary eyeriss folds only what its PE weight
  spads cannot hold), each DRAM fill is written once where it lands and
  an outer buffer also reads what it passes on; + leakage · cycles.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product

from forge.genomes.genome import Genome

ALL = ("E", "D")


@dataclass(frozen=True)
class Substrate:
    """Spatial levels as (size, dims it may split) and DRAM bandwidths, from the release's arch/constraints YAMLs."""

    levels: tuple[tuple[int, tuple[str, ...]], ...]
    dram_read: float
    dram_write: float
    pad_d: int = 0  # DXE variants: D over a mesh of this width, padded when ragged (hw_exp.py _pad_D_for_arch)
    feed: tuple[float, bool] | None = None  # the buffer port feeding inputs (B/cycle, weights pass it too)
    weight_store: int = 0  # on-chip weight bytes: a larger weight matrix streams in parts, inputs re-read per part
    input_buf: int = 0  # bytes an L × E input block may take on chip (0: always fits)
    psum_buf: int = 0  # bytes for an L × D-tile block of partial sums (0: shares input_buf)
    weights_share: bool = False  # an E × s_D weight slice shares input_buf with the input block
    glb: int = 0  # one buffer for inputs, weights and outputs: E is split at DRAM when a row block does not fit


SUBSTRATES = {
    # ARCH_CONFIGS["gemmini"] = system_gemmini.yaml + constraints/constraints.yaml: PERows D=16, PECols E=16;
    # DRAM 4 / 4 B/cycle; Scratchpad read_bandwidth 16 (weights cross it too), 512 KB double-buffered;
    # Accumulator 16 × 4096 × 32 b = 256 KB of partial sums
    "gemmini": Substrate(((16, ("D",)), (16, ("E",))), 4, 4, feed=(16, True), input_buf=262144, psum_buf=262144,
                         weights_share=True),
    # eyeriss/arch.yaml: PE_column meshX 14 (D only), PE meshY 12 (E and D); DRAM 4 / 4
    # shared_glb 128 KB keeps Inputs and Outputs, weights bypass it to the PE spads
    "eyeriss": Substrate(((14, ("D",)), (12, ALL)), 4, 4, input_buf=131072),
    # simba/arch.yaml: PE meshX 16 (D, E), distributed_buffers meshY 4 (D), reg_mac meshY 4 (E); DRAM 4 / 4
    "simba": Substrate(((16, ALL), (4, ("D",)), (4, ("E",))), 4, 4),
    # flat_edge/arch.yaml: PE_row meshY 32 (D), PE_col meshX 32 (E); ARCH_CONFIGS dram 25 / 25;
    # global_buffer 25600 × 64 b = 200 KB keeps Inputs, Weights and Outputs
    "flat": Substrate(((32, ("D",)), (32, ("E",))), 25, 25, glb=204800),
    # dxe_relaxed: DXT 8 × VAC 16 over D (forced, padded), mac_lane 16 over E; DRAM 4 / 4; d_axis_spatial 128
    "dxe-relaxed": Substrate(((16, ("E",)),), 4, 4, pad_d=128, feed=(16, False),  # global_sram 16 B/cycle
                             weight_store=128 * 24576),  # wmem 24 KB × 128 cores
}


@dataclass(frozen=True)
class Gemm:
    """One GEMM of hw_exp.py's evaluate_layer: (L × E)·(E × D), costed `scale` times (n_kv for attention)."""

    name: str
    L: int
    E: int
    D: int
    scale: int = 1


ATTN_EDGES = ((0, 2), (1, 3), (2, 3), (3, 4), (4, 5), (5, 6))  # hw_exp.py evaluate_layer, fusion_edges
MLP_EDGES = ((0, 1),)  # identity / causal layers: MLP_FC1 -> MLP_FC2


def layer_gemms(g: Genome, i: int, seq: int, mode: str) -> list[Gemm]:
    """The GEMMs of layer i at block_size `seq` in mode prefill | decode (hw_exp.py evaluate_layer)."""
    lg, d = g.layers[i], g.d_model
    if not lg.active:
        return []
    proj = 1 if mode == "decode" else seq  # proj_seq
    mlp = [Gemm("MLP_FC1", proj, d, lg.d_mlp), Gemm("MLP_FC2", proj, lg.d_mlp, d)]
    if not lg.attn:
        return mlp
    rows = lg.n_h // lg.n_kv  # seq_length = n_head // n_kv_groups, in both modes
    return [Gemm("QK_gen", proj, d, lg.d_qk * (lg.n_h + lg.n_kv)), Gemm("V_gen", proj, d, lg.d_v * lg.n_kv),
            Gemm("QK_attn", rows, lg.d_qk, seq, lg.n_kv), Gemm("PV_attn", rows, seq, lg.d_v, lg.n_kv),
            Gemm("ATTN_proj", proj, lg.n_h * lg.d_v, d)] + mlp


def padded(s: Substrate, D: int) -> int:
    """hw_exp.py _pad_D_for_arch: D rounded up to the mesh when D > mesh and D % mesh != 0."""
    return -(-D // s.pad_d) * s.pad_d if s.pad_d and D > s.pad_d and D % s.pad_d else D


def _divisors(n: int, cap: int) -> list[int]:
    return [f for f in range(1, min(n, cap) + 1) if n % f == 0]


def spatial(s: Substrate, E: int, D: int) -> tuple[int, int]:
    """(s_E, s_D): the exact factors of E and D over the spatial levels with the most PEs busy."""
    best = (1, 1)
    options = [[(e, d) for e in (_divisors(E, n) if "E" in dims else [1])
                for d in (_divisors(D, n) if "D" in dims else [1]) if e * d <= n] for n, dims in s.levels]
    for choice in product(*options):
        e = d = 1
        for fe, fd in choice:
            e, d = e * fe, d * fd
        if E % e == 0 and D % d == 0 and e * d > best[0] * best[1]:
            best = (e, d)
    return best


def gemm_cost(s: Substrate, t, L: int, E: int, D: int) -> dict[str, float]:
    """Cycles, energy (pJ) and DRAM traffic of one (L × E)·(E × D) int8 GEMM; `t` the template (energy table)."""
    D = padded(s, D)
    if s.pad_d:
        sE, _ = spatial(s, E, 1)
        folds_d = -(-D // s.pad_d)
    else:
        sE, folds_d = spatial(s, E, D)[0], D // spatial(s, E, D)[1]
    compute = L * (E // sE) * folds_d
    parts = -(-E * D // s.weight_store) if s.weight_store else 1
    sD = D // folds_d
    block = L * E + (0 if s.psum_buf else L * D * t.psum_bytes) + (E * sD if s.weights_share else 0)
    if s.input_buf and block > s.input_buf:
        parts = -(-D // ((s.psum_buf or s.input_buf - L * sE) // (L * t.psum_bytes)))  # inputs re-read per D tile
    in_rd, out_wr, out_rd = L * E * parts, L * D, 0
    fits = lambda e, d: L * e + e * sD + L * d * t.psum_bytes <= s.glb  # noqa: E731
    if s.glb and not fits(E, sD) and not fits(sE, D):  # E split at DRAM with partial sums spilled
        k = -(-E // ((s.glb - L * sD * t.psum_bytes) // (L + sD) // sE * sE))
        out_wr, out_rd = L * D * (1 + (k - 1) * t.psum_bytes), L * D * (k - 1) * t.psum_bytes
    port = (L * E * folds_d + (E * D if s.feed[1] else 0)) / s.feed[0] if s.feed else 0.0
    cycles = max(compute, (E * D + in_rd + out_rd) / s.dram_read, out_wr / s.dram_write, port)
    dram = E * D + in_rd + out_wr + out_rd
    energy = L * E * D * (t.mac_pj + t.reg_pj_per_mac) + dram * t.dram_pj_per_byte + cycles * t.leak_pj_per_cycle
    folds_e = E // sE
    if "rs" in t.dataflows:  # row-stationary: each PE keeps the largest exact slice of E its weight spad holds
        folds_e //= max(f for f in _divisors(folds_e, t.pe_weight_bytes))
    energy += _buffer_energy(t, L, E, D, folds_d, folds_e, in_rd)
    return {"cycles": cycles, "energy": energy, "in_rd": in_rd, "out_wr": out_wr, "out_rd": out_rd,
            "compulsory": {"in_rd": L * E, "out_wr": L * D, "out_rd": 0}}


def _buffer_energy(t, L: int, E: int, D: int, folds_d: int, folds_e: int, in_rd: int) -> float:
    """On-chip accesses of the canonical mapping: the innermost buffer holding an operand feeds the array."""
    psum = L * D * t.psum_bytes * (2 * folds_e - 1) / 2  # reads = writes = half the partial-sum accesses
    e = 0.0
    for x, fill, feed in (("input", in_rd, L * E * folds_d), ("weight", E * D, E * D)):
        holders = [b for b in t.buffers if x in b.holds]
        for k, b in enumerate(holders):
            e += fill * b.write_pj_per_byte + (feed if k == len(holders) - 1 else fill) * b.read_pj_per_byte
    holders = [b for b in t.buffers if "output" in b.holds]
    for k, b in enumerate(holders):
        inner = k == len(holders) - 1
        e += (psum * (b.read_pj_per_byte + b.write_pj_per_byte) if inner else L * D * b.write_pj_per_byte)
        e += L * D * b.read_pj_per_byte
    return e


def edge_savings(s: Substrate, t, gemms: list[Gemm], costs: list[dict[str, float]],
                 traffic: str = "compulsory") -> list[tuple[str, float, float]]:
    """(edge, cycles, energy pJ) per fused edge of a layer (hw_exp.py _estimate_saved_cycles, before the cap);
    traffic: compulsory (each output written, each input read once) | modelled (with the re-reads above)."""
    out = []
    for p, c in ATTN_EDGES if len(gemms) == 7 else MLP_EDGES:
        scale = max(gemms[p].scale, gemms[c].scale)  # "use the max scale since both endpoints contribute"
        prod, cons = (costs[p], costs[c]) if traffic == "modelled" else (costs[p]["compulsory"], costs[c]["compulsory"])
        cyc = prod["out_wr"] / s.dram_write + (prod["out_rd"] + cons["in_rd"]) / s.dram_read
        en = (prod["out_wr"] + prod["out_rd"] + cons["in_rd"]) * t.dram_pj_per_byte
        out.append((f"{gemms[p].name}->{gemms[c].name}", cyc * scale, en * scale))
    return out


def fusion(s: Substrate, t, gemms: list[Gemm], costs: list[dict[str, float]],
           traffic: str = "compulsory") -> tuple[float, float]:
    """(cycles, energy pJ) the release subtracts for a layer (hw_exp.py compute_fusion_savings: energy capped at
    90% of the layer's GEMM energy)."""
    edges = edge_savings(s, t, gemms, costs, traffic)
    total = sum(c["energy"] * g.scale for g, c in zip(gemms, costs))
    return sum(e[1] for e in edges), min(sum(e[2] for e in edges), 0.9 * total)


def layer_cost(name: str, g: Genome, i: int, seq: int, mode: str, traffic: str = "compulsory") -> dict[str, float]:
    """One layer's cycles and energy (pJ) after fusion savings, and the savings themselves."""
    s, t = SUBSTRATES[name], _template(name)
    gemms = layer_gemms(g, i, seq, mode)
    if not gemms:
        return {"cycles": 0.0, "energy": 0.0, "saved_cycles": 0.0, "saved_energy": 0.0}
    costs = [gemm_cost(s, t, x.L, x.E, x.D) for x in gemms]
    cyc = sum(c["cycles"] * x.scale for x, c in zip(gemms, costs))
    en = sum(c["energy"] * x.scale for x, c in zip(gemms, costs))
    sc, se = fusion(s, t, gemms, costs, traffic)
    return {"cycles": max(0.0, cyc - sc), "energy": max(0.0, en - se), "saved_cycles": sc, "saved_energy": se}


def layer_edges(name: str, g: Genome, i: int, seq: int, mode: str,
                traffic: str = "compulsory") -> list[tuple[str, float, float]]:
    """Layer i's fused edges on substrate `name`: (edge, cycles, energy pJ) saved."""
    s, t = SUBSTRATES[name], _template(name)
    gemms = layer_gemms(g, i, seq, mode)
    return edge_savings(s, t, gemms, [gemm_cost(s, t, x.L, x.E, x.D) for x in gemms], traffic)


@lru_cache(maxsize=None)
def _template(name: str):
    """The template (energy table, buffers) the backend runs under conventions=llmforge: constants, not the mapper."""
    from backends.registry import build_backend

    return build_backend(name, conventions="llmforge").t


def release_reading(name: str, g: Genome, prefill: int = 256, decode: int = 256,
                    traffic: str = "compulsory") -> dict[str, float]:
    """TTFT, TPOT (ms) and energy per token (µJ) the release's pipeline would report for genome g on `name`;
    `traffic` as the backend's `llmforge.fusion_traffic` (modelled ↔ mapper)."""
    if name not in SUBSTRATES:
        raise KeyError(f"substrate {name!r} has no reading; allowed: {', '.join(SUBSTRATES)}")
    n = len(g.layers)
    pre = [layer_cost(name, g, i, prefill, "prefill", traffic) for i in range(n)]
    dec = [layer_cost(name, g, i, decode, "decode", traffic) for i in range(n)]
    total = lambda rows, k: sum(r[k] for r in rows)  # noqa: E731
    energy = total(pre, "energy") + decode * total(dec, "energy")
    return {"ttft_ms": total(pre, "cycles") / 1e6, "tpot_ms": total(dec, "cycles") / 1e6,
            "energy_per_token_uj": energy * 1e-6 / (prefill + decode)}
