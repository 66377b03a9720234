"""The Forge-Former encoder (LLMForge Appendix C) and its Lightning training module.

Default shape = the paper's: 9 per-field Linear(1→64) lifts summed with a learned positional
embedding over 40 packed positions, 4 pre-LN encoder blocks (width 64, 4 heads, FFN 256, GELU,
dropout 0.2), masked mean pooling, a linear head — 203,713 parameters (no final LayerNorm).

The parameters live in a stock `nn.TransformerEncoder` (so checkpoints are plain state dicts), but
`forward` runs the blocks on *packed* tokens: the projections and FFN only see active layers (the
IHA labels average 17 of 40), attention runs padded per sequence, and dropout masks come from a
numpy PCG64 stream (16-bit thresholds, 4 masks per 64-bit draw), ~5× cheaper than torch's CPU
bernoulli. `reference_forward` is the stock padded path; tests pin the two to each other. Inference on the
CPU runs the same pass in numpy (surrogate/numpy_encoder.py), which holds the config and the dropout stream.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from surrogate.numpy_encoder import DropoutStream, FFConfig, NumpyForgeFormer  # noqa: F401 (FFConfig re-exported)


class MaskStream(DropoutStream):
    """`DropoutStream`'s masks as torch tensors (the same numpy stream the numpy encoder draws from)."""

    def __call__(self, shape: torch.Size) -> torch.Tensor:
        return torch.from_numpy(self.draw(tuple(shape)))


