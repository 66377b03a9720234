"""Figures: README "Real training" (cpu-proxy budget, Spearman 0.947) and RESULTS.md Issue 6.

cpu-proxy budget by self-consistency, and throughput.

Trains the same random sample of iha-tiny genomes at several token budgets (seed fixed) and reports
the Spearman rank correlation of labels between consecutive budgets (B vs 2B), plus tokens/s and wall
time per label. Results go to bench/results/train_selfconsistency.json (rewritten after each label).

    nice -n 10 .venv/bin/python bench/bench_train.py --n 16 --budgets 32768 65536 131072
    .venv/bin/python bench/bench_train.py --labels data/labels/iha-tiny-cpu-proxy.jsonl   # throughput of shipped labels
"""
from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.stats import spearmanr

from forge.labelling.corpus import stdlib_corpus
from forge.disk.io import atomic_write_json
from forge.spaces.space import load_space
from forge.labelling.train import Protocol, train_genome


def summarize(rows: dict, budgets: list[int]) -> dict:
    out = {}
    for a, b in zip(budgets, budgets[1:]):
        ids = [i for i in rows if str(a) in rows[i] and str(b) in rows[i]
               and np.isfinite(rows[i][str(a)]["label"]) and np.isfinite(rows[i][str(b)]["label"])]
        if len(ids) >= 3:
            rho = spearmanr([rows[i][str(a)]["label"] for i in ids], [rows[i][str(b)]["label"] for i in ids])[0]
            out[f"{a}->{b}"] = {"spearman": round(float(rho), 3), "n": len(ids)}
    for B in budgets:
        r = [rows[i][str(B)] for i in rows if str(B) in rows[i]]
        if r:
            out[f"budget_{B}"] = {"n": len(r), "median_wall_s": float(np.median([x["wall_s"] for x in r])),
                                  "median_tokens_per_s": float(np.median([x["tokens_per_s"] for x in r])),
                                  "mean_label": float(np.mean([x["label"] for x in r]))}
    return out


def label_throughput(path: str) -> dict:
    """Cost of shipped labels from their provenance: CPU seconds (contention-free), wall, tokens/s."""
    from forge.genomes.labels import read_labels

    labs = list(read_labels(path))
    fin = [lab for lab in labs if lab.finite]
    cpu = [lab.provenance["cpu_s"] for lab in fin if "cpu_s" in lab.provenance]
    med = lambda k: float(np.median([lab.provenance[k] for lab in fin]))  # noqa: E731
    return {"labels": len(labs), "finite": len(fin), "median_tokens": med("tokens"), "median_wall_s": med("wall_s"),
            "median_tokens_per_s": med("tokens_per_s"), "n_with_cpu_s": len(cpu),
            "median_cpu_s": float(np.median(cpu)) if cpu else None,
            "p90_cpu_s": float(np.percentile(cpu, 90)) if cpu else None,
            "labels_per_core_minute": 60.0 / float(np.median(cpu)) if cpu else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", default=None, help="only summarize the throughput of a label JSONL file")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budgets", type=int, nargs="+", default=[32768, 65536, 131072])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--out", default="bench/results/train_selfconsistency.json")
    a = ap.parse_args()
    if a.labels:
        print(json.dumps(label_throughput(a.labels), indent=1))
        return
    space, corpus = load_space("iha-tiny"), stdlib_corpus()
    genomes = space.sample(a.n, np.random.default_rng(a.seed))
    rows: dict = {}
    for g in genomes:
        rows[g.id] = {}
        for B in a.budgets:
            p = Protocol(tokens=B, batch=a.batch, lr=2e-3, warmup_steps=10, schedule="cosine", val_tokens=16384,
                         threads=1, seed=0)
            lab = train_genome(g, p, corpus)
            rows[g.id][str(B)] = {"label": lab.label, "wall_s": lab.provenance["wall_s"],
                                  "tokens_per_s": lab.provenance["tokens_per_s"], "params": lab.provenance["params"]}
            atomic_write_json(a.out, {"args": vars(a), "rows": rows, "summary": summarize(rows, a.budgets)})
        print(g.id, rows[g.id], flush=True)
    print(json.dumps(summarize(rows, a.budgets), indent=1))


if __name__ == "__main__":
    main()
