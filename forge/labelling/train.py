"""The train-from-scratch oracle: train one genome on a token stream for a fixed budget (Lightning),
return its final validation loss as a `Label`.

Two protocols ship (conf/protocol/):
- `paper` — LLMForge App. B: MiniPile, 655M tokens, seq 512, batch 128, AdamW lr 1e-3, 100 warmup
  steps, bf16 mixed precision, one GPU.
- `cpu-proxy` — iha-tiny genomes on the stdlib byte corpus, about a label per core-minute or less.
  Its labels are an objective of their own (the loss of a tiny model under this protocol); they are
  NOT a stand-in for paper-scale labels: far from convergence small, attention-light models learn
  fastest, so width-scaled proxies of iha-paper genomes rank *opposite* to their 655M-token labels
  (Spearman -0.41 on 20 rows, issue 6). Its budget is chosen by self-consistency instead (B vs 2B
  rank a random sample alike, Spearman >= 0.8; bench/bench_train.py, bench/RESULTS.md).

A diverged run (NaN/inf loss) returns an `inf` label with a reason; it never raises.
"""
from __future__ import annotations

import datetime as _dt
import logging
import math
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch

from forge.errors import ForgeError
from forge.labelling.corpus import Corpus
from forge.genomes.genome import Genome
from forge.genomes.labels import Label, fingerprint

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed", "bf16-true")
SCHEDULES = ("constant", "cosine")


class ProtocolError(ForgeError):
    """A protocol option outside its allowed values."""


@dataclass(frozen=True)
class Protocol:
    """Every knob of a training run; one seed drives init and data order."""

    name: str = "cpu-proxy"
    tokens: int = 131072          # training budget (tokens); steps = tokens // (seq_len * batch)
    seq_len: int = 256
    batch: int = 8
    lr: float = 1e-3
    warmup_steps: int = 100
    schedule: str = "constant"   # after warmup: constant (App. B names no decay) or cosine to min_lr_ratio
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    precision: str = "32-true"
    val_tokens: int = 32768       # fixed validation windows, identical for every genome
    accelerator: str = "cpu"
    threads: int = 1              # torch intra-op threads per training process (CPU)
    compile: bool = False
    seed: int = 0
    eta: int = 3                  # rung ladder (forge.labelling.curves): rung k at steps / eta^(rungs-k)
    rungs: int = 4                # curve points, the last = the final label; 1 = no curve (cpu-proxy: too short)

    def __post_init__(self) -> None:
        for k in ("tokens", "seq_len", "batch", "val_tokens", "threads"):
            if int(getattr(self, k)) < 1:
                raise ProtocolError(f"protocol.{k} = {getattr(self, k)} is invalid; allowed: a positive int")
        if self.precision not in PRECISIONS:
            raise ProtocolError(f"protocol.precision = {self.precision!r} is unknown; allowed: {', '.join(PRECISIONS)}")
        if self.schedule not in SCHEDULES:
            raise ProtocolError(f"protocol.schedule = {self.schedule!r} is unknown; allowed: {', '.join(SCHEDULES)}")
        if int(self.eta) < 2 or int(self.rungs) < 1:
            raise ProtocolError(f"protocol.eta = {self.eta} / rungs = {self.rungs}; allowed: eta >= 2, rungs >= 1")
        if not self.lr > 0 or self.warmup_steps < 0:
            raise ProtocolError(f"protocol.lr = {self.lr} / warmup_steps = {self.warmup_steps}; allowed: lr > 0, warmup >= 0")

    @property
    def steps(self) -> int:
        return max(1, self.tokens // (self.seq_len * self.batch))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "Protocol":
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in dict(cfg).items() if not str(k).startswith("_")}
        bad = sorted(set(d) - known)
        if bad:
            raise ProtocolError(f"protocol options {bad} are unknown; allowed: {', '.join(sorted(known))}")
        return cls(**d)


def lr_factor(step: int, p: Protocol) -> float:
    """Linear warmup, then constant or cosine down to min_lr_ratio."""
    if step < p.warmup_steps:
        return (step + 1) / p.warmup_steps
    if p.schedule == "constant":
        return 1.0
    t = min(1.0, (step - p.warmup_steps) / max(1, p.steps - p.warmup_steps))
    return p.min_lr_ratio + (1 - p.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t))


class _Batches(torch.utils.data.IterableDataset):
    """Exactly `steps` pre-batched windows from the corpus (seeded); a training resumed at step `start`
    gets the windows from `start` on, the ones an uninterrupted run sees there."""

    def __init__(self, corpus: Corpus, p: Protocol, start: int = 0) -> None:
        self.corpus, self.p, self.start = corpus, p, start

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        it = self.corpus.train_batches(self.p.batch, self.p.seq_len, self.p.seed)
        for i in range(self.p.steps):
            x, y = next(it)
            if i >= self.start:
                yield torch.from_numpy(x), torch.from_numpy(y)


