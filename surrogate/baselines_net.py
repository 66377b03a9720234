"""The HW-GPT-Bench MLP baseline's Lightning module (surrogate/baselines.py's MLPBaseline), apart so that the
other baselines (random forests, the scaling law) load without Lightning's ~5 CPU-seconds of imports."""
from __future__ import annotations

import copy

import lightning as L
import torch
from torch import nn


class NetModule(L.LightningModule):
    """HW-GPT-Bench's "Net": 5 fully connected layers of width 128 with ReLU, trained with MSE."""

    def __init__(self, n_in: int, lr: float) -> None:
        super().__init__()
        dims = [n_in, 128, 128, 128, 128]
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(128, 1))
        self.lr, self.best_val, self.best_state = lr, float("inf"), None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch, _idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, _idx):
        x, y = batch
        v = float(nn.functional.l1_loss(self(x), y))
        if v < self.best_val:
            self.best_val, self.best_state = v, copy.deepcopy(self.net.state_dict())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)
