"""The Lightning training wrapper of one Forge-Former member, apart from the model (surrogate/forgeformer.py)
so that predicting, the search's only use of the surrogate, never imports Lightning."""
from __future__ import annotations

import copy

import lightning as L
import torch
from torch import nn

from surrogate.forgeformer import FFConfig, ForgeFormer, pairwise_rank_loss
from forge.errors import UserError


class FFModule(L.LightningModule):
    """L1 (+ optional pairwise ranking) regression; keeps the weights of the best validation epoch."""

    def __init__(self, cfg: FFConfig, lr: float = 1e-4, weight_decay: float = 0.0, rank_weight: float = 0.0,
                 y_std: float = 1.0, schedule: str = "constant", epochs: int = 0) -> None:
        super().__init__()
        if schedule not in ("constant", "cosine"):
            raise UserError(f"schedule = {schedule!r} is invalid; allowed: constant | cosine")
        self.model = ForgeFormer(cfg)
        self.lr, self.wd, self.rank_weight, self.y_std = lr, weight_decay, rank_weight, y_std
        self.schedule, self.epochs = schedule, epochs
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
        self.log("train_loss", loss.detach(), on_step=False, on_epoch=True, batch_size=len(y))
        return loss

    def validation_step(self, batch, _idx):
        x, mask, y = batch
        mae = float(nn.functional.l1_loss(self.model(x, mask), y)) * self.y_std  # in loss units
        self.history.append(mae)
        self.log("val_mae", mae, on_step=False, on_epoch=True, batch_size=len(y))
        if mae < self.best_val:
            self.best_val, self.best_epoch = mae, self.current_epoch
            self.best_state = copy.deepcopy(self.model.state_dict())

    def configure_optimizers(self):
        # fused: one kernel for all 26 parameter tensors instead of a Python loop (CPU and CUDA).
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=self.wd, fused=True)
        if self.schedule == "constant":
            return opt
        # cosine: lr decays per epoch from lr to ~0 at the last epoch, so late epochs average out batch noise
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, self.epochs))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}
