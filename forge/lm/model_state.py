"""The IHA model's plumbing around the gene meanings in forge/lm/model.py: its numerical settings and its KV cache.

They live apart because the HF export ships forge/lm/model.py's definitions verbatim and brings its own config and
cache (forge_hf/modeling_forge.py); `from forge.lm.model import IHAConfig, KVCache` keeps working.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from forge.genomes.genome import Genome, GenomeError


@dataclass(frozen=True)
class IHAConfig:
    """A genome plus the few numerical choices the genome does not fix."""

    genome: Genome
    rope_base: float = 10000.0  # RoFormer / Llama default θ
    norm_eps: float = 1e-5
    init_std: float = 0.02  # GPT-2 / nanoGPT initialisation
    pad_attn: bool = True  # zero-pad d_qk/d_v to a common width so the fused SDPA kernel applies

    def __post_init__(self) -> None:
        if not isinstance(self.genome, Genome):
            raise GenomeError(f"model genome = {type(self.genome).__name__} is invalid; allowed: a forge.genomes.genome.Genome "
                              "(build one with genome_from_dict or load_genome)")
        if self.genome.pos == "rope":
            for i, g in enumerate(self.genome.layers):
                if g.active and g.attn and g.d_qk % 2:
                    raise GenomeError(f"layers[{i}].d_qk = {g.d_qk} is invalid with pos='rope'; "
                                      "allowed: an even d_qk (RoPE rotates pairs), or pos='learned'")


@dataclass
class KVCache:
    """Pre-allocated K/V per active layer (None for identity attention); `length` = positions seen.

    A full layer holds max_len slots (position p in slot p); a layer with window w holds min(w, max_len)
    slots used as a ring (position p in slot p mod w)."""

    k: list[torch.Tensor | None]  # (B, n_kv, slots, d_qk), keys stored after RoPE
    v: list[torch.Tensor | None]  # (B, n_kv, slots, d_v)
    max_len: int
    length: int = 0

    def reset(self) -> None:
        self.length = 0
