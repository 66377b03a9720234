"""The stopping rule on co-evolution's real trainings (issue 52, `search.coevolve.stop`): before each event's
batch, the dispatcher is armed with the picks' exact costs (their objective rows less the loss) and surrogate
priors, and the front of the real labels gathered so far; a pick that can no longer enter it stops at a rung
(a partial label: not in the buffer, never fine-tuned on). Every stop is appended to <run>/stops.jsonl.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from forge.fidelity.stopping import rule_spec
from search.errors import SearchConfigError
from search.objectives import LOSS
from search.state import append_jsonl
from forge.disk import run_folder


@dataclass
class CoStop:
    """The rule's settings and the exact costs of every pick trained so far (the front's members need them)."""

    rule: str
    threshold: float
    model: dict[str, Any] | None
    loss_col: int
    costs: dict[str, list[float]] = field(default_factory=dict)
    rung_thresholds: tuple[float, ...] = ()  # one per rung below the last instead of `threshold` (FrontRule)

    def arm(self, trainer: Any, picks: Sequence[Any], F: np.ndarray, mu: np.ndarray, buffer: Sequence[Any]) -> None:
        rows = np.delete(np.asarray(F, float), self.loss_col, axis=1)
        for g, c in zip(picks, rows):
            self.costs[g.id] = [round(float(x), 9) for x in c]
        front = [{"id": lab.genome_id, "costs": self.costs[lab.genome_id], "loss": float(lab.label)}
                 for lab in buffer if lab.genome_id in self.costs and lab.finite]
        genomes = {g.id: {"costs": self.costs[g.id], "prior": round(float(m), 6)} for g, m in zip(picks, mu)}
        trainer.stop = rule_spec(self.rule, genomes, front, self.threshold, self.model,
                                 rung_thresholds=list(self.rung_thresholds) or None)

    def log(self, labels: Sequence[Any], run_dir: Path) -> int:
        rows = [{"genome_id": lab.genome_id, "reason": lab.reason, **lab.provenance.get("stopped", {})}
                for lab in labels if lab.status == "stopped"]
        if rows:
            append_jsonl(Path(run_dir) / run_folder.STOPS, rows)
        return len(rows)


def stop_knobs(node: Mapping[str, Any], cfg: Mapping[str, Any], trainer: Any, run_dir: Path) -> CoStop:
    """Checked when the search is built: a trainer that keeps rung checkpoints, a rule, its model file."""
    node = dict(node)
    if not hasattr(trainer, "stop"):
        raise SearchConfigError(f"search.coevolve.stop needs a Forge dispatcher (local, ray, submitit); "
                                f"{type(trainer).__name__} has no stopping rule; allowed: search.coevolve.stop=null")
    objectives = list(cfg["objectives"])
    if LOSS not in objectives:
        raise SearchConfigError(f"search.coevolve.stop needs the {LOSS} objective; allowed: objectives with {LOSS}")
    model = node.get("model")
    if isinstance(model, str):
        from forge.disk.io import read_text

        model = json.loads(read_text(model, "curve model"))
    st = CoStop(str(node.get("rule", "front")), float(node.get("threshold", 0.05)), model, objectives.index(LOSS),
                rung_thresholds=tuple(node.get("rung_thresholds") or ()))
    # a bad rule, model or threshold is refused now, not at the event
    rule_spec(st.rule, {}, (), st.threshold, st.model, rung_thresholds=list(st.rung_thresholds) or None)
    trainer.ckpt_dir = str(Path(run_dir) / run_folder.TRAIN_CHECKPOINTS)
    return st
