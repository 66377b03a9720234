"""Issue 54, "the search at scale": asynchronous against synchronous co-evolution on the tiny protocol.

    nice -n 10 .venv/bin/python bench/bench_coevolve_async.py --workers 2 4 --seeds 0

`experiment=coevolve-tiny` (iha-tiny, the shipped tiny Forge-Former, cpu-proxy labels on the stdlib corpus through
the local dispatcher) with an event every 2 of 10 generations, b = 4 picks, `dispatch.workers` = W, run once with
`search.coevolve.mode=sync` and once with `mode=async` (the same seed, interleaved). Per run:
  wall_s         the whole search, co-evolution's trainings and refits included
  labels         real labels the run trained (async spends what it handed out: the run waits for them at the end)
  utilisation    worker-seconds inside training (each label's own `wall_s`) over W x wall_s
  real_hv        hypervolume of the labelled genomes' non-dominated set in (real loss, params), each divided by the
                 GPT-2-style anchor genome's real value (trained once here), reference point 2.0
  hv_per_hour    real_hv / wall hours; labels_per_hour likewise
The machine's load is printed beside the numbers: the runs share 2 cores with other sessions, and W = 4 puts four
trainings on them, so each training runs slower there than at W = 2.
Results go to bench/results/coevolve_async.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "coevolve_async.json"
OVERRIDES = ["experiment=coevolve-tiny", "progress=false", "search.generations=10", "search.coevolve.every=2",
             "search.coevolve.batch=4"]


def one_run(mode: str, workers: int, seed: int, work: Path) -> dict[str, Any]:
    from search.api_compose import compose
    from search.cli import run
    from search.state import read_jsonl

    run_dir = work / f"{mode}-w{workers}-s{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = compose("forge-search", [*OVERRIDES, f"seed={seed}", f"dispatch.workers={workers}",
                                   f"search.coevolve.mode={mode}"])
    cfg = {**__import__("omegaconf").OmegaConf.to_container(cfg, resolve=True), "out_dir": str(run_dir)}
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    summary = run(cfg)
    wall = time.perf_counter() - t0
    assert summary["status"] == "complete", summary["status"]
    labels = read_jsonl(run_dir / "labels.jsonl")
    busy = sum(float(r.get("provenance", {}).get("wall_s") or 0.0) for r in labels)
    return {"mode": mode, "workers": workers, "seed": seed, "wall_s": round(wall, 1), "labels": len(labels),
            "busy_s": round(busy, 1), "utilisation": round(busy / (workers * wall), 3),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
            "rows": [[r["genome_id"], r["label"], r["genome"]] for r in labels]}


def anchor_point(work: Path) -> list[float]:
    """The anchor genome's real loss (trained once, under the runs' protocol and corpus) and its params."""
    from forge.runtime.config import group_yaml
    from forge.spaces.space import load_space
    from search.archive import default_anchor
    from search.components import build_trainer
    g = default_anchor(load_space("iha-tiny"))
    cfg = {"protocol": group_yaml("protocol", "cpu-proxy"), "corpus": group_yaml("corpus", "stdlib"),
           "dispatch": {**group_yaml("dispatch", "local"), "workers": 1}}
    lab = build_trainer(cfg, None, work / "anchor.db").train([g])[0]
    return [float(lab.label), float(params_of([g])[0])]


def params_of(genomes: list) -> np.ndarray:
    from forge.lm.workload import model_totals
    from forge.spaces.arrays import PopArrays

    return np.asarray(model_totals(PopArrays.from_genomes(list(genomes)))["params"], float)


def real_hv(rows: list, anchor: list[float]) -> float:
    from forge.genomes.genome import genome_from_dict
    from search.archive import Hypervolume

    fin = [(float(y), genome_from_dict(g)) for _, y, g in rows if isinstance(y, (int, float)) and np.isfinite(y)]
    if not fin:
        return 0.0
    F = np.column_stack([[y for y, _ in fin], params_of([g for _, g in fin])])
    return float(Hypervolume(anchor, 2.0)(F))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--work", type=Path, default=ROOT / "multirun" / "bench-coevolve-async")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    res = json.loads(OUT.read_text()) if OUT.is_file() else {"runs": {}}
    res.setdefault("anchor", anchor_point(a.work))
    for seed in a.seeds:
        for w in a.workers:
            for mode in ("sync", "async"):
                key = f"{mode}/w{w}/s{seed}"
                r = one_run(mode, w, seed, a.work)
                r["real_hv"] = round(real_hv(r.pop("rows"), res["anchor"]), 4)
                r["hv_per_hour"] = round(r["real_hv"] / (r["wall_s"] / 3600), 2)
                r["labels_per_hour"] = round(r["labels"] / (r["wall_s"] / 3600), 1)
                res["runs"][key] = r
                OUT.parent.mkdir(parents=True, exist_ok=True)
                OUT.write_text(json.dumps(res, indent=1))
                print(key, json.dumps(r), flush=True)
    print(table(res))


def table(res: dict[str, Any]) -> str:
    lines = ["| W | mode | seed | wall s | labels | utilisation | real HV | HV / wall-hour | labels / wall-hour | "
             "load before→after |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(res["runs"].values(), key=lambda r: (r["workers"], r["seed"], r["mode"] != "sync")):
        lines.append(f"| {r['workers']} | {r['mode']} | {r['seed']} | {r['wall_s']} | {r['labels']} | "
                     f"{r['utilisation']:.2f} | {r['real_hv']:.4f} | {r['hv_per_hour']} | {r['labels_per_hour']} | "
                     f"{r['load_before']}→{r['load_after']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
