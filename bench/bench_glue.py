"""Figures: RESULTS.md "Issue 26: glue cost" (the search loop's own CPU per evaluation, before and after).

The default main job (`forge-search`, today's predictor forgeformer-iha-paper, 40 generations, 1,944
evaluations) from two trees in one run, interleaved so machine load hits both alike:

    nice -n 10 .venv/bin/python bench/bench_glue.py --runs 3 [--before 37be8c6]

- `before`: the tree at `--before` (the commit before the gene registry), unpacked with `git archive`;
- `now`: this tree.
Glue = the loop's wall (summary `wall_s`) minus the surrogate's and the backend's own time (`phase_s`
eval.surrogate, eval.backend), per evaluation. Each run's pareto.jsonl, archive.jsonl and history.jsonl
are compared byte for byte with the first `before` run's. Writes bench/results/glue.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_main_job import EXE, ROOT, unpack  # noqa: E402

FILES = ("pareto.jsonl", "archive.jsonl", "history.jsonl")


def one_run(tree: Path) -> dict:
    """One main job from `tree`: glue per evaluation (ms), the phases, and a digest of the three run files."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([str(EXE), f"hydra.run.dir={d}", "progress=false", "evaluator.predictor=forgeformer-iha-paper",
                        "--json"], cwd=tree, env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        s = json.loads((Path(d) / "summary.json").read_text())
        digest = {f: hashlib.sha256((Path(d) / f).read_bytes()).hexdigest()[:16] for f in FILES}
        ckpt = (Path(d) / "state" / "checkpoint.json").stat().st_size
    ph, n = s["phase_s"], s["evaluations"]
    bare = ph.get("eval.surrogate", 0.0) + ph.get("eval.backend", 0.0)
    return {"process_wall_s": wall, "loop_wall_s": s["wall_s"], "evaluations": n, "bare_s": bare,
            "glue_ms_per_eval": 1e3 * (s["wall_s"] - bare) / n, "bare_ms_per_eval": 1e3 * bare / n,
            "hypervolume": s["hypervolume"], "phase_s": ph, "checkpoint_bytes": ckpt, "digest": digest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default="37be8c6", help="git ref of the tree before the gene registry")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "glue.json"))
    a = ap.parse_args()
    arms: dict[str, list[dict]] = {"before": [], "now": []}
    with tempfile.TemporaryDirectory() as tmp:
        sha = unpack(a.before, Path(tmp))
        for i in range(a.runs):
            for name, tree in (("before", Path(tmp)), ("now", ROOT)):
                arms[name].append(one_run(tree))
                r = arms[name][-1]
                print(f"run {i} {name}: glue {r['glue_ms_per_eval']:.3f} ms/eval, bare {r['bare_ms_per_eval']:.3f}",
                      file=sys.stderr)
    ref = arms["before"][0]["digest"]
    med = {k: statistics.median(r["glue_ms_per_eval"] for r in v) for k, v in arms.items()}
    bare = {k: statistics.median(r["bare_ms_per_eval"] for r in v) for k, v in arms.items()}
    res = {"command": f"nice -n 10 .venv/bin/python bench/bench_glue.py --runs {a.runs} --before {a.before}",
           "before_commit": sha, "median_glue_ms_per_eval": med, "median_bare_ms_per_eval": bare,
           "ratio_glue_now_to_before": med["now"] / med["before"],
           "identical_outputs": all(r["digest"] == ref for v in arms.values() for r in v),
           "checkpoint_bytes": {k: v[0]["checkpoint_bytes"] for k, v in arms.items()}, "runs": arms}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("median_glue_ms_per_eval", "median_bare_ms_per_eval",
                                          "ratio_glue_now_to_before", "identical_outputs", "checkpoint_bytes")},
                     indent=2))


if __name__ == "__main__":
    main()
