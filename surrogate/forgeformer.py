"""The Forge-Former encoder (LLMForge Appendix C) and its Lightning training module.

Default shape = the paper's: 9 per-field Linear(1→64) lifts summed with a learned positional
embedding over 40 packed positions, 4 pre-LN encoder blocks (width 64, 4 heads, FFN 256, GELU,
dropout 0.2), masked mean pooling, a linear head — 203,713 parameters (no final LayerNorm).
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import lightning as L
import torch
from torch import nn


@dataclass
class FFConfig:
    """Encoder shape (paper values, App. C) and training recipe."""

    n_fields: int = 9
    d_enc: int = 64
    n_heads: int = 4
    n_layers: int = 4
    d_ffn: int = 256
    dropout: float = 0.2
    L_max: int = 40

    def to_dict(self) -> dict:
        return asdict(self)


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x: (B, L, F) normalized fields, mask: (B, L) bool real tokens → (B,)."""
        # Trailing padding is dropped: with key masking and masked pooling the result is identical.
        n = int(mask.sum(dim=1).max())
        x, mask = x[:, :n], mask[:, :n]
        z = x @ self.lift_w + self.lift_b.sum(0) + self.pos[:n]
        h = self.encoder(z, src_key_padding_mask=~mask)
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp_min(1.0)
        return self.head(pooled).squeeze(-1)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def pairwise_rank_loss(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """RankNet-style logistic loss over all ordered pairs of the batch (targets already standardized)."""
    dy = y.unsqueeze(0) - y.unsqueeze(1)
    dp = pred.unsqueeze(0) - pred.unsqueeze(1)
    sel = dy > 0
    if not bool(sel.any()):
        return pred.sum() * 0.0
    return nn.functional.softplus(-dp[sel]).mean()


class FFModule(L.LightningModule):
    """L1 (+ optional pairwise ranking) regression; keeps the weights of the best validation epoch."""

    def __init__(self, cfg: FFConfig, lr: float = 1e-4, weight_decay: float = 0.0, rank_weight: float = 0.0,
                 y_std: float = 1.0) -> None:
        super().__init__()
        self.model = ForgeFormer(cfg)
        self.lr, self.wd, self.rank_weight, self.y_std = lr, weight_decay, rank_weight, y_std
        self.best_val = float("inf")
        self.best_epoch = -1
        self.best_state: dict | None = None
        self.history: list[float] = []

    def training_step(self, batch, _idx):
        x, mask, y = batch
        pred = self.model(x, mask)
        loss = nn.functional.l1_loss(pred, y)
        if self.rank_weight > 0:
            loss = loss + self.rank_weight * pairwise_rank_loss(pred, y)
        return loss

    def validation_step(self, batch, _idx):
        x, mask, y = batch
        mae = float(nn.functional.l1_loss(self.model(x, mask), y)) * self.y_std  # in loss units
        self.history.append(mae)
        if mae < self.best_val:
            self.best_val, self.best_epoch = mae, self.current_epoch
            self.best_state = copy.deepcopy(self.model.state_dict())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=self.wd)
