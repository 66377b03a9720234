"""Figures: RESULTS.md "Global genes: codec cost" (the space's decode of encoded rows, before and after).

What the search does with each generation's rows (search/problem.py `metrics`): `values(X)`, then genomes and
the analyzer's arrays from those values, on the default main job's space (iha-paper, 48 rows per call, as
many distinct rows as a generation), from two trees in one run, interleaved:

    nice -n 10 .venv/bin/python bench/bench_codec.py --before f187dfb --rounds 5

- `before`: the tree at `--before` (the commit before global genes were registered), unpacked with `git archive`;
- `now`: this tree; `now-dmodel`: this tree on iha-paper with `d_model: [512, 768]` searched (one more column).
Each arm runs in its own process; figures are µs per decoded row (median over rounds). The decoded genomes'
ids of `before` and `now` are compared (they must be equal).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_main_job import ROOT, unpack  # noqa: E402

ARM = r"""
import hashlib, json, sys, time
import numpy as np
from forge.spaces.space import load_space, space_from_config
from forge.runtime.config import group_yaml
over = json.loads(sys.argv[1])
space = space_from_config({**group_yaml("space", "iha-paper"), **over}) if over else load_space("iha-paper")
rng = np.random.default_rng(0)
batches = [space.sample_x(48, rng) for _ in range(40)]
def one(X):
    v = space.values(X)
    return space.genomes_from_values(v), space.arrays_from_values(v)
one(batches[0])  # warm the slot cache as a running search has
t0 = time.perf_counter()
for X in batches:
    genomes, _ = one(X)
dt = time.perf_counter() - t0
ids = hashlib.sha256("".join(g.id for X in batches[:4] for g in one(X)[0]).encode()).hexdigest()[:16]
print(json.dumps({"us_per_row": dt / (40 * 48) * 1e6, "ids": ids}))
"""


def run_arm(tree: Path, over: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", ARM, json.dumps(over)], cwd=tree, env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="f187dfb")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        sha = unpack(args.before, Path(d))
        arms = {"before": (Path(d), {}), "now": (ROOT, {}), "now-dmodel": (ROOT, {"d_model": [512, 768]})}
        res: dict[str, list[dict]] = {k: [] for k in arms}
        for _ in range(args.rounds):
            for k, (tree, over) in arms.items():
                res[k].append(run_arm(tree, over))
    med = {k: statistics.median(r["us_per_row"] for r in v) for k, v in res.items()}
    same = res["before"][0]["ids"] == res["now"][0]["ids"]
    out = {"before": sha, "rounds": args.rounds, "us_per_row": med, "ids_equal": same,
           "ratio_now_to_before": med["now"] / med["before"], "ratio_dmodel_to_before": med["now-dmodel"] / med["before"]}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "codec.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
