"""Forge IHA decoder for Hugging Face `transformers` (remote code of `forge-export format=hf`).

Infinite-Head Attention (LLMForge §3.1): every block has its own n_h query heads, n_kv K/V groups,
query/key width d_qk and value width d_v (n_kv | n_h; head h reads group floor(h / (n_h/n_kv))).
A block with `attn: false` has identity attention (no attention, no attention norm, no KV cache).
A block with `window: w` (w > 0) attends only its last w positions: query i sees keys i - w < j <= i.

A gene's meaning is written once, in `forge/lm/model.py`: this file holds only the transformers plumbing (config,
cache, masks, generation) around forge.lm.model's `Attention`, `MLP` and `Block`. In the package it imports them;
`forge-export format=hf` writes it with that import replaced by forge/lm/model.py's own definitions, verbatim
(search.hf_export.modeling_source), so the exported file stands alone (torch + transformers) and computes
what the search trained.
"""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from forge.lm.model import Attention, Block, _norm, attend  # FORGE-MODEL: replaced by forge/lm/model.py at export

try:  # transformers >= 5 spells it PreTrainedConfig; 4.x PretrainedConfig
    from transformers import PreTrainedConfig as _BaseConfig
except ImportError:  # pragma: no cover
    from transformers import PretrainedConfig as _BaseConfig


class ForgeConfig(_BaseConfig):
    """Global choices plus `layers`: one dict {attn, n_h, n_kv, d_qk, d_v, d_mlp[, window]} per block.

    `window` (absent or 0 = full causal attention) is the block's sliding attention window in tokens.

    `num_hidden_layers` counts the blocks that keep a KV cache (attention blocks): the cache is
    indexed by attention block, so identity blocks take no cache slot. `num_blocks` counts every block
    (attention and identity-attention, each with its MLP), the model's depth; config.json holds both.
    """

    model_type = "forge_iha"

    def __init__(self, vocab_size: int = 50257, hidden_size: int = 64, max_position_embeddings: int = 128,
                 layers: list | None = None, mlp: str = "gelu", norm: str = "rmsnorm", bias: str = "none",
                 pos: str = "rope", parallel: bool = False, rope_theta: float = 10000.0, norm_eps: float = 1e-5,
                 pad_attn: bool = True, tie_word_embeddings: bool = True, use_cache: bool = True,
                 **kwargs) -> None:
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.layers = [dict(x) for x in (layers or [{"attn": True, "n_h": 1, "n_kv": 1, "d_qk": 64, "d_v": 64,
                                                     "d_mlp": 256}])]
        self.mlp, self.norm, self.bias, self.pos, self.parallel = mlp, norm, bias, pos, parallel
        self.rope_theta, self.norm_eps, self.pad_attn, self.use_cache = rope_theta, norm_eps, pad_attn, use_cache
        self.num_hidden_layers = sum(1 for x in self.layers if x.get("attn", True))  # KV-cache slots
        kwargs.pop("num_blocks", None)  # derived, like num_hidden_layers: read back from config.json, recomputed
        self.num_blocks = len(self.layers)
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)


def forge_cfg(config: ForgeConfig) -> SimpleNamespace:
    """What forge.lm.model's blocks read from an IHAConfig: the genome's globals, norm_eps and pad_attn."""
    genome = SimpleNamespace(d_model=config.hidden_size, mlp=config.mlp, norm=config.norm, bias=config.bias,
                             pos=config.pos, parallel=config.parallel, **getattr(config, "genes", {}))
    return SimpleNamespace(genome=genome, norm_eps=config.norm_eps, pad_attn=config.pad_attn)


def layer_gene(spec: dict) -> SimpleNamespace:
    """One block's genes as forge.lm.model reads a LayerGene (`attn` on and no window unless the spec says so)."""
    return SimpleNamespace(**{"attn": True, "window": 0, **spec})


