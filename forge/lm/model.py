"""The IHA decoder LM in PyTorch (nanoGPT-style), built from any `Genome`.

Infinite-Head Attention (LLMForge §3.1): every layer has its own n_h query heads, n_kv K/V groups, query/key dim
d_qk and value dim d_v; the only constraint is n_kv | n_h. Group g serves R = n_h/n_kv query heads under the grouped
mapping g(h) = floor(h / R) (0-based form of the paper's g(h) = 1 + floor((h-1)/R)); SDPA's `enable_gqa` is it.

    Q = x W_q : d → n_h·d_qk      K = x W_k : d → n_kv·d_qk      V = x W_v : d → n_kv·d_v
    head_h = softmax(Q_h K_g(h)^T / sqrt(d_qk)) V_g(h)           y = concat_h(head_h) W_o : n_h·d_v → d

Identity-attention layers have no attention block and no attention norm; pruned layers are absent. The parameter
count equals `forge.lm.workload.analyze(genome)["params"]` exactly (tested): the model and every backend agree.

Sliding-window attention (the per-layer `window` gene, 0 = full causal): with window w > 0 query position i attends
keys j with i - w < j <= i. Training applies it as a banded boolean SDPA mask; KV-cached decoding keeps only the
last w positions of that layer in a rolling cache (position p in slot p mod w), never more than w positions.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from forge.errors import UserError
from forge.genomes.genome import Genome, LayerGene
from forge.lm.hook_lists import guard
from forge.lm.model_state import IHAConfig, KVCache


def layer_window(gene: LayerGene) -> int:
    """The layer's attention window (0 = full causal); genomes that predate the gene have none."""
    return int(getattr(gene, "window", 0) or 0)


def _norm(cfg: IHAConfig) -> nn.Module:
    g = cfg.genome
    if g.norm == "rmsnorm":  # RMSNorm has no bias in any variant
        return nn.RMSNorm(g.d_model, eps=cfg.norm_eps)
    return nn.LayerNorm(g.d_model, eps=cfg.norm_eps, bias=g.bias == "all")


def rope_tables(positions: torch.Tensor, dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (T, dim) for rotate-half RoPE (RoFormer eq. 34, GPT-NeoX/Llama layout)."""
    inv_freq = base ** (-torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) / dim)
    ang = positions.float()[:, None] * inv_freq[None, :]  # (T, dim/2)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, dim) rotated by position; computed in float32, returned in x's dtype."""
    x1, x2 = (xf := x.float()).chunk(2, dim=-1)
    return (xf * cos + torch.cat([-x2, x1], dim=-1) * sin).to(x.dtype)


def _causal_mask(q_len: int, past: int, device: torch.device) -> torch.Tensor | None:
    """Bool mask (q_len, past+q_len): query i (at position past+i) sees keys j <= past+i."""
    if q_len == 1:
        return None
    i, j = torch.arange(q_len, device=device)[:, None], torch.arange(past + q_len, device=device)[None, :]
    return j <= past + i


def _window_mask(q_len: int, past: int, window: int, device: torch.device) -> torch.Tensor:
    """Bool mask (q_len, past+q_len): query at position past+i sees keys j with past+i-window < j <= past+i."""
    qpos, j = torch.arange(past, past + q_len, device=device)[:, None], torch.arange(past + q_len, device=device)
    return (j <= qpos) & (j > qpos - window)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, pad: bool) -> torch.Tensor:
    """SDPA under the grouped mapping (enable_gqa: head h reads group floor(h/R)), scale 1/sqrt(d_qk).

    The fused CPU kernel needs d_qk == d_v and otherwise falls back to the slow math path, so with
    `pad` the narrower side is zero-padded: zeros add nothing to q·k, and padded value columns are
    sliced off, so the result is exact (bench/RESULTS.md, issue 2, has the speed-up).
    """
    d_qk, d_v = q.size(-1), v.size(-1)
    causal = mask is None and q.size(-2) > 1
    if pad and d_qk != d_v:
        w = max(d_qk, d_v)
        q, k, v = F.pad(q, (0, w - d_qk)), F.pad(k, (0, w - d_qk)), F.pad(v, (0, w - d_v))
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True,
                                       scale=1.0 / math.sqrt(d_qk))
    return y[..., :d_v]


def _rows(lin: nn.Linear, x: torch.Tensor, G: int, P: int, g: int, p: int) -> torch.Tensor:
    """x through lin's supernet slice (its weights shared): of G output groups of P rows, the first p of the first g."""
    w = lin.weight.view(G, P, -1)[:g, :p].reshape(g * p, -1)
    return F.linear(x, w, None if lin.bias is None else lin.bias.view(G, P)[:g, :p].reshape(-1))


