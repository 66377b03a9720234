"""What the LLMForge release's Timeloop pipeline would report, by hand-derived closed forms (no mapper search).

The release's per-model driver (`hw_exp.py`) is not public; what is (../shared/reference/llmforge-release)
pins down the rest. Our reading, each point with its source:

- Operators: per active layer the six matmuls of hw_eval/run.py — KQV (E = d_model, D = (n_h + n_kv)·d_qk +
  n_kv·d_v), KTQ, VScores, Out, FF1, FF2 (a 2-matrix MLP). No embedding, LM head or norm latency (run.py
  costs normalization ops for energy only). Attention per KV group (L = n_h/n_kv query heads × tokens).
- Passes (evaluators/hw_timeloop.py): prefill with block_size = prefill_len (L = prefill tokens, context =
  prefill_len, full square scores); decode with block_size = decode_len (L = 1, context = decode_len), and
  TTFT = prefill cycles / 1e9, TPOT = decode cycles / 1e9 (1 GHz for every substrate, DXE's 200 MHz too).
- Per GEMM, Timeloop's latency is the slowest of compute and each level's traffic over its bandwidth:
      compute = L · (E / s_E) · (D / s_D),   s_E, s_D the spatial factors the arch's constraints allow;
  the 'uber' mapspace factorizes exactly, so s is the largest product of allowed factors that divides the
  dimension (eyeriss: D = 576 uses 12 of 14 columns), except on DXE variants whose D is padded to the mesh
  (hw_timeloop.py: `_pad_D_for_arch`);
      DRAM = max(reads / read_bandwidth, writes / write_bandwidth),
  reads = compulsory inputs + weights, writes = outputs (int8): the mapper's best mapping keeps the reused
  operand on chip (where DRAM binds, on dxe_relaxed, a weight matrix larger than the 3 MB of weight memory
  streams in parts and the inputs are re-read once per part; elsewhere prefill is compute-bound); of the on-chip
  ports only the one feeding inputs can bind (Gemmini's 16 B/cycle scratchpad, which weights also cross, and
  dxe_relaxed's 16 B/cycle global SRAM): inputs are multicast across D's spatial factor, so each is read once
  per D fold — exactly the array's rate, plus the weights. Eyeriss, Simba and FLAT feed inputs faster than
  their arrays consume them (arch.yaml bandwidths).
- FLAT's fusion (flat_edge/arch.yaml: the fusion model subtracts inter-op DRAM traffic): scores stay on chip.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from forge.genome import Genome

ALL = ("E", "D")


@dataclass(frozen=True)
class Substrate:
    """Spatial levels as (size, dims it may split) and DRAM bandwidths, from the release's arch/constraints YAMLs."""

    levels: tuple[tuple[int, tuple[str, ...]], ...]
    dram_read: float
    dram_write: float
    pad_d: int = 0  # DXE variants: D padded to a multiple of this instead of factorized
    fused_scores: bool = False
    feed: tuple[float, bool] | None = None  # the buffer port feeding inputs (B/cycle, weights pass it too)
    weight_store: int = 0  # on-chip weight bytes: a larger weight matrix streams in parts, inputs re-read per part


SUBSTRATES = {
    # gemmini/arch.yaml + constraints.yaml: PERows D=16, PECols E=16; DRAM 4 / 4 B/cycle
    "gemmini": Substrate(((16, ("D",)), (16, ("E",))), 4, 4, feed=(16, True)),  # Scratchpad read_bandwidth 16
    # eyeriss/arch.yaml: PE_column meshX 14 (D only), PE meshY 12 (E and D); DRAM 4 / 4
    "eyeriss": Substrate(((14, ("D",)), (12, ALL)), 4, 4),
    # simba/arch.yaml: PE meshX 16 (D, E), distributed_buffers meshY 4 (D), reg_mac meshY 4 (E); DRAM 4 / 4
    "simba": Substrate(((16, ALL), (4, ("D",)), (4, ("E",))), 4, 4),
    # flat_edge/arch.yaml: PE_row meshY 32 (D), PE_col meshX 32 (E); DRAM 25 / 25; fused attention
    "flat": Substrate(((32, ("D",)), (32, ("E",))), 25, 25, fused_scores=True),
    # dxe_relaxed: DXT 8 × VAC 16 over D (forced, padded), mac_lane 16 over E; DRAM 4 / 4
    "dxe-relaxed": Substrate(((16, ("E",)),), 4, 4, pad_d=128, feed=(16, False),  # global_sram 16 B/cycle
                             weight_store=128 * 24576),  # wmem 24 KB × 128 cores
}


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


def gemm_cycles(s: Substrate, L: int, E: int, D: int, fused_in: bool = False, fused_out: bool = False) -> float:
    """Timeloop-style latency of one (L × E)·(E × D) int8 GEMM on a substrate."""
    if s.pad_d:
        sE, _ = spatial(s, E, 1)
        folds_d = -(-D // s.pad_d)
    else:
        sE, sD = spatial(s, E, D)
        folds_d = D // sD
    compute = L * (E // sE) * folds_d
    parts = -(-E * D // s.weight_store) if s.weight_store else 1
    reads = E * D + (0 if fused_in else L * E * parts)
    writes = 0 if fused_out else L * D
    port = 0.0
    if s.feed:  # inputs are multicast across D's spatial factor, so read once per D fold
        port = (L * E * folds_d + (E * D if s.feed[1] else 0)) / s.feed[0]
    return max(compute, reads / s.dram_read, writes / s.dram_write, port)


def layer_cycles(s: Substrate, g: Genome, i: int, tokens: int, context: int) -> float:
    """The six matmuls of layer i for `tokens` new tokens over `context` keys."""
    lg, d = g.layers[i], g.d_model
    if not lg.active:
        return 0.0
    c = gemm_cycles(s, tokens, d, lg.d_mlp) + gemm_cycles(s, tokens, lg.d_mlp, d)
    if lg.attn:
        R = -(-lg.n_h // lg.n_kv)
        c += gemm_cycles(s, tokens, d, (lg.n_h + lg.n_kv) * lg.d_qk + lg.n_kv * lg.d_v)
        c += lg.n_kv * gemm_cycles(s, R * tokens, lg.d_qk, context, fused_out=s.fused_scores)
        c += lg.n_kv * gemm_cycles(s, R * tokens, context, lg.d_v, fused_in=s.fused_scores)
        c += gemm_cycles(s, tokens, lg.n_h * lg.d_v, d)
    return c


def release_reading(name: str, g: Genome, prefill: int = 256, decode: int = 256) -> dict[str, float]:
    """TTFT and TPOT (ms) the release's pipeline would report for genome g on substrate `name`."""
    if name not in SUBSTRATES:
        raise KeyError(f"substrate {name!r} has no reading; allowed: {', '.join(SUBSTRATES)}")
    s, n = SUBSTRATES[name], len(g.layers)
    pre = sum(layer_cycles(s, g, i, prefill, prefill) for i in range(n))
    dec = sum(layer_cycles(s, g, i, 1, decode) for i in range(n))
    return {"ttft_ms": pre / 1e6, "tpot_ms": dec / 1e6}