def rope_tables(positions: torch.Tensor, dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (B, 1, T, dim) for rotate-half RoPE (RoFormer eq. 34, Llama layout), float32: per sequence, so a
    left-padded batch rotates each prompt from its own first token."""
    inv_freq = base ** (-torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim)
    ang = positions.float()[..., None] * inv_freq  # (B, T, dim/2)
    ang = torch.cat([ang, ang], dim=-1)[:, None]
    return ang.cos(), ang.sin()


@dataclasses.dataclass
class CacheView:
    """What a block's attention reads in place of forge.lm.model's KVCache: transformers' cache, the cache slot
    of each block (identity blocks take none) and the attention mask of each window."""

    cache: Cache | None
    slot: list[int]
    masks: dict[int, torch.Tensor | None]


class ForgeAttention(Attention):
    """forge.lm.model's attention (projections, RoPE, grouped SDPA) over transformers' cache and masks."""

    def forward(self, x: torch.Tensor, rope: dict | None, view: CacheView, li: int) -> torch.Tensor:
        q, k, v = self.project(x, rope)
        if view.cache is not None:
            k, v = view.cache.update(k, v, view.slot[li])
        return self.merge(attend(q, k, v, view.masks[self.window], self.pad))


class ForgeBlock(Block):
    """forge.lm.model's block (norms, MLP, residual) with ForgeAttention."""

    attention = ForgeAttention


class ForgePreTrainedModel(PreTrainedModel):
    """transformers' plumbing (config class, weight init for new modules, SDPA) shared by the Forge classes."""

    config_class = ForgeConfig
    base_model_prefix = "model"
    _no_split_modules = ["ForgeBlock"]
    supports_gradient_checkpointing = False
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        """GPT-2 init N(0, 0.02) for new (untrained) weights; norms 1, biases 0."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)


class ForgeModel(ForgePreTrainedModel):
    """Embeddings → blocks → final norm (hidden states; the LM head lives in ForgeForCausalLM)."""

    def __init__(self, config: ForgeConfig) -> None:
        super().__init__(config)
        self.slot = [sum(1 for x in config.layers[:i] if x.get("attn", True)) for i in range(len(config.layers))]
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.wpe = nn.Embedding(config.max_position_embeddings, config.hidden_size) if config.pos == "learned" else None
        self.blocks = nn.ModuleList(ForgeBlock(forge_cfg(config), layer_gene(s)) for s in config.layers)
        self.ln_f = _norm(forge_cfg(config))
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.wte

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.wte = value

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, cache: Cache | None = None) -> torch.Tensor:
        B, T = input_ids.shape
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = torch.arange(past, past + T, device=input_ids.device)[None].expand(B, T)
        x = self.wte(input_ids)
        if self.wpe is not None:
            x = x + self.wpe(position_ids)
        rope = None
        if self.config.pos == "rope":
            dims = {b.attn.d_qk for b in self.blocks if b.attn is not None}
            rope = {d: rope_tables(position_ids, d, self.config.rope_theta) for d in dims}
        windows = {b.attn.window for b in self.blocks if b.attn is not None}
        masks = {w: _mask(T, past, attention_mask, input_ids.device, w) for w in windows}  # one per distinct window
        view = CacheView(cache, self.slot, masks)
        for li, block in enumerate(self.blocks):
            x = block(x, rope, view, li)
        return self.ln_f(x)


def _mask(T: int, past: int, attention_mask: torch.Tensor | None, device: torch.device,
          window: int = 0) -> torch.Tensor | None:
    """Bool (B|1, 1, T, past+T) mask: causal, within `window` keys (0 = all), and, where attention_mask has
    zeros, padding; None = plain causal."""
    padded = attention_mask is not None and not bool(attention_mask.all())
    banded = 0 < window < past + T
    if not padded and not banded and (past == 0 or T == 1):
        return None
    i = torch.arange(T, device=device)[:, None] + past
    j = torch.arange(past + T, device=device)[None, :]
    keep = ((j <= i) & (j > i - window) if banded else j <= i)[None, None]
    if padded:
        keep = keep & attention_mask[:, None, None, -(past + T):].bool()
        keep = keep | ~keep.any(-1, keepdim=True)  # a fully padded query row attends anywhere (its output is unused)
    return keep


class ForgeForCausalLM(ForgePreTrainedModel, GenerationMixin):
    """Causal LM head over ForgeModel; generate() keeps a DynamicCache with one slot per attention block."""

    _tied_weights_keys = {"lm_head.weight": "model.wte.weight"}

    def __init__(self, config: ForgeConfig) -> None:
        super().__init__(config)
        self.model = ForgeModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.model.wte

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, cache: Cache | None = None,
                labels: torch.Tensor | None = None, use_cache: bool | None = None,
                past_key_values: Cache | None = None, **kwargs) -> CausalLMOutputWithPast:
        """Logits (B, T, V); `cache` (or the older name `past_key_values`) carries K/V between calls."""
        cache = cache if cache is not None else past_key_values
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if use_cache and cache is None:
            cache = DynamicCache()
        h = self.model(input_ids, position_ids, attention_mask, cache if use_cache else None)
        logits = self.lm_head(h)
        loss = None
        if labels is not None:  # HF convention: labels are the inputs; position t predicts token t+1
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)).float(), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        names = {f.name for f in dataclasses.fields(CausalLMOutputWithPast)}
        key = "cache" if "cache" in names else "past_key_values"
        return CausalLMOutputWithPast(loss=loss, logits=logits, **{key: cache if use_cache else None})


__all__ = ["ForgeConfig", "ForgeModel", "ForgeForCausalLM", "ForgePreTrainedModel", "ForgeBlock", "ForgeAttention"]