def _cols(lin: nn.Linear, x: torch.Tensor, G: int, P: int, g: int, p: int) -> torch.Tensor:
    """x through lin's supernet slice: of G input groups of P columns, the first p of the first g (the whole bias)."""
    return F.linear(x, lin.weight.view(-1, G, P)[:, :g, :p].reshape(-1, g * p), lin.bias)


class Attention(nn.Module):
    """One IHA attention block with its own (n_h, n_kv, d_qk, d_v)."""

    def __init__(self, cfg: IHAConfig, gene: LayerGene) -> None:
        super().__init__()
        d, qkv_bias, all_bias = cfg.genome.d_model, cfg.genome.bias != "none", cfg.genome.bias == "all"
        self.n_h, self.n_kv, self.d_qk, self.d_v = gene.n_h, gene.n_kv, gene.d_qk, gene.d_v
        self.pad, self.window = cfg.pad_attn, layer_window(gene)
        self.q_proj = nn.Linear(d, gene.n_h * gene.d_qk, bias=qkv_bias)
        self.k_proj = nn.Linear(d, gene.n_kv * gene.d_qk, bias=qkv_bias)
        self.v_proj = nn.Linear(d, gene.n_kv * gene.d_v, bias=qkv_bias)
        self.o_proj = nn.Linear(gene.n_h * gene.d_v, d, bias=all_bias)

    def project(self, x: torch.Tensor, rope: dict | None,
                gene: LayerGene | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of x (B, T, d), RoPE applied: shared with the exported HF code (forge_hf), which keeps its own
        cache. `gene`: the supernet slice it names (first n_h heads, n_kv groups, d_qk/d_v dims)."""
        if gene is None:  # the plain layers (module hooks and wrappers see them)
            n_h, n_kv, d_qk, d_v = self.n_h, self.n_kv, self.d_qk, self.d_v
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        else:
            n_h, n_kv, d_qk, d_v = gene.n_h, gene.n_kv, gene.d_qk, gene.d_v
            q = _rows(self.q_proj, x, self.n_h, self.d_qk, n_h, d_qk)
            k = _rows(self.k_proj, x, self.n_kv, self.d_qk, n_kv, d_qk)
            v = _rows(self.v_proj, x, self.n_kv, self.d_v, n_kv, d_v)
        q = q.unflatten(-1, (n_h, d_qk)).transpose(1, 2)  # (B, T, n_h·d_qk) -> (B, n_h, T, d_qk)
        k, v = k.unflatten(-1, (n_kv, d_qk)).transpose(1, 2), v.unflatten(-1, (n_kv, d_v)).transpose(1, 2)
        if rope is not None:
            cos, sin = rope[d_qk]
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        return q, k, v

    def merge(self, y: torch.Tensor, gene: LayerGene | None = None) -> torch.Tensor:
        """(B, n_h, T, d_v) -> (B, T, d) through o_proj (its first n_h * d_v inputs for a supernet slice)."""
        B, n_h, T, d_v = y.shape
        y = y.transpose(1, 2).reshape(B, T, n_h * d_v)
        return self.o_proj(y) if gene is None else _cols(self.o_proj, y, self.n_h, self.d_v, n_h, d_v)

    def forward(self, x: torch.Tensor, rope: dict | None, cache: KVCache | None, li: int,
                gene: LayerGene | None = None) -> torch.Tensor:
        """`gene`: run the supernet slice it names (first n_h heads, n_kv groups, d_qk/d_v dims, its window)."""
        T = x.size(1)
        q, k, v = self.project(x, rope, gene)
        w = layer_window(gene) if gene is not None else self.window
        if w and (cache is not None or T > w):
            k, v, mask = self._windowed(k, v, cache, li, w)
        else:
            past = 0
            if cache is not None:
                past = cache.length
                cache.k[li][:, :, past:past + T] = k
                cache.v[li][:, :, past:past + T] = v
                k, v = cache.k[li][:, :, :past + T], cache.v[li][:, :, :past + T]
            mask = _causal_mask(T, past, x.device) if past else None  # past == 0: plain causal
        return self.merge(attend(q, k, v, mask, self.pad), gene)  # (B, T, d)

    def _windowed(self, k: torch.Tensor, v: torch.Tensor, cache: KVCache | None, li: int,
                  w: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Keys/values a windowed layer attends and its banded mask; with a cache, read then update the ring.

        The ring holds the last min(past, w) positions; they are gathered in position order before the
        new keys, and the last min(T, w) new positions are written back into their slots."""
        T = k.size(2)
        if cache is None:
            return k, v, _window_mask(T, 0, w, k.device)
        past, slots = cache.length, cache.k[li].size(2)
        old = torch.arange(max(0, past - w), past, device=k.device)
        ks = torch.cat([cache.k[li][:, :, old % slots], k], dim=2)
        vs = torch.cat([cache.v[li][:, :, old % slots], v], dim=2)
        mask = _window_mask(T, past, w, k.device)[:, max(0, past - w):]
        new = torch.arange(past + T - min(T, slots), past + T, device=k.device)
        cache.k[li][:, :, new % slots] = k[:, :, T - len(new):]
        cache.v[li][:, :, new % slots] = v[:, :, T - len(new):]
        return ks, vs, mask


class MLP(nn.Module):
    """GELU: down(gelu(up x)) — 2 matrices; SwiGLU: down(silu(gate x) ⊙ up x) — 3 matrices."""

    def __init__(self, cfg: IHAConfig, d_mlp: int) -> None:
        super().__init__()
        d, bias = cfg.genome.d_model, cfg.genome.bias == "all"
        self.gate = nn.Linear(d, d_mlp, bias=bias) if cfg.genome.mlp == "swiglu" else None
        self.up = nn.Linear(d, d_mlp, bias=bias)
        self.down = nn.Linear(d_mlp, d, bias=bias)

    def forward(self, x: torch.Tensor, d_mlp: int | None = None) -> torch.Tensor:
        """`d_mlp`: the supernet slice of the first d_mlp hidden units (None: the plain layers)."""
        if d_mlp is None:
            gate, up = None if self.gate is None else self.gate(x), self.up(x)
        else:  # the first d_mlp hidden units (up's and gate's outputs, down's inputs)
            gate, up = (None if m is None else _rows(m, x, 1, m.out_features, 1, d_mlp) for m in (self.gate, self.up))
        h = F.gelu(up) if gate is None else F.silu(gate) * up
        return self.down(h) if d_mlp is None else _cols(self.down, h, 1, self.down.in_features, 1, d_mlp)


class Block(nn.Module):
    """Pre-norm block; `parallel` = GPT-NeoX x + attn(ln1 x) + mlp(ln2 x)."""

    attention = Attention  # the exported HF code swaps in its cache handling (forge_hf.modeling_forge)
    hooks: list = []  # fn(block, cfg, gene): a gene's meaning, by forge.lm.hooks.hook() only (guard, below)

    def __init__(self, cfg: IHAConfig, gene: LayerGene) -> None:
        super().__init__()
        self.parallel = cfg.genome.parallel
        self.ln_attn = _norm(cfg) if gene.attn else None
        self.attn = self.attention(cfg, gene) if gene.attn else None
        self.ln_mlp = _norm(cfg)
        self.mlp = MLP(cfg, gene.d_mlp)
        for hook in Block.hooks:
            hook(self, cfg, gene)

    def forward(self, x: torch.Tensor, rope: dict | None, cache: KVCache | None, li: int,
                gene: LayerGene | None = None) -> torch.Tensor:
        """`gene`: the supernet slice of this block (gene.attn = False runs it without attention)."""
        use = self.attn is not None and (gene is None or gene.attn)
        a = self.attn(self.ln_attn(x), rope, cache, li, *(() if gene is None else (gene,))) if use else None
        d_mlp = None if gene is None else gene.d_mlp
        if self.parallel:
            return x + self.mlp(self.ln_mlp(x), d_mlp) + (a if a is not None else 0)
        x = x + a if a is not None else x
        return x + self.mlp(self.ln_mlp(x), d_mlp)


guard(Block)  # an expression, not a definition: the HF export copies none of it (search.hf_export)


class IHAModel(nn.Module):
    """Decoder LM: embeddings → active blocks → final norm → LM head (tied or untied)."""

    def __init__(self, genome: Genome | IHAConfig) -> None:
        super().__init__()
        cfg = genome if isinstance(genome, IHAConfig) else IHAConfig(genome)
        g = self.genome = cfg.genome
        self.cfg = cfg
        self.slots = [i for i, gene in enumerate(g.layers) if gene.active]  # genome slot of each block
        self.wte = nn.Embedding(g.vocab_size, g.d_model)
        self.wpe = nn.Embedding(g.block_size, g.d_model) if g.pos == "learned" else None
        self.blocks = nn.ModuleList(Block(cfg, g.layers[i]) for i in self.slots)
        self.ln_f = _norm(cfg)
        self.lm_head = nn.Linear(g.d_model, g.vocab_size, bias=False)
        if g.tied:
            self.lm_head.weight = self.wte.weight

    # ------------------------------------------------------------------ setup
    def init_weights(self, seed: int = 0) -> "IHAModel":
        """GPT-2 init from one seed: N(0, 0.02), residual outputs scaled by 1/sqrt(2·n_layers), zero biases."""
        dev = self.wte.weight.device
        if dev.type == "meta":
            return self
        gen = torch.Generator(device=dev).manual_seed(seed)
        resid_std = self.cfg.init_std / math.sqrt(2 * max(1, len(self.blocks)))
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:  # norm weights → 1, biases → 0
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:
                    std = resid_std if name.endswith(("o_proj.weight", "down.weight")) else self.cfg.init_std
                    p.normal_(0.0, std, generator=gen)
        return self

    def num_params(self) -> int:
        """Unique parameters (a tied head counts once); equals workload.analyze(genome)['params']."""
        return sum(p.numel() for p in self.parameters())

    def new_kv_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        """Empty pre-allocated cache for `batch` sequences of up to `max_len` (default block_size) tokens;
        a windowed layer gets only min(window, max_len) slots."""
        max_len = max_len or self.genome.block_size
        w = self.wte.weight
        ks, vs = [], []
        for b in self.blocks:
            a = b.attn
            n = min(a.window, max_len) if a is not None and a.window else max_len
            ks.append(None if a is None else w.new_zeros(batch, a.n_kv, n, a.d_qk))
            vs.append(None if a is None else w.new_zeros(batch, a.n_kv, n, a.d_v))
        return KVCache(ks, vs, max_len)

    # ---------------------------------------------------------------- forward
    def _positions(self, T: int, past: int, device: torch.device) -> torch.Tensor:
        if self.wpe is not None and past + T > self.genome.block_size:
            raise UserError(f"sequence length {past + T} exceeds block_size={self.genome.block_size} "
                            "of the learned position table; allowed: at most block_size positions")
        return torch.arange(past, past + T, device=device)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, kv_cache: KVCache | None = None,
                sub: Genome | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx (B, T) → logits (B, T, V) and mean cross-entropy vs targets (B, T) (-1 = ignored). `sub`: run the
        slice of this supernet (a model with a block in every slot) that genome names: its active slots only."""
        B, T = idx.shape
        run = [(b, None) for b in self.blocks] if sub is None else [
            (self.blocks[i], g) for i, g in enumerate(sub.layers) if g.active]
        past = kv_cache.length if kv_cache is not None else 0
        if kv_cache is not None and past + T > kv_cache.max_len:
            raise UserError(f"KV cache overflow: {past} cached + {T} new > max_len={kv_cache.max_len}; "
                            "allowed: allocate new_kv_cache(batch, max_len) large enough")
        pos = self._positions(T, past, idx.device)
        x = self.wte(idx)  # (B, T, d)
        if self.wpe is not None:
            x = x + self.wpe(pos)
        rope = None
        if self.genome.pos == "rope":  # one cos/sin table per distinct d_qk, shared by layers
            dims = {(g or b.attn).d_qk for b, g in run if b.attn is not None and (g is None or g.attn)}
            rope = {dim: rope_tables(pos, dim, self.cfg.rope_base) for dim in dims}  # float32
        for li, (block, gene) in enumerate(run):
            x = block(x, rope, kv_cache, li, gene)
        if kv_cache is not None:
            kv_cache.length = past + T
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    # ----------------------------------------------------------- inference
    @torch.no_grad()
    def prefill(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Run the prompt (B, T) into the cache; returns logits (B, T, V)."""
        return self(idx, kv_cache=cache)[0]

    @torch.no_grad()
    def decode_step(self, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence ((B,) or (B, 1)) at position cache.length; returns logits (B, V)."""
        return self(token.reshape(-1, 1), kv_cache=cache)[0][:, -1]

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, n: int, greedy: bool = True, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Append n tokens to idx (B, T) using the KV cache; greedy argmax or temperature sampling."""
        if n < 1:
            return idx
        cache = self.new_kv_cache(idx.size(0), idx.size(1) + n)
        logits = self.prefill(idx, cache)[:, -1]
        out = [idx]
        for step in range(n):
            if greedy:
                nxt = logits.argmax(dim=-1)
            else:
                probs = F.softmax(logits.float() / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            out.append(nxt[:, None])
            if step < n - 1:
                logits = self.decode_step(nxt, cache)
        return torch.cat(out, dim=1)


def build_model(genome: Genome | IHAConfig, dtype: torch.dtype = torch.float32,
                device: str | torch.device = "cpu", seed: int = 0) -> IHAModel:
    """Build and initialise the model; `device="meta"` allocates nothing (count llama-2-7b for free)."""
    with torch.device(device):
        model = IHAModel(genome)
    return model.init_weights(seed).to(dtype=dtype)
