"""Figures: RESULTS.md "Issue 38: a weight-sharing supernet as a second loss source".

Views (each writes its part of bench/results/supernet.json):
- `train`: one label's cost (the CPU seconds the 86 shipped iha-tiny-swa labels record), then train the supernet for --steps sandwich steps (largest + smallest + --n-random random children each) and save it
  to --ckpt (outputs/, not committed). Costs: CPU seconds of this process.
- `score`: every real label's genome (340 iha-tiny + 86 iha-tiny-swa) scored with inherited weights on the
  protocol's fixed validation windows (--val-tokens of them), rows dealt to --workers processes.
- `report`: on those scores, against the labels: Spearman / Kendall with 1,000-resample bootstrap CIs
  (architectures resampled) overall and on the windowed rows; the 12 window twins; then grouped 5-fold CV of the
  tiny Forge-Former (conf/surrogate/forgeformer.yaml, field set paper+window, the same folds as
  bench_window_surrogate.py) with and without the supernet score as a stacked input (a least-squares head on
  [encoder prediction, supernet score] fitted on each fold's validation carve, rows the encoder never trained on).

    nice -n 10 .venv/bin/python bench/bench_supernet.py train --steps 160 --n-random 2
    nice -n 10 .venv/bin/python bench/bench_supernet.py score --val-tokens 4096 --workers 2
    nice -n 10 .venv/bin/python bench/bench_supernet.py report --folds 5 --epochs 100 --workers 2
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "supernet.json"
CKPT = ROOT / "outputs" / "supernet" / "supernet-tiny"


def _labels():
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_window_surrogate import labels

    return labels()


def _protocol_corpus():
    from forge.labelling.corpus import build_corpus
    from forge.labelling.train import Protocol
    from surrogate.supernet_train import config_node

    pc = config_node("protocol", "cpu-proxy")
    pc.pop("_target_", None)
    return pc, Protocol.from_config(pc), config_node("corpus", "stdlib"), build_corpus(config_node("corpus", "stdlib"))


def label_cost() -> dict:
    """One label's CPU seconds as the shipped iha-tiny-swa labels record it (`cpu_s`: all threads of the labelling
    process, contention-free; same machine, protocol and corpus)."""
    from forge.runtime.config import data_dir

    rows = [json.loads(x) for x in (data_dir() / "labels" / "iha-tiny-swa-cpu-proxy.jsonl").read_text().splitlines()]
    cpu = np.array([r["provenance"]["cpu_s"] for r in rows if r["provenance"].get("cpu_s")])
    return {"source": "data/labels/iha-tiny-swa-cpu-proxy.jsonl provenance.cpu_s", "n": len(cpu),
            "mean_cpu_s": round(float(cpu.mean()), 2), "median_cpu_s": round(float(np.median(cpu)), 2)}


def train(steps: int, n_random: int, seed: int, ckpt: Path) -> dict:
    from forge.spaces.space import load_space
    from surrogate.supernet import SupernetPredictor, space_meta
    from surrogate.supernet_train import train_supernet

    import torch
    torch.set_num_threads(1)
    pc, p, cc, corpus = _protocol_corpus()
    res = {"label_cost": label_cost()}
    space = load_space("iha-tiny-swa")
    net, prov = train_supernet(space, p, corpus, steps, n_random, seed)
    res["training"] = prov
    res["label_equivalents_by_cpu"] = round(prov["cpu_s"] / res["label_cost"]["mean_cpu_s"], 2)
    SupernetPredictor(net, space_meta(space), pc, cc, meta={"training": prov}).save(ckpt)
    return res


def _score_part(ckpt: str, val_tokens: int, part: int, parts: int) -> tuple[int, list[float], float]:
    import torch

    from surrogate.loading import load_predictor

    torch.set_num_threads(1)
    p = load_predictor(ckpt)
    p.protocol["val_tokens"] = val_tokens
    g = _labels().genomes[part::parts]
    c0 = time.process_time()
    return part, p.scores(g).tolist(), time.process_time() - c0


def score(ckpt: Path, val_tokens: int, workers: int) -> dict:
    """Every real label's genome scored with inherited weights, rows dealt round-robin to `workers` processes."""
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp

    data = _labels()
    s, cpu = np.zeros(len(data)), 0.0
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        for part, vals, c in ex.map(_score_part, [str(ckpt)] * workers, [val_tokens] * workers, range(workers),
                                    [workers] * workers):
            s[part::workers], cpu = vals, cpu + c
    return {"scoring": {"n": len(data), "val_tokens": val_tokens, "cpu_s": round(cpu, 2),
                        "cpu_s_per_genome": round(cpu / len(data), 3)},
            "rows": {"ids": list(data.ids), "y": [round(float(v), 6) for v in data.y],
                     "score": [round(float(v), 6) for v in s]}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("view", choices=["train", "score", "report"])
    ap.add_argument("--val-tokens", type=int, default=16384)
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--n-random", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt", type=Path, default=CKPT)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.view == "train":
        res = train(a.steps, a.n_random, a.seed, a.ckpt)
    elif a.view == "score":
        res = score(a.ckpt, a.val_tokens, a.workers)
    else:
        from bench_supernet_report import report
        res = report(json.loads(OUT.read_text())["score"], a.folds, a.epochs, a.seed, a.workers)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    old = json.loads(OUT.read_text()) if OUT.is_file() else {}
    OUT.write_text(json.dumps(old | {a.view: res | {"settings": {k: str(v) for k, v in vars(a).items()}}}, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
