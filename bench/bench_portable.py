"""Issue 33: how often the default main job's run files change under perturbed floats and other CPU kernels.

    python bench/bench_portable.py                          # r = 1e-12, 1e-9, 1e-7, 1e-6; 5 seeds each; kernels
    python bench/bench_portable.py --r 1e-12 --seeds 10 --no-kernels

For each relative perturbation r (`FORGE_PERTURB`, forge.numeric) and seed, the job's pareto/archive/history
JSONL are compared byte for byte with the unperturbed run's, and its Pareto ids as a set; then the job runs in
fresh processes under each kernel env of tests/search/problem/test_portable.py. Prints one line per case and a total.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge import numeric  # noqa: E402
from search.state import read_jsonl  # noqa: E402
from tests.search.problem.test_portable import MAIN_JOB, RUN_FILES, _run, _run_elsewhere, kernel_envs  # noqa: E402  (the job and envs the tests use)


def front_ids(out: Path) -> list[str]:
    return sorted(r["id"] for r in read_jsonl(out / "pareto.jsonl"))


def perturbed(tmp: Path, ref: dict[str, bytes], r: float, seeds: int) -> tuple[int, int]:
    """(byte-identical runs, runs with the same front ids) of `seeds` runs at relative perturbation r."""
    same = same_ids = 0
    os.environ[numeric.PERTURB_ENV] = repr(r)
    try:
        for s in range(1, seeds + 1):
            os.environ[numeric.PERTURB_SEED_ENV] = str(s)
            out = tmp / f"r{r:g}-s{s}"
            got = _run(out, MAIN_JOB)
            diff = [f for f in RUN_FILES if got[f] != ref[f]]
            same += not diff
            same_ids += front_ids(out) == front_ids(tmp / "ref")
            print(f"r={r:g} seed={s}: {'identical' if not diff else 'differs: ' + ', '.join(diff)}"
                  f"; front ids {'same' if front_ids(out) == front_ids(tmp / 'ref') else 'differ'}", flush=True)
    finally:
        os.environ.pop(numeric.PERTURB_ENV, None)
        os.environ.pop(numeric.PERTURB_SEED_ENV, None)
    return same, same_ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", type=float, nargs="+", default=[1e-12, 1e-9, 1e-7, 1e-6])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--no-kernels", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        ref = _run(tmp / "ref", MAIN_JOB)
        print(f"reference: {len(front_ids(tmp / 'ref'))} Pareto members ({time.perf_counter() - t0:.1f} s)")
        for r in args.r:
            same, same_ids = perturbed(tmp, ref, r, args.seeds)
            print(f"TOTAL r={r:g}: {same}/{args.seeds} byte-identical, {same_ids}/{args.seeds} same front ids", flush=True)
        if not args.no_kernels:
            envs = kernel_envs()
            same = 0
            for j, env in enumerate(envs):
                ok = _run_elsewhere(tmp / f"k{j}", MAIN_JOB, env) == ref
                same += ok
                print(f"{env}: {'identical' if ok else 'differs'}", flush=True)
            print(f"TOTAL kernels: {same}/{len(envs)} byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
