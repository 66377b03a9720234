"""Racing the k picks of `forge-verify race=true` (issue 52): all start at the first rung, and at each rung only
the picks that can still enter the picks' front go on; the others stop there (partial labels, their
checkpoints kept, so a later `forge-verify` or `forge-label` promotes them without starting over).

Pick i stops at rung r when some other live pick j has every cost <= i's and P(Y_i < Y_j) < threshold, with
Y the final losses projected by the curve model (forge.fidelity.stopping.CurveModel) and taken independent:
Y_i - Y_j ~ N(m_i - m_j, s_i^2 + s_j^2). At most one of two picks can stop the other (threshold < 1/2).
Each stop is logged with the rung, the projected interval and the pick that beats it. The race runs through
any dispatcher that keeps rung checkpoints (`ckpt_dir`): rung r is a batch that trains every live pick up to
rung r and pauses it (rule `pause`), and the next batch promotes the survivors from their checkpoints.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from forge.fidelity.race import Entrant, race_step
from forge.fidelity.stopping import CurveModel
from forge.disk import run_folder


def _estimate(first: Sequence[Any], wall: float) -> str:
    """The whole race's time bounds once the first rung is measured: between that rung (everyone stops there)
    and that rung's time scaled to the full budget (everyone goes to the end, at the same parallelism)."""
    done = [lab for lab in first if lab.provenance.get("tokens")]
    if not done:
        return f"race: rung 1 took {wall:.1f} s"
    t1 = float(np.median([lab.provenance["tokens"] for lab in done]))
    tr = float(np.median([lab.provenance.get("protocol_config", {}).get("tokens", t1) for lab in done]))
    return (f"race: rung 1 took {wall:.1f} s for {len(first)} picks; the whole race takes between {wall:.0f} s "
            f"(all stop at rung 1) and {wall * tr / t1:.0f} s (all trained to the end)")


def race(trainer: Any, genomes: Sequence[Any], costs: Mapping[str, Sequence[float]],
         priors: Mapping[str, float | None], model: CurveModel, threshold: float, n_rungs: int,
         note: Callable[[str], None] = lambda s: None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Race `genomes` live through `trainer` (a dispatcher with `ckpt_dir`); returns (labels by id, stop log)."""
    alive, log, labels = list(genomes), [], {}
    prev_stop, prev_promote = trainer.stop, trainer.promote
    trainer.promote = True  # each rung continues the last rung's checkpoints
    try:
        for r in range(n_rungs - 1):
            trainer.stop = {"rule": "pause", "at": r}
            t0 = time.perf_counter()
            got = {lab.genome_id: lab for lab in trainer.train(alive)}
            if r == 0:
                note(_estimate(list(got.values()), time.perf_counter() - t0))
            labels.update(got)
            ents = [Entrant(g.id, costs[g.id], priors.get(g.id), _losses(got[g.id])) for g in alive
                    if len(_losses(got[g.id])) > r]
            st = race_step(r, ents, model, threshold)
            log += [{"id": gid, **rec} for gid, rec in st.items()]
            alive = [g for g in alive if g.id not in st and got[g.id].status == "stopped"]
            note(f"race: rung {r + 1}: {len(st)} stopped, {len(alive)} go on")
        trainer.stop = None
        labels.update({lab.genome_id: lab for lab in trainer.train(alive)})
    finally:
        trainer.stop, trainer.promote = prev_stop, prev_promote
    return labels, log


def _losses(lab: Any) -> list[float]:
    return [float("nan") if p.get("val_loss") is None else float(p["val_loss"]) for p in lab.provenance.get("curve", [])]


def verify_race(v: Any, picks: Sequence[dict[str, Any]], roles: Mapping[str, str]) -> dict[str, Any]:
    """forge-verify race=true: race the picks (their costs from the run's rows, the surrogate's mu as the prior),
    write <out>/race.json (every stop with its reason), print the whole race's time bounds; labels by row id."""
    import json
    import sys

    from forge.disk.io import atomic_write_json, read_text
    from forge.genomes.genome import genome_from_dict
    from search.objectives import LOSS
    from search.errors import VerifyError

    t = v.trainer
    model_path, thr = v.cfg.get("race_model"), float(v.cfg.get("race_threshold", 0.05))
    rungs = int((v.protocol() or {}).get("rungs", 1))
    if not hasattr(t, "ckpt_dir") or rungs < 2 or not model_path or not 0 < thr < 0.5:
        raise VerifyError(f"race=true needs a dispatcher with rung checkpoints, a protocol with rungs >= 2 (now "
                          f"{rungs}; e.g. protocol=cpu-curve), race_model=FILE (a curve model JSON) and 0 < "
                          f"race_threshold < 0.5 (now {thr:g}); allowed: race=false, or those")
    model = CurveModel.from_dict(json.loads(read_text(str(model_path), "race model")))
    signs = dict(zip(v.problem.objectives, v.problem.signs))
    by_id = {r["id"]: r for r in picks}
    genomes = {r["id"]: genome_from_dict(r["genome"]) for r in picks}
    costs = {genomes[i].id: [float(r["metrics"][o]) * signs.get(o, 1) for o in v.problem.objectives if o != LOSS]
             for i, r in by_id.items()}
    priors = {genomes[i].id: r["metrics"].get("mu") for i, r in by_id.items()}
    t.ckpt_dir = str(v.out / run_folder.CHECKPOINTS_DIR)
    say = (lambda s: print(f"forge-verify: {s}", file=sys.stderr)) if v.cfg.get("progress") else (lambda s: None)
    say(f"race of {len(picks)} picks over {rungs} rungs (threshold {thr:g})")
    labels, log = race(t, list(genomes.values()), costs, priors, model, thr, rungs, say)
    spent = sum(int(lab.provenance.get("tokens", 0)) for lab in labels.values())
    atomic_write_json(v.out / run_folder.RACE, {"threshold": thr, "rungs": rungs, "stops": log, "tokens": spent,
                                            "finished": [g for g, lab in labels.items() if lab.status == "done"]})
    return {i: labels[g.id] for i, g in genomes.items()}