def _lit_module(model: torch.nn.Module, p: Protocol):
    import lightning.pytorch as pl

    class LitLM(pl.LightningModule):
        """The model plus AdamW/schedule; a non-finite loss stops the run and is remembered."""

        def __init__(self) -> None:
            super().__init__()
            self.model, self.diverged, self.last_loss = model, "", float("nan")

        def training_step(self, batch, batch_idx):
            _, loss = self.model(*batch)
            if not torch.isfinite(loss):
                self.diverged = f"non-finite training loss ({loss.item()}) at step {self.global_step}"
                self.trainer.should_stop = True
                return None  # skip this update
            self.last_loss = float(loss.detach())
            self.log("train_loss", self.last_loss)
            if self.trainer.optimizers:
                self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"])
            return loss

        def configure_optimizers(self):
            decay = [q for q in self.model.parameters() if q.dim() >= 2]
            no_decay = [q for q in self.model.parameters() if q.dim() < 2]
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": p.weight_decay},
                                     {"params": no_decay, "weight_decay": 0.0}],
                                    lr=p.lr, betas=(p.beta1, p.beta2), eps=1e-8)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, p))
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    return LitLM()


def make_logger(node: Mapping[str, Any] | None, name: str) -> Any:
    """A Lightning logger from a config node (forge.shell.tracking.build: CSV by default in the CLIs, or TensorBoard,
    MLflow, ...); `name` (the genome id) is passed where the logger takes one. None: False."""
    from forge.shell.tracking import build

    return build(node, name)


def _quiet_lightning() -> None:
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="lightning")
    warnings.filterwarnings("ignore", message=".*(num_workers|does not have many workers|LightningModule).*")


@torch.no_grad()
def evaluate(model: torch.nn.Module, corpus: Corpus, p: Protocol, device: torch.device) -> float:
    """Mean cross-entropy over the fixed validation windows."""
    model.eval()
    x, y = corpus.val_windows(p.seq_len, p.val_tokens)
    total, n = 0.0, 0
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=p.precision.startswith("bf16"))
    for i in range(0, len(x), p.batch):
        xb, yb = torch.from_numpy(x[i:i + p.batch]).to(device), torch.from_numpy(y[i:i + p.batch]).to(device)
        with autocast:
            _, loss = model(xb, yb)
        total += float(loss) * len(xb)
        n += len(xb)
    return total / n


def _check_fit(genome: Genome, corpus: Corpus, p: Protocol) -> None:
    if corpus.vocab_size > genome.vocab_size:
        raise ProtocolError(f"corpus {corpus.name} has vocab {corpus.vocab_size} > genome vocab_size "
                            f"{genome.vocab_size}; allowed: a tokenizer whose vocab fits the genome")
    if p.seq_len > genome.block_size and genome.pos == "learned":
        raise ProtocolError(f"seq_len {p.seq_len} > block_size {genome.block_size} with learned positions")


