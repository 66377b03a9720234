"""Fitting Forge-Former members through Lightning: from-scratch training and replay fine-tuning.

Recipes (App. C of LLMForge and the faster one measured in bench/): the paper trains on raw targets
with L1, AdamW lr 1e-4, wd 0, batch 32, 200 epochs. Model selection here is on a validation carve of
the training split (the paper picked on test, which leaks). Fine-tuning (App. C.2) restarts from the
frozen base weights and mixes `ratio` replay rows per new row in every batch.
"""
from __future__ import annotations

import logging
import math
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, Sampler, TensorDataset

from forge.runtime.parallel import map_spawned
from surrogate.forgeformer import FFConfig, ForgeFormer
from surrogate.lit_module import FFModule
from surrogate.recipe import Recipe  # noqa: F401  (its old home: `from surrogate.training import Recipe` works)

for _name in ("lightning.pytorch", "lightning.fabric", "lightning"):
    logging.getLogger(_name).setLevel(logging.ERROR)

# Lightning's notes that a Forge user can do nothing about (seen on every co-evolution refit)
LIGHTNING_NOTES = (r"You defined a `validation_step` but have no `val_dataloader`", r".*does not have many workers",
                   r"Your `IterableDataset` has `__len__` defined", r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                   r"The number of training batches .* is smaller than the logging interval")


@contextmanager
def quiet_fit() -> Iterator[None]:
    """Silence LIGHTNING_NOTES around one fit only (warnings.catch_warnings restores the filters after)."""
    with warnings.catch_warnings():
        for pattern in LIGHTNING_NOTES:
            warnings.filterwarnings("ignore", message=pattern)
        yield


def _logger() -> Any:
    """The logger of the command this fit runs in (forge.shell.tracking.log_to: forge-surrogate, forge-verify's refit,
    co-evolution's refits), one version per fit; False outside one (and in spawned members)."""
    from forge.shell.tracking import build, current

    return build(current(), "surrogate")


class EpochSteps(L.Callback):
    """A progress step per epoch of the command's running Steps (forge.runtime.steps: forge-surrogate's fits)."""

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        from forge.runtime.steps import active

        st = active()
        if st is not None and st.unit == "epoch":  # not a count of fits (mode=compare) or of trainings (verify)
            st.step(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}")


def _trainer(epochs: int, with_val: bool, accelerator: str = "cpu") -> L.Trainer:
    return L.Trainer(max_epochs=epochs, accelerator=accelerator, devices=1, logger=_logger(), enable_checkpointing=False,
                     callbacks=[EpochSteps()],
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                     limit_val_batches=1.0 if with_val else 0)


def _tensors(x: np.ndarray, mask: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, ...]:
    return (torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(mask, dtype=torch.bool),
            torch.as_tensor(y, dtype=torch.float32))


class BucketBatches(Sampler):
    """Shuffle, cut into pools of 8 batches, sort each pool by depth, batch it, shuffle batch order.
    Every row is seen once per epoch at the same batch size, but padding drops ~1.7× on the IHA set
    (mean 17 active layers vs a typical batch maximum of 30)."""

    def __init__(self, lengths: np.ndarray, batch: int, seed: int, pool: int = 8) -> None:
        self.lengths, self.batch, self.pool = np.asarray(lengths), batch, pool * batch
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        perm = self.rng.permutation(len(self.lengths))
        batches = []
        for s in range(0, len(perm), self.pool):
            chunk = perm[s:s + self.pool]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches += [chunk[i:i + self.batch].tolist() for i in range(0, len(chunk), self.batch)]
        for j in self.rng.permutation(len(batches)):
            yield batches[j]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch)


