"""Issue 52 §4: the headline figure confirmed live — a real `forge-label` batch under `stop.rule=front` on genomes
whose full labels are committed, against what the replay predicts for the same genomes, order and front.

    .venv/bin/python bench/bench_curves_live.py prepare --n 20      # held-out batch, its inputs, model, replay
    nice -n 10 .venv/bin/forge-label genomes=bench/results/curves/live/batch.jsonl protocol=cpu-curve \
        stop.rule=front stop.inputs=bench/results/curves/live/inputs.json \
        stop.model=bench/results/curves/live/model.json stop.threshold=0.1 dispatch.workers=1 \
        store=/tmp/live.db export=bench/results/curves/live/labels.jsonl out_dir=/tmp/live-out logger=none
    .venv/bin/python bench/bench_curves_live.py compare              # -> live/compare.json (RESULTS)
    .venv/bin/python bench/bench_curves_live.py alternative          # replay only: the cross-validated setting

The held-out batch: `--n` of the 67 committed genomes drawn with `--seed`, in that (arrival) order. The front to
beat: the other genomes' committed full labels (costs on the 2 targets of curves.json). The curve model (`last`,
the replay's best zero-wrong-stop setting at threshold 0.1) is fit on those others only, so no decision sees a
held-out final. The prediction replays the committed curves of the batch, in the same order, through the same
`FrontRule`, with the front growing by each batch genome that finishes (as the live store's peers do with one
worker). Wrong stops: stopped genomes that are members of the front of all 67 full labels.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from forge.disk.io import atomic_write_json, atomic_write_text
from forge.fidelity.stopping import Context, FrontRule, fit_curve_model

HERE = Path(__file__).resolve().parent / "results" / "curves"
LIVE = HERE / "live"


def _data():
    d = json.loads((HERE / "curves.json").read_text())["genomes"]
    return d, np.array([r["curve"] for r in d]), np.array([r["costs"] for r in d]), np.array(d[0]["tokens"])


def predict(batch, others, L, C, T, ids, model, threshold, priors=None, rung_thresholds=()) -> list[dict]:
    """The replay of the batch (committed curves) in its order: per genome, the rung it stops at (or None)."""
    front = [(ids[j], list(C[j]), float(L[j, -1])) for j in others]
    rule, out = FrontRule(model, threshold, rung_thresholds=tuple(rung_thresholds)), []
    for i in batch:
        ctx = Context(list(C[i]), None if priors is None else float(priors[i]), list(front), {}, ids[i])
        stop = next((r for r in range(L.shape[1] - 1) if rule.decide(r, L[i, : r + 1], ctx) is not None), None)
        out.append({"id": ids[i], "stop_rung": None if stop is None else stop + 1,
                    "tokens": int(T[-1] if stop is None else T[stop])})
        if stop is None:
            front.append((ids[i], list(C[i]), float(L[i, -1])))
    return out


def prepare(n: int, seed: int, threshold: float) -> dict:
    from forge.genomes.labels import read_labels

    rows, L, C, T = _data()
    ids = [r["id"] for r in rows]
    perm = np.random.default_rng(seed).permutation(len(ids))
    batch, others = [int(i) for i in perm[:n]], sorted(int(i) for i in perm[n:])
    model = fit_curve_model(L[others], "last")
    genomes = {lab.genome_id: lab.genome for lab in read_labels(HERE / "iha-tiny-cpu-curve.jsonl")}
    LIVE.mkdir(exist_ok=True)
    atomic_write_text(LIVE / "batch.jsonl", "".join(json.dumps(genomes[ids[i]].to_dict()) + "\n" for i in batch))
    atomic_write_json(LIVE / "inputs.json", {
        "genomes": {ids[i]: {"costs": rows[i]["costs"], "prior": None} for i in batch},
        "front": [{"id": ids[j], "costs": rows[j]["costs"], "loss": float(L[j, -1])} for j in others]})
    atomic_write_json(LIVE / "model.json", model.to_dict())
    pred = predict(batch, others, L, C, T, ids, model, threshold)
    atomic_write_json(LIVE / "predicted.json", {"n": n, "seed": seed, "threshold": threshold, "rows": pred})
    return {"batch": n, "front_from": len(others), "predicted_stops": sum(p["stop_rung"] is not None for p in pred),
            "predicted_tokens": sum(p["tokens"] for p in pred)}


def alternative(n: int, seed: int, rung_thresholds: list[float]) -> dict:
    """Replay only (not run live): the cross-validated setting (bench_curves_cv.py: the `prior` model, one
    threshold per rung) on the same batch, order and front, its model fit on the same 47 others."""
    rows, L, C, T = _data()
    ids, prior = [r["id"] for r in rows], np.array([r["prior"] for r in rows])
    perm = np.random.default_rng(seed).permutation(len(ids))
    batch, others = [int(i) for i in perm[:n]], sorted(int(i) for i in perm[n:])
    model = fit_curve_model(L[others], "prior", prior[others])
    pred = predict(batch, others, L, C, T, ids, model, 0.05, prior, rung_thresholds)
    inputs = json.loads((LIVE / "inputs.json").read_text())  # the same batch and front, with the priors the replay uses
    for i in batch:
        inputs["genomes"][ids[i]]["prior"] = float(prior[i])
    atomic_write_json(LIVE / "inputs-prior.json", inputs)
    atomic_write_json(LIVE / "model-prior.json", model.to_dict())
    from search.archive import non_dominated

    front = {ids[i] for i in non_dominated(np.column_stack([L[:, -1], C]))}
    tok = sum(p["tokens"] for p in pred)
    s = {"rung_thresholds": rung_thresholds, "tokens": tok, "compute_saved": round(n * int(T[-1]) / tok, 3),
         "stops": sum(p["stop_rung"] is not None for p in pred),
         "wrong_stops": sum(p["stop_rung"] is not None and p["id"] in front for p in pred)}
    atomic_write_json(LIVE / "alternative.json", {**s, "rows": pred})
    return s


def compare(name: str = "") -> dict:
    from forge.genomes.labels import read_labels
    from search.archive import non_dominated

    rows, L, C, T = _data()
    ids = [r["id"] for r in rows]
    full_front = {ids[i] for i in non_dominated(np.column_stack([L[:, -1], C]))}
    pred = json.loads((LIVE / ("alternative.json" if name else "predicted.json")).read_text())
    live = {lab.genome_id: lab for lab in read_labels(LIVE / f"labels{name}.jsonl") if lab.status in ("done", "stopped")}
    out = []
    for p in pred["rows"]:  # the batch's prefix the live run finished (a run cut short compares what it did)
        if p["id"] not in live:
            break
        lab, i = live[p["id"]], ids.index(p["id"])
        curve = [c["val_loss"] for c in lab.provenance.get("curve", [])]
        stop = lab.provenance.get("stopped", {}).get("rung") if lab.status == "stopped" else None
        out.append({"id": p["id"], "status": lab.status, "live_stop_rung": stop, "replay_stop_rung": p["stop_rung"],
                    "live_tokens": int(lab.provenance.get("tokens_trained", 0)), "replay_tokens": p["tokens"],
                    "curve_equal": curve == [float(x) for x in L[i, : len(curve)]],
                    "front_member": p["id"] in full_front, "cpu_s": lab.provenance.get("cpu_s")})
    full = len(out) * int(T[-1])
    lt, rt = sum(r["live_tokens"] for r in out), sum(r["replay_tokens"] for r in out)
    s = {"n": len(out), "of": len(pred["rows"]), "live_tokens": lt, "replay_tokens": rt, "live_over_replay_tokens": round(lt / rt, 4),
         "live_compute_saved": round(full / lt, 3), "replay_compute_saved": round(full / rt, 3),
         "live_stops": sum(r["live_stop_rung"] is not None for r in out),
         "replay_stops": sum(r["replay_stop_rung"] is not None for r in out),
         "same_decisions": sum(r["live_stop_rung"] == r["replay_stop_rung"] for r in out),
         "live_wrong_stops": sum(r["live_stop_rung"] is not None and r["front_member"] for r in out),
         "replay_wrong_stops": sum(r["replay_stop_rung"] is not None and r["front_member"] for r in out),
         "front_members_in_batch": sum(r["front_member"] for r in out),
         "curves_equal": sum(r["curve_equal"] for r in out),
         "live_cpu_s": round(sum(r["cpu_s"] or 0 for r in out), 1)}
    atomic_write_json(LIVE / f"compare{name}.json", {**s, "rows": out})
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("prepare", "compare", "alternative"))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=520)
    ap.add_argument("--threshold", type=float, default=0.1)
    ap.add_argument("--rung-thresholds", type=float, nargs=3, default=[0.05, 0.05, 0.3])
    ap.add_argument("--name", default="", help="compare: '' (the live run of predicted.json) or -alt (of alternative.json)")
    a = ap.parse_args()
    out = {"prepare": lambda: prepare(a.n, a.seed, a.threshold), "compare": lambda: compare(a.name),
           "alternative": lambda: alternative(a.n, a.seed, a.rung_thresholds)}[a.what]()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