def train_genome(genome: Genome, protocol: Protocol, corpus: Corpus, weights_dir: str | None = None,
                 logger: Mapping[str, Any] | None = None, ckpt_dir: str | None = None, fp: str = "",
                 decide: Callable[[int, list], dict | None] | None = None) -> Label:
    """Train from scratch and return the final validation loss with full provenance (inf if diverged).
    With `weights_dir`, the trained weights of a finite run are kept there as `<genome id>.safetensors`
    (provenance `checkpoint`), so `forge-export weights=DIR` ships the trained model. `logger`: a Lightning
    logger node (`make_logger`), one run per genome; none: nothing is logged.
    The curve (validation loss at each rung, forge.labelling.curves) goes in provenance `curve`. With
    `ckpt_dir`, each rung leaves a Lightning checkpoint there (`<id>-<fp>.ckpt`) and a training finding one
    continues from it; `decide(rung index, curve)` returning a dict stops the training at that rung: the
    label is then `stopped` (inf, never a final loss) and the checkpoint stays for a later promotion."""
    import lightning.pytorch as pl

    from forge.labelling.curves import checkpoint_path, make_callback, read_checkpoint_step, rung_steps
    from forge.lm.model import build_model

    _check_fit(genome, corpus, protocol)
    _quiet_lightning()
    if protocol.accelerator == "cpu":
        torch.set_num_threads(protocol.threads)
    torch.manual_seed(protocol.seed)
    model = build_model(genome, seed=protocol.seed)
    params = sum(q.numel() for q in model.parameters())
    lit = _lit_module(torch.compile(model) if protocol.compile else model, protocol)
    rungs = rung_steps(protocol.steps, protocol.eta, protocol.rungs)
    ckpt = checkpoint_path(ckpt_dir, genome.id, fp) if ckpt_dir else None
    start = read_checkpoint_step(ckpt) if ckpt is not None else None
    start = start if start in rungs[:-1] else 0
    tps = protocol.batch * protocol.seq_len
    cb = make_callback(lambda: evaluate(model, corpus, protocol, lit.device), rungs, ckpt, decide, tps)
    trainer = pl.Trainer(max_steps=protocol.steps, accelerator=protocol.accelerator, devices=1,
                         precision=protocol.precision, gradient_clip_val=protocol.grad_clip or None,
                         logger=make_logger(logger, genome.id), log_every_n_steps=max(1, min(50, protocol.steps // 20)),
                         enable_checkpointing=False, enable_progress_bar=False, callbacks=[cb],
                         enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
                         deterministic=False)
    t0, c0 = time.perf_counter(), time.process_time()
    loader = torch.utils.data.DataLoader(_Batches(corpus, protocol, start), batch_size=None, num_workers=0)
    trainer.fit(lit, train_dataloaders=loader, ckpt_path=str(ckpt) if start else None, weights_only=False)
    fit_s = time.perf_counter() - t0
    steps_done = int(trainer.global_step)
    val, reason = float("inf"), lit.diverged
    if not reason and cb.stopped is None:
        val = evaluate(model, corpus, protocol, lit.device)
        if not math.isfinite(val):
            reason, val = f"non-finite validation loss ({val})", float("inf")
        cb.curve.append({"rung": len(rungs), "step": steps_done, "tokens": steps_done * tps,
                         "val_loss": round(val, 6) if math.isfinite(val) else None})
    if trainer.logger is not None:  # the label itself, at the last step, beside the training curve
        trainer.logger.log_metrics({"val_loss": val}, step=steps_done)
        trainer.logger.save()
    prov = _provenance(protocol, corpus, params, steps_done, fit_s, time.perf_counter() - t0, lit.last_loss)
    prov.update(cpu_s=round(time.process_time() - c0, 3), curve=cb.curve, rung_steps=rungs,
                tokens_trained=(steps_done - start) * tps)  # cpu_s: contention-free cost (all threads)
    if start:
        prov["resumed_from_step"] = start
    if cb.stopped is not None:
        prov["stopped"] = cb.stopped
        return Label(genome=genome, label=float("inf"), provenance=prov, status="stopped",
                     reason=f"stopped at rung {cb.stopped['rung']}/{len(rungs)}: {cb.stopped.get('reason', '')}")
    if ckpt is not None:
        ckpt.unlink(missing_ok=True)  # finished: nothing to continue
    if weights_dir and not reason:
        prov["checkpoint"] = str(save_weights(model, Path(weights_dir) / f"{genome.id}.safetensors"))
    return Label(genome=genome, label=val, provenance=prov, reason=reason, status="diverged" if reason else "done")


def save_weights(model: torch.nn.Module, path: Path) -> Path:
    """safetensors, written beside and renamed into place (a reader never sees half a file)."""
    from safetensors.torch import save_model

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        save_model(model, str(tmp))
        os.replace(tmp, path)
    except BaseException:  # a full disk, a kill: no half file left beside the weights
        tmp.unlink(missing_ok=True)
        raise
    return path


def _provenance(p: Protocol, corpus: Corpus, params: int, steps: int, fit_s: float, wall_s: float,
                train_loss: float) -> dict[str, Any]:
    tokens = steps * p.batch * p.seq_len
    return {"protocol": p.name, "tokens": tokens, "seq_len": p.seq_len, "batch": p.batch, "steps": steps,
            "lr": p.lr, "warmup_steps": p.warmup_steps, "precision": p.precision, "seed": p.seed,
            **corpus.provenance(), "params": params, "final_train_loss": train_loss,
            "tokens_per_s": round(tokens / fit_s, 1) if fit_s > 0 else None, "wall_s": round(wall_s, 3),
            "threads": p.threads, "accelerator": p.accelerator, "host": platform.node(),
            "torch": torch.__version__, "date": _dt.date.today().isoformat(), "protocol_config": asdict(p)}


def failure_label(genome: Genome, reason: str, provenance: Mapping[str, Any] | None = None) -> Label:
    """The inf label a failed or lost run gets: status `failed`, not a result (the store retries it)."""
    return Label(genome=genome, label=float("inf"), provenance=dict(provenance or {}), reason=reason, status="failed")


def protocol_fingerprint(protocol: Mapping[str, Any], corpus: Mapping[str, Any]) -> str:
    """The fingerprint labels trained under these configs get: the validated protocol's fields (defaults
    filled, as its labels' `protocol_config` records them) and the built corpus's identity. A bad
    protocol or corpus raises here, in the labeller, before anything is claimed."""
    from forge.labelling.corpus import build_corpus

    return fingerprint(asdict(Protocol.from_config(protocol)), build_corpus(dict(corpus)).provenance())

