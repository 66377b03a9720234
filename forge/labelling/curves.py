"""Learning curves: the validation loss of a training at rungs, a geometric ladder of its budget.

With η = `protocol.eta` and R = `protocol.rungs`, rung k (k = 1..R) sits at step ≈ steps / η^(R-k): for
η = 3, R = 4 the rungs are 1/27, 1/9, 1/3 and 1 of the budget (Hyperband/ASHA's ladder, Li et al. 2018).
The last rung is the final label. At each earlier rung `RungCallback` evaluates the fixed validation
windows (the model in eval mode, no randomness drawn, so the final label is the one a run without rungs
gives), saves a Lightning checkpoint under a known name (`<genome id>-<protocol fingerprint>.ckpt` in the
dispatcher's checkpoint folder, never a path read from the store), and asks the stopping rule whether to
go on. A stopped training keeps that checkpoint: promoting it later continues from the rung
(`train_genome(..., ckpt_dir=...)`), and a killed one resumes from its last rung.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from forge.errors import ForgeError


class CurveError(ForgeError):
    """A rung ladder outside its allowed values."""


def rung_steps(steps: int, eta: int, rungs: int) -> list[int]:
    """Optimizer steps at which each rung is read (increasing, distinct, the last one = `steps`)."""
    if int(eta) < 2 or int(rungs) < 1:
        raise CurveError(f"protocol.eta = {eta}, protocol.rungs = {rungs}; allowed: eta >= 2, rungs >= 1")
    out: list[int] = []
    for k in range(int(rungs) - 1, -1, -1):
        s = max(1, round(steps / int(eta) ** k))
        if not out or s > out[-1]:
            out.append(s)
    return out


def checkpoint_path(ckpt_dir: str | os.PathLike, genome_id: str, fp: str) -> Path:
    """The one file a genome's partial training lives in (a known name built from ids, never read from disk)."""
    if not (genome_id.isalnum() and (fp == "" or fp.isalnum())):
        raise CurveError(f"genome id {genome_id!r} / fingerprint {fp!r}; allowed: hex ids")
    return Path(ckpt_dir) / f"{genome_id}-{fp or 'nofp'}.ckpt"


def make_callback(evaluate: Callable[[], float], rungs: list[int], ckpt: Path | None,
                  decide: Callable[[int, list[dict[str, Any]]], dict[str, Any] | None] | None, tokens_per_step: int):
    """A Lightning callback reading the curve at every rung but the last (that one is the final label)."""
    import lightning.pytorch as pl

    class RungCallback(pl.Callback):
        """Curve + checkpoint at each rung; `decide(rung index, curve)` returning a dict stops the run."""

        def __init__(self) -> None:
            self.curve: list[dict[str, Any]] = []
            self.stopped: dict[str, Any] | None = None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            step = int(trainer.global_step)
            if step not in rungs[:-1] or any(p["step"] == step for p in self.curve) or trainer.should_stop:
                return
            loss = float(evaluate())
            pl_module.train()
            self.curve.append({"rung": rungs.index(step) + 1, "step": step, "tokens": step * tokens_per_step,
                               "val_loss": round(loss, 6) if loss == loss else loss})
            if ckpt is not None:
                ckpt.parent.mkdir(parents=True, exist_ok=True)
                tmp = ckpt.with_name(f".{ckpt.name}.{os.getpid()}.tmp")
                trainer.save_checkpoint(str(tmp), weights_only=False)
                os.replace(tmp, ckpt)
            verdict = decide(rungs.index(step), list(self.curve)) if decide is not None else None
            if verdict is not None:
                self.stopped = {**verdict, "rung": rungs.index(step) + 1, "step": step,
                                "tokens": step * tokens_per_step, "loss": self.curve[-1]["val_loss"]}
                trainer.should_stop = True

        def state_dict(self) -> dict[str, Any]:
            return {"curve": list(self.curve)}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self.curve = [dict(p) for p in state.get("curve", [])]

    return RungCallback()


def read_checkpoint_step(path: Path) -> int | None:
    """The step a checkpoint was saved at (None when absent or unreadable: the training starts over).
    Read with `weights_only=True`: a checkpoint file never runs code."""
    import torch

    if not path.is_file():
        return None
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True)["global_step"])
    except Exception:  # a torn or foreign file: start over rather than trust it
        return None


def _store_peers(spec: Mapping[str, Any], known: Mapping[str, Any]) -> dict:
    """Curves already in the store under this protocol, for the genomes whose costs the spec carries."""
    if not spec.get("store"):
        return {}
    from forge.labelling.store import LabelStore

    out = {}
    for lab in LabelStore(spec["store"]).labels(spec.get("fp") or None, statuses=("done", "stopped")):
        if lab.genome_id in known:
            ls = [p["val_loss"] for p in lab.provenance.get("curve", []) if p.get("val_loss") is not None]
            out[lab.genome_id] = (known[lab.genome_id]["costs"], ls, lab.label if lab.status == "done" else None)
    return out


def decider(spec: Mapping[str, Any], gid: str) -> Callable[[int, list[dict[str, Any]]], dict[str, Any] | None]:
    """The `decide(rung index, curve)` a training calls at each rung (forge.labelling.curves), built in the
    worker from the dispatcher's spec: the rule, the front, each genome's costs and prior, the store's curves."""
    from forge.fidelity.stopping import Context, NoStop, PauseRule, build_rule

    rule, known = build_rule(spec), dict(spec.get("genomes", {}))
    if isinstance(rule, (PauseRule, NoStop)):
        return lambda r, curve: rule.decide(r, [], Context([]))
    me = known.get(gid)
    if me is None:  # a genome the caller gave no costs for: nothing to compare, train it in full
        return lambda r, curve: None
    front = [(str(m["id"]), list(m["costs"]), float(m["loss"])) for m in spec.get("front", [])]

    def decide(r: int, curve: list[dict[str, Any]]) -> dict[str, Any] | None:
        losses = [float("nan") if p.get("val_loss") is None else float(p["val_loss"]) for p in curve]
        ctx = Context(list(me["costs"]), me.get("prior"), front, _store_peers(spec, known), gid)
        return rule.decide(r, losses, ctx)

    return decide
