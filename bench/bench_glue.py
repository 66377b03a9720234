"""Figures: RESULTS.md "Issue 26: glue cost" (the search loop's own CPU per evaluation, before and after).

The default main job (`forge-search`, today's predictor forgeformer-iha-paper, 40 generations, 1,944
evaluations) from two trees in one run, interleaved so machine load hits both alike:

    nice -n 10 .venv/bin/python bench/bench_glue.py --runs 3 [--before 37be8c6] [--same-as REF]

- `before`: the tree at `--before` (the commit before the gene registry), unpacked with `git archive`;
- `now`: this tree.
Glue = the loop's wall (summary `wall_s`) minus the surrogate's and the backend's own time (`phase_s`
eval.surrogate, eval.backend), per evaluation. Each run's pareto.jsonl, archive.jsonl and history.jsonl are
compared byte for byte with the first `before` run's (`identical_outputs`) and, with `--same-as REF`, with one
run of the tree at REF (`identical_to_same_as`: a refactor of the loop changes no byte). Since 47f9d67
re-calibrated the shipped surrogate's conformal intervals, `before` rows differ from today's in `loss_lo` and
`loss_hi` only: `identical_but_interval` compares the files with those two fields dropped. Writes
bench/results/glue.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_main_job import EXE, ROOT, unpack  # noqa: E402

FILES = ("pareto.jsonl", "archive.jsonl", "history.jsonl")
INTERVAL = ("loss_lo", "loss_hi")  # re-calibrated in the shipped sidecar by 47f9d67 (data, not the loop)


def _digest(path: Path, drop_interval: bool = False) -> str:
    """sha256 of a run file, or of its rows with the loss interval dropped from their metrics."""
    data = path.read_bytes()
    if drop_interval:
        rows = [json.loads(line) for line in data.decode().splitlines()]
        for r in rows:
            for k in INTERVAL:
                r.get("metrics", {}).pop(k, None)
        data = json.dumps(rows, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def one_run(tree: Path) -> dict:
    """One main job from `tree`: glue per evaluation (ms), the phases, and a digest of the three run files."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([str(EXE), f"hydra.run.dir={d}", "progress=false", "evaluator.predictor=forgeformer-iha-paper",
                        "--json"], cwd=tree, env=env, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        s = json.loads((Path(d) / "summary.json").read_text())
        digest = {f: _digest(Path(d) / f) for f in FILES}
        loose = {f: _digest(Path(d) / f, drop_interval=True) for f in FILES}
        ckpt = (Path(d) / "state" / "checkpoint.json").stat().st_size
    ph, n = s["phase_s"], s["evaluations"]
    bare = ph.get("eval.surrogate", 0.0) + ph.get("eval.backend", 0.0)
    return {"process_wall_s": wall, "loop_wall_s": s["wall_s"], "evaluations": n, "bare_s": bare,
            "glue_ms_per_eval": 1e3 * (s["wall_s"] - bare) / n, "bare_ms_per_eval": 1e3 * bare / n,
            "hypervolume": s["hypervolume"], "phase_s": ph, "checkpoint_bytes": ckpt, "digest": digest,
            "digest_but_interval": loose}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default="37be8c6", help="git ref of the tree before the gene registry")
    ap.add_argument("--same-as", default=None, help="git ref whose outputs this tree must reproduce byte for byte")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "glue.json"))
    a = ap.parse_args()
    arms: dict[str, list[dict]] = {"before": [], "now": []}
    same = None
    with tempfile.TemporaryDirectory() as tmp:
        if a.same_as:
            (Path(tmp) / "ref").mkdir()
            unpack(a.same_as, Path(tmp) / "ref")
            same = one_run(Path(tmp) / "ref")
            print(f"same-as {a.same_as}: glue {same['glue_ms_per_eval']:.3f} ms/eval", file=sys.stderr)
            shutil.rmtree(Path(tmp) / "ref")
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
    same_arg = f" --same-as {a.same_as}" if a.same_as else ""
    res = {"command": f"nice -n 10 .venv/bin/python bench/bench_glue.py --runs {a.runs} --before {a.before}{same_arg}",
           "before_commit": sha, "median_glue_ms_per_eval": med, "median_bare_ms_per_eval": bare,
           "ratio_glue_now_to_before": med["now"] / med["before"],
           "pair_ratios": [n["glue_ms_per_eval"] / b["glue_ms_per_eval"] for b, n in zip(arms["before"], arms["now"])],
           "identical_outputs": all(r["digest"] == ref for v in arms.values() for r in v),
           "identical_but_interval": all(r["digest_but_interval"] == arms["before"][0]["digest_but_interval"]
                                         for v in arms.values() for r in v),
           "identical_within_arms": all(r["digest"] == v[0]["digest"] for v in arms.values() for r in v),
           "same_as": a.same_as, "same_as_run": same,
           "identical_to_same_as": None if same is None else all(r["digest"] == same["digest"] for r in arms["now"]),
           "checkpoint_bytes": {k: v[0]["checkpoint_bytes"] for k, v in arms.items()}, "runs": arms}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("median_glue_ms_per_eval", "median_bare_ms_per_eval",
                                          "ratio_glue_now_to_before", "identical_outputs", "identical_but_interval",
                                          "identical_within_arms", "identical_to_same_as", "checkpoint_bytes")},
                     indent=2))


if __name__ == "__main__":
    main()
