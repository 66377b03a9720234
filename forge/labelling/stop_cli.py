"""`forge-label stop.rule=...`: a batch given a front to beat (issue 52).

    forge-label genomes=batch.jsonl protocol=cpu-curve stop.rule=front stop.inputs=stop_inputs.json \
        stop.model=bench/results/curves/cpu-curve-model.json stop.threshold=0.05

`stop.inputs` is the JSON that `search.stop_inputs.write_inputs` writes (the labeller imports no backend or
surrogate): each genome's exact costs on the hardware targets and its surrogate prior, and the front to beat
(members' ids, costs and real losses). Numbers only: a file naming anything else is refused in one line.
Genomes it gives no costs for are trained in full. Rung checkpoints live in `checkpoints` (default: beside a
SQLite store, `<store>.checkpoints/`), so a stopped training can be promoted later (`stop.rule=none`, the
default, continues stored stopped trainings from their checkpoints). Every stop lands in `<run dir>/stops.jsonl`.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from forge.errors import UserError
from forge.genomes.labels import Label


def _numbers(v: Any, what: str) -> list[float]:
    if not isinstance(v, list) or not v or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                   and math.isfinite(x) for x in v):
        raise UserError(f"stop.inputs: {what} = {str(v)[:80]}; allowed: a non-empty list of finite numbers")
    return [float(x) for x in v]


def read_inputs(path: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """(genomes: id -> {costs, prior}, front: [{id, costs, loss}]) from a stop-inputs JSON, checked."""
    from forge.disk.io import read_text

    try:
        d = json.loads(read_text(Path(path), "stop inputs"))
        genomes, front = dict(d["genomes"]), list(d.get("front", []))
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"stop.inputs={path}: not a stop-inputs file ({e}); allowed: the JSON that "
                        "search.stop_inputs.write_inputs writes ({genomes: {id: {costs, prior}}, front: [...]})") from None
    out = {}
    for gid, v in genomes.items():
        prior = v.get("prior") if isinstance(v, dict) else None
        if prior is not None and not (isinstance(prior, (int, float)) and math.isfinite(prior)):
            raise UserError(f"stop.inputs: genome {gid} prior = {prior!r}; allowed: a finite number or null")
        out[str(gid)] = {"costs": _numbers(v.get("costs") if isinstance(v, dict) else None, f"genome {gid} costs"),
                         "prior": None if prior is None else float(prior)}
    fr = [{"id": str(m.get("id", "")), "costs": _numbers(m.get("costs"), "front costs"),
           "loss": _numbers([m.get("loss")], "front loss")[0]} for m in front if isinstance(m, dict)]
    return out, fr


def checkpoints_dir(cfg: Any, store_url: str) -> str | None:
    """Where rung checkpoints go: `checkpoints=DIR`, else beside a SQLite store, else nowhere (no promotion)."""
    if cfg.get("checkpoints"):
        return str(cfg.checkpoints)
    if store_url.startswith("sqlite:///") and ":memory:" not in store_url:
        return store_url[len("sqlite:///"):] + ".checkpoints"
    return None


def stop_spec(node: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The dispatcher's `stop` from the `stop` config node; None for rule=none (train in full, promote)."""
    from forge.fidelity.stopping import rule_spec

    node = dict(node or {})
    rule = str(node.get("rule") or "none")
    if rule == "none":
        return None
    genomes, front = read_inputs(str(node["inputs"])) if node.get("inputs") else ({}, [])
    if rule in ("front", "moasha") and not genomes:
        raise UserError(f"stop.rule={rule} needs stop.inputs (each genome's exact costs); allowed: a file from "
                        "search.stop_inputs.write_inputs, or stop.rule=asha|none")
    return rule_spec(rule, genomes, front, float(node.get("threshold", 0.05)), node.get("model"),
                     int(node.get("eta", 3)), rung_thresholds=node.get("rung_thresholds"))


def stop_record(lab: Label) -> dict[str, Any]:
    """One line of stops.jsonl: the genome, its rung, the projected interval, the dominating member, the reason."""
    s = dict(lab.provenance.get("stopped", {}))
    return {"genome_id": lab.genome_id, "rung": s.get("rung"), "step": s.get("step"), "tokens": s.get("tokens"),
            "loss": s.get("loss"), "interval": s.get("interval"), "projected": s.get("projected"),
            "p_enter": s.get("p_enter"), "dominated_by": s.get("dominated_by"), "rule": s.get("rule"),
            "reason": lab.reason}


def write_stops(path: Path, labels: list[Label]) -> int:
    """stops.jsonl of a run: one line per training the rule stopped (none: no file)."""
    from forge.disk.io import atomic_write_text

    rows = [stop_record(lab) for lab in labels if lab.status == "stopped"]
    if rows:
        atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return len(rows)
