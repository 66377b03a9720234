"""A run's summary.json: the contract every consumer reads (status first), written by the loop at each end."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from forge.disk.io import as_float, atomic_write_json
from search.archive import least_violating
from search.odds import odds_summary
from surrogate.pairwise import PairwiseOdds
from search.constraints import use_of_values
from forge.disk import run_folder


def interval_summary(search: Any) -> dict[str, Any]:
    """The contract's `loss_interval`: level, method, source (what the interval is: failure risk, not a tie), and
    any gene the loss is blind to."""
    ev = search.problem.evaluator
    info = getattr(ev, "interval_info", None)
    out = info() if info else {"level": None, "method": "none", "source": "the evaluator has no interval"}
    blind = list(getattr(ev, "blind", ()))  # genes the loss cannot see (search.blind)
    return {**out, **({"blind_to": blind} if blind else {})}


def pairwise_summary(search: Any) -> dict[str, Any] | None:
    """The contract's `loss_pairwise` (search.odds): the odds curve of the predictor the front was priced with
    (co-evolution's refit carries its parent's, said in its provenance); None when it has none."""
    ev = search.problem.evaluator
    odds = getattr(getattr(ev, "predictor", None), "pairwise", None)
    named = getattr(ev, "named", None) or {}
    return odds_summary(search.archive.entries, odds if isinstance(odds, PairwiseOdds) else None,
                        named.get("name") if isinstance(named, dict) else None)


def predictor_label(named: Any) -> str | None:
    """summary.json's `loss_predictor` in words, for the console, the report and the card:
    `forgeformer-iha-paper-all (evaluator.predictor=auto)`, or the name alone when it was named; None: not recorded."""
    if not isinstance(named, dict) or not named.get("name"):
        return None
    req = named.get("requested")
    return str(named["name"]) + (f" (evaluator.predictor={req})" if req and req != named["name"] else "")


def evaluated_values(run_dir: Path, names: list[str]) -> dict[str, np.ndarray]:
    """Per metric of `names`, its value in every genome the run evaluated, the latest record of each id, streamed
    from archive.jsonl (a resumed run holds only its population in memory): in memory an id and a float per name
    for each evaluation, never the records (issue 53 §3: read whole, they took a 62,424-evaluation run to 534 MiB)."""
    from search.state import iter_jsonl

    ids: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    chunk: list[tuple[bytes, list[float]]] = []

    def flush() -> None:
        if chunk:
            ids.append(np.array([i for i, _ in chunk], dtype=bytes))
            vals.append(np.array([v for _, v in chunk], float).reshape(len(chunk), len(names)))
            chunk.clear()

    for r in iter_jsonl(Path(run_dir) / run_folder.ARCHIVE, True):
        if isinstance(r, dict) and "id" in r:
            m = r.get("metrics") or {}
            m = m if isinstance(m, dict) else {}
            chunk.append((str(r["id"]).encode(), [as_float(m.get(k), np.nan) for k in names]))
            if len(chunk) >= 4096:
                flush()
    flush()
    if not ids:
        return {k: np.zeros(0) for k in names}
    rid, rv = np.concatenate(ids)[::-1], np.concatenate(vals)[::-1]  # reversed: the first of an id is its latest
    _, first = np.unique(rid, return_index=True)
    return {k: rv[np.sort(first), j] for j, k in enumerate(names)}


def write_summary(search: Any, status: str, interrupted_by: str | None = None,
                  reason: str | None = None) -> dict[str, Any]:
    """summary.json of a `search.runner.Search`; `status` (complete | stopped | interrupted | running | failed) is
    the field consumers check; a failed run says why in `reason` (and resumes from its last checkpoint)."""
    s, problem = search, search.problem
    hv, hv_lp = s.hv_values() if s.gen >= 0 else (0.0, 0.0)
    summary = {"status": status, "generations_done": s.gen, "generations": s.G,
               "hypervolume": hv, "hypervolume_loss_params": hv_lp,
               "hv_per_generation": [h["hv"] for h in s.history],
               "hv_loss_params_per_generation": [h["hv_loss_params"] for h in s.history],
               "evaluations": problem.n_evaluated, "archive_size": len(s.archive),
               "wall_s": s.wall(), "phase_s": s.all_timers(), "objectives": problem.objectives,
               **({"maximize": maxi} if (maxi := [o.name for o in problem.specs if o.sign < 0]) else {}),
               "constraints": [str(c) for c in problem.constraints],
               "constraint_use": use_of_values(cons := list(problem.constraints),
                                                evaluated_values(s.run_dir, list(dict.fromkeys(c.name for c in cons)))),
               "hv_anchor": {"genome": s.anchor_genome.to_dict(), "values": s.anchor, "ref": s.hv.ref},
               "algorithm": s.plan.algorithm, "space": s.space.name, "backend": getattr(problem.backend, "name", "?"),
               "seed": s.seed, "surrogate_version": problem.evaluator.version,
               "run_dir": str(s.run_dir), "loss_interval": interval_summary(s),
               **({"loss_pairwise": odds} if (odds := pairwise_summary(s)) else {}),
               **({"loss_predictor": named} if (named := getattr(problem.evaluator, "named", None)) else {})}
    if interrupted_by:
        summary["interrupted_by"] = interrupted_by
    if reason:
        summary["reason"] = reason
    if s.gen >= 0 and not len(s.archive):
        pop = s.algo.pop  # no genome met the constraints: an empty front is a result, say by how much
        summary["least_violating"] = least_violating(problem.ids(pop.get("X")), pop.get("CV"), s.records,
                                                     problem.violations)
    if s.coevo is not None:
        summary["coevolution"] = s.coevo.summary()
    atomic_write_json(s.run_dir / run_folder.SUMMARY, summary)
    return summary
