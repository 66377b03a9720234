"""Issue 55 §4: what the per-operator hook check (one meta-device forward pass per sampled genome) adds to the
parameter-count check, with tests/ext/genes.py's glu hooks registered, on 16 genomes of iha-paper (a search's
sample, search/build.py; the traffic of the first hooks.TRAFFIC). Ratio of the two, measured in one run after a
warm-up of each.

    nice -n 10 .venv/bin/python bench/bench_hook_check.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import tests.ext.genes  # noqa: F401 (the glu gene's two hooks: the check runs)
    from forge.lm import hooks
    from forge.lm.model import build_model
    from forge.lm.workload import analyze
    from forge.spaces.space import load_space

    gs = load_space("iha-paper").sample(hooks.SAMPLE, np.random.default_rng(0))

    def params_only() -> None:
        for g in gs:
            assert analyze(g)["params"] == build_model(g, device="meta").num_params()

    def full() -> None:
        hooks._AGREED.clear()  # each call checks afresh (a repeated call on the same genomes is free)
        hooks.check_agreement(gs)

    for fn in (params_only, full):
        fn()  # warm-up
    times = {}
    for name, fn in (("params", params_only), ("full", full)):
        t = time.perf_counter()
        for _ in range(3):
            fn()
        times[name] = (time.perf_counter() - t) / 3
    print(f"16 genomes (traffic of {hooks.TRAFFIC}): parameter check {times['params']:.3f} s, with per-operator traffic {times['full']:.3f} s, "
          f"ratio {times['full'] / times['params']:.2f}")


if __name__ == "__main__":
    main()