class ForgeFormer(nn.Module):
    """Encoder over packed layer tokens → scalar (in the target units the trainer chose)."""

    def __init__(self, cfg: FFConfig) -> None:
        super().__init__()
        self.cfg = cfg
        # The F per-field Linear(1→d) lifts, stored as one (F, d) weight and (F, d) bias:
        # sum_F (x_F·W_F + b_F) = x @ W + sum_F b_F, same parameters as F separate nn.Linear(1, d).
        self.lift_w = nn.Parameter(torch.randn(cfg.n_fields, cfg.d_enc) * 0.5)
        self.lift_b = nn.Parameter(torch.zeros(cfg.n_fields, cfg.d_enc))
        self.pos = nn.Parameter(torch.randn(cfg.L_max, cfg.d_enc) * 0.02)
        block = nn.TransformerEncoderLayer(cfg.d_enc, cfg.n_heads, cfg.d_ffn, cfg.dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(block, cfg.n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(cfg.d_enc, 1)
        self.masks: MaskStream | None = None  # dropout source; seeded lazily from torch's RNG

    def seed_dropout(self, seed: int) -> None:
        self.masks = MaskStream(self.cfg.dropout, seed)

    @classmethod
    def from_numpy(cls, member: NumpyForgeFormer) -> "ForgeFormer":
        """A numpy member as a module (eval mode), drawing from the same dropout stream."""
        m = cls(member.cfg)
        m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in member.state_dict().items()})
        if member.masks is not None:
            m.masks = MaskStream.__new__(MaskStream)
            m.masks.__dict__.update(vars(member.masks))  # the same generator object: one sequence
        return m.eval()

    def _drop(self, t: torch.Tensor) -> torch.Tensor:
        if not self.training or self.cfg.dropout <= 0:
            return t
        if t.is_cuda:  # on a GPU torch's own dropout is fast; the numpy stream is for CPU
            return F.dropout(t, self.cfg.dropout, True)
        if self.masks is None:
            self.seed_dropout(int(torch.randint(0, 2**62, (1,))))
        return t * self.masks(t.shape)

    def _attend(self, blk: nn.TransformerEncoderLayer, h: torch.Tensor, flat: torch.Tensor, shape: tuple,
                key_bias: torch.Tensor) -> torch.Tensor:
        """Multi-head self-attention of packed tokens h (N, d); padded per sequence for the scores.
        key_bias: (B·H, 1, n), 0 for real keys and -inf for padding."""
        B, n = shape
        H, d = self.cfg.n_heads, self.cfg.d_enc
        a = blk.self_attn
        # the 1/sqrt(d_h) score scale is folded into the query rows of the input projection (192 numbers
        # instead of a pass over every score; exact when d_h is a power of 4, as here)
        sc = torch.ones(3 * d, dtype=h.dtype, device=h.device)
        sc[:d] = 1.0 / math.sqrt(d // H)
        qkv = F.linear(h, a.in_proj_weight * sc[:, None], a.in_proj_bias * sc)  # (N, 3d)
        # index_copy / index_select: their backwards are a gather and an index_add, both far cheaper on
        # CPU than the sorting scatter behind advanced indexing's backward
        qkv = qkv.new_zeros(B * n, 3 * d).index_copy_(0, flat, qkv)  # in place: no clone of the zeros
        q, k, v = qkv.view(B, n, 3, H, d // H).permute(2, 0, 3, 1, 4).reshape(3, B * H, n, d // H)  # one copy
        att = torch.softmax(torch.baddbmm(key_bias, q, k.transpose(1, 2)), dim=-1)  # (B·H, n, n)
        o = torch.bmm(self._drop(att), v).view(B, H, n, d // H).transpose(1, 2).reshape(B * n, d)
        return F.linear(o.index_select(0, flat), a.out_proj.weight, a.out_proj.bias)  # (N, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x: (B, L, F) normalized fields, mask: (B, L) bool real tokens → (B,)."""
        n = int(mask.sum(dim=1).max())
        x, mask = x[:, :n], mask[:, :n]
        flat = mask.reshape(-1).nonzero().squeeze(1)  # (N,) row-major index b·n + position of active tokens
        tok, pos = x.reshape(-1, x.shape[-1]).index_select(0, flat), flat % n
        z = tok @ self.lift_w + self.lift_b.sum(0) + self.pos.index_select(0, pos)  # (N, d)
        key_bias = torch.zeros(mask.shape, dtype=z.dtype, device=z.device).masked_fill(~mask, float("-inf"))
        H = self.cfg.n_heads  # (B·H, 1, n): padded keys get no attention
        key_bias = key_bias[:, None, None, :].expand(-1, H, 1, -1).reshape(-1, 1, mask.shape[1])
        for blk in self.encoder.layers:  # pre-LN: z += Drop(SA(LN1 z)); z += Drop(W2 Drop(GELU(W1 LN2 z)))
            z = z + self._drop(self._attend(blk, blk.norm1(z), flat, tuple(mask.shape), key_bias))
            ff = blk.linear2(self._drop(F.gelu(blk.linear1(blk.norm2(z)))))
            z = z + self._drop(ff)
        counts = mask.sum(dim=1, keepdim=True).to(z.dtype).clamp_min(1.0)
        pooled = z.new_zeros(x.shape[0], z.shape[1]).index_add(0, flat // n, z) / counts  # masked mean
        return self.head(pooled).squeeze(-1)

    def reference_forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The same network through the stock padded `nn.TransformerEncoder` (tests compare the two)."""
        z = x @ self.lift_w + self.lift_b.sum(0) + self.pos[: x.shape[1]]
        h = self.encoder(z, src_key_padding_mask=~mask)
        m = mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1).clamp_min(1.0)).squeeze(-1)


def n_params(model: nn.Module) -> int:
    """Parameter count of a torch module or a numpy member (both list their `parameters()`)."""
    return sum(math.prod(p.shape) for p in model.parameters())


def pairwise_rank_loss(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """RankNet-style logistic loss over all ordered pairs of the batch (targets already standardized)."""
    dy = y.unsqueeze(0) - y.unsqueeze(1)
    dp = pred.unsqueeze(0) - pred.unsqueeze(1)
    sel = dy > 0
    if not bool(sel.any()):
        return pred.sum() * 0.0
    return nn.functional.softplus(-dp[sel]).mean()
