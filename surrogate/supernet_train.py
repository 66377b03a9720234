"""Train the IHA supernet (issue 38) with Lightning on a space's label protocol and corpus, and the
`TrainableSurrogate` that `forge-surrogate surrogate=supernet-tiny mode=train` builds.

Sampling follows the sandwich rule of Yu & Huang, "Universally Slimmable Networks" (ICCV 2019) as BigNAS uses
it (Yu et al., ECCV 2020, §3.1): every step trains the largest sub-network, the smallest and `n_random` uniformly
sampled ones on the same batch, gradients summed into one optimizer step. BigNAS's in-place distillation
(children fit the largest network's soft labels) is left out: labels here are cross-entropy losses on real
tokens, and a child trained towards the parent's outputs would score the parent's fit, not its own. Random
children are drawn with the space's own sampler (`SearchSpace.sample`), so they follow the distribution the
search and the labels were drawn from (HAT, Wang et al. ACL 2020, also samples uniformly from its space).

The budget is stated in steps; one label of the protocol is `protocol.steps` steps of one genome, so
`steps · (2 + n_random)` sub-network steps cost that many label-steps of sub-networks of various sizes
(bench/bench_supernet.py measures the CPU-second ratio to real labels).
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn as nn

from forge.runtime.config import group_yaml
from forge.errors import UserError
from forge.genomes.genome import Genome
from forge.labelling.train import Protocol, _Batches, _lit_module, _quiet_lightning, make_logger
from forge.lm.model import build_model
from forge.spaces.space import load_space
from surrogate.supernet import SupernetPredictor, calibrate_interval, largest, smallest, space_meta


class Sandwich(nn.Module):
    """The supernet plus its per-step sampler: forward(x, y) = mean loss of largest, smallest and n_random
    random slices on the batch (what `forge.labelling.train`'s Lightning module minimizes)."""

    def __init__(self, net: nn.Module, space: Any, n_random: int, seed: int) -> None:
        super().__init__()
        self.net, self.space, self.n_random = net, space, int(n_random)
        self.big, self.small = largest(space), smallest(space)
        self.rng = np.random.default_rng(seed)

    def pick(self) -> list[Genome]:
        """This step's sub-networks: largest, smallest, then n_random drawn by the space's sampler."""
        return [self.big, self.small, *(self.space.sample(self.n_random, self.rng) if self.n_random else [])]

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[None, torch.Tensor]:
        losses = [self.net(idx, targets, sub=g)[1] for g in self.pick()]
        return None, torch.stack(losses).mean()


def config_node(group: str, name: str | Mapping[str, Any]) -> dict[str, Any]:
    """A protocol / corpus config by name (conf/<group>/<name>.yaml) or as a mapping already."""
    if isinstance(name, Mapping):
        return {k: v for k, v in dict(name).items()}
    node = group_yaml(group, str(name))
    if node is None:
        raise UserError(f"{group}={name!r} is unknown; allowed: a name under conf/{group}/")
    return dict(node)


def train_supernet(space: Any, protocol: Protocol, corpus: Any, steps: int, n_random: int = 2, seed: int = 0,
                   logger: Mapping[str, Any] | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """Train the supernet for `steps` sandwich steps under `protocol` (lr, schedule, batch, precision); returns it
    and a provenance with its cost (wall and CPU seconds, sub-network steps, tokens)."""
    import lightning.pytorch as pl

    _quiet_lightning()
    p = replace(protocol, tokens=int(steps) * protocol.seq_len * protocol.batch, seed=seed)
    if p.accelerator == "cpu":
        torch.set_num_threads(p.threads)
    torch.manual_seed(seed)
    net = build_model(largest(space), seed=seed)
    sand = Sandwich(net, space, n_random, seed)
    lit = _lit_module(sand, p)
    trainer = pl.Trainer(max_steps=p.steps, accelerator=p.accelerator, devices=1, precision=p.precision,
                         gradient_clip_val=p.grad_clip or None, logger=make_logger(logger, "supernet"),
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, limit_val_batches=0, log_every_n_steps=max(1, min(50, p.steps // 20)))
    t0, c0 = time.perf_counter(), time.process_time()
    loader = torch.utils.data.DataLoader(_Batches(corpus, p), batch_size=None, num_workers=0)
    trainer.fit(lit, train_dataloaders=loader)
    if lit.diverged:
        raise UserError(f"supernet training diverged: {lit.diverged}; allowed: a smaller protocol lr")
    k = 2 + int(n_random)
    prov = {"steps": int(trainer.global_step), "children_per_step": k, "subnet_steps": int(trainer.global_step) * k,
            "tokens": int(trainer.global_step) * p.batch * p.seq_len, "label_steps": protocol.steps,
            "label_equivalents_by_steps": round(int(trainer.global_step) * k / protocol.steps, 2),
            "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2),
            "final_train_loss": lit.last_loss, "seed": seed, "n_random": int(n_random),
            "sampling": "sandwich (largest, smallest, n_random uniform; Yu & Huang 2019, BigNAS 2020)"}
    return net.eval(), prov


class SupernetSurrogate:
    """`TrainableSurrogate`: fit = train the supernet (or load `init=` weights), then fit the score→label line on
    the training labels; predict = the line at the slice's inherited-weight validation loss."""

    def __init__(self, space: str = "iha-tiny-swa", protocol: Any = "cpu-proxy", corpus: Any = "stdlib",
                 steps: int = 120, n_random: int = 2, seed: int = 0, score_batch: int = 16,
                 init: str | None = None, threads: int = 1, val_tokens: int | None = None) -> None:
        self.space_name, self.steps, self.n_random, self.seed = space, int(steps), int(n_random), int(seed)
        self.protocol = {**config_node("protocol", protocol), "threads": int(threads)}
        self.val_tokens = int(val_tokens) if val_tokens else None
        if val_tokens:  # fewer validation tokens: cheaper, noisier scores (smoke tests)
            self.protocol["val_tokens"] = int(val_tokens)
        self.protocol.pop("_target_", None)
        self.corpus = config_node("corpus", corpus)
        self.score_batch, self.init = int(score_batch), init
        self.predictor: SupernetPredictor | None = None

    def fit(self, train: Any, val: Any | None = None) -> "SupernetSurrogate":
        from forge.labelling.corpus import build_corpus

        if self.init:
            self.predictor = self._load_init()
        else:
            space = load_space(self.space_name)
            p = Protocol.from_config(self.protocol)
            net, prov = train_supernet(space, p, build_corpus(dict(self.corpus)), self.steps, self.n_random, self.seed)
            self.predictor = SupernetPredictor(net, space_meta(space), self.protocol, self.corpus,
                                               meta={"training": prov}, score_batch=self.score_batch)
        rows = train.join(val) if val is not None and len(val) else train
        self.predictor.fit_line(rows.genomes, rows.y)
        self.predictor.meta["line_rows"] = {"n": len(rows), "data_hash": rows.data_hash()}
        return self

    def predict(self, genomes: Sequence[Genome]) -> np.ndarray:
        return self._fitted().predict(list(genomes))[0]

    def calibrate(self, held: Any, split: Mapping[str, Any]) -> None:
        """The conformal interval from held-out labelled rows (the CLI's test split)."""
        calibrate_interval(self._fitted(), held, dict(split), self.seed)

    def as_predictor(self) -> SupernetPredictor:
        return self._fitted()

    def save(self, stem: str | Path) -> Path:
        return self._fitted().save(stem)

    def _load_init(self) -> SupernetPredictor:
        from surrogate.loading import load_predictor

        p = load_predictor(self.init)
        if not isinstance(p, SupernetPredictor):
            raise UserError(f"init={self.init} is not a supernet checkpoint; allowed: one saved by supernet-tiny")
        if self.val_tokens:
            p.protocol["val_tokens"] = self.val_tokens
        return p

    def _fitted(self) -> SupernetPredictor:
        """The fitted predictor; with `init=` and no fit, the checkpoint as saved (its own line): so the node
        `{_target_: ...SupernetSurrogate, init: CKPT}` works as `evaluator.predictor`, and co-evolution's
        `surrogate.generic.refit` re-fits the line on every label so far."""
        if self.predictor is None and self.init:
            self.predictor = self._load_init()
        if self.predictor is None:
            raise RuntimeError("SupernetSurrogate: call fit() first")
        return self.predictor