def fit_member(cfg: FFConfig, recipe: Recipe, train: tuple, val: tuple | None, seed: int,
               y_std: float) -> tuple[ForgeFormer, dict]:
    """Train one member from scratch; returns the best-validation weights (last epoch without val)."""
    torch.manual_seed(seed)
    module = FFModule(cfg, recipe.lr, recipe.weight_decay, recipe.rank_weight, y_std, recipe.schedule, recipe.epochs)
    ds = TensorDataset(*_tensors(*train))
    if recipe.bucket:
        tl = DataLoader(ds, batch_sampler=BucketBatches(train[1].sum(axis=1), recipe.batch, seed))
    else:
        tl = DataLoader(ds, batch_size=recipe.batch, shuffle=True, generator=torch.Generator().manual_seed(seed))
    vl = DataLoader(TensorDataset(*_tensors(*val)), batch_size=max(1, len(val[2]))) if val is not None else None
    with quiet_fit():
        _trainer(recipe.epochs, vl is not None, recipe.accelerator).fit(module, tl, vl)
    if module.best_state is not None:
        module.model.load_state_dict(module.best_state)
    module.model.cpu()  # predictors and checkpoints live on the CPU
    info = {"best_epoch": module.best_epoch, "best_val_mae": module.best_val if vl is not None else None,
            "val_curve": [round(v, 5) for v in module.history]}
    return module.model.eval(), info


def fit_members(cfg: FFConfig, recipe: Recipe, train: tuple, val: tuple | None,
                y_std: float) -> list[tuple[ForgeFormer, dict]]:
    """Members k = 0 … n_members − 1 with seeds recipe.seed + k. Members are independent, so with
    workers > 1 they train in that many spawned processes with one torch thread each (forge.runtime.parallel):
    the same weights as workers = 1 under torch.set_num_threads(1) (a test pins this), in ~1/workers
    of the wall time on as many idle cores. One small encoder cannot use two cores well; two can."""
    jobs = [(cfg, recipe, train, val, recipe.seed + k, y_std) for k in range(recipe.n_members)]
    workers = recipe.workers if recipe.accelerator == "cpu" else 1  # one GPU: members take turns
    if workers == 1:
        return [fit_member(*job) for job in jobs]
    out = []
    for state, info in map_spawned(_member_job, jobs, workers):  # map_spawned refuses workers < 1
        model = ForgeFormer(cfg)
        model.load_state_dict(state)
        out.append((model.eval(), info))
    return out


def _member_job(cfg: FFConfig, recipe: Recipe, train: tuple, val: tuple | None, seed: int,
                y_std: float) -> tuple[dict, dict]:
    model, info = fit_member(cfg, recipe, train, val, seed, y_std)
    return model.state_dict(), info


class ReplayBatches(IterableDataset):
    """Each batch: k new rows plus round(ratio·k) replay rows (App. C.2: 5 old rows per new row)."""

    def __init__(self, new: tuple, replay: tuple, ratio: float, batch: int, seed: int) -> None:
        self.new, self.replay = new, replay
        self.ratio = ratio if len(replay[2]) else 0.0  # no replay corpus: plain batches of new rows
        self.k = max(1, int(round(batch / (1.0 + self.ratio))))
        self.rng = np.random.default_rng(seed)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        n_new, n_old = len(self.new[2]), len(self.replay[2])
        order = self.rng.permutation(n_new)
        for s in range(0, n_new, self.k):
            idx = order[s:s + self.k]
            old = self.rng.choice(n_old, size=min(n_old, int(round(self.ratio * len(idx)))), replace=False)
            parts = [np.concatenate([a[idx], b[old]]) for a, b in zip(self.new, self.replay)]
            yield _tensors(*parts)

    def __len__(self) -> int:
        return math.ceil(len(self.new[2]) / self.k)


def finetune_member(model: ForgeFormer, new: tuple, replay: tuple, ratio: float, epochs: int, lr: float,
                    batch: int, seed: int, y_std: float) -> ForgeFormer:
    """Continue training a copy of `model` on replay-mixed batches (L1, AdamW, wd 0)."""
    torch.manual_seed(seed)
    module = FFModule(model.cfg, lr, 0.0, 0.0, y_std)
    module.model.load_state_dict(model.state_dict())
    loader = DataLoader(ReplayBatches(new, replay, ratio, batch, seed), batch_size=None)
    with quiet_fit():
        _trainer(epochs, False).fit(module, loader)
    return module.model.eval()
