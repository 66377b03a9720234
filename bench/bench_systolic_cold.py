"""Cold cost of one 40-layer genome per systolic template (empty caches, best of 3): wall and CPU seconds.

    .venv/bin/python bench/bench_systolic_cold.py <repo root> gemmini eyeriss flat dxe gemmini:llmforge

A name with `:llmforge` times that backend under `backend.conventions=llmforge`. `<repo root>` (code and conf/backend/*.yaml) lets the same script time an older checkout (a `git worktree`)
back to back with this one, so both see the same machine load.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path


def main(root: str, names: list[str]) -> None:
    sys.path.insert(0, root)
    import numpy as np
    import yaml

    from backends.registry import build_backend, resolve_workload
    from backends.systolic import clear_cache
    from forge.spaces.space import load_space

    sp = load_space("iha-paper")
    X = sp.sample_x(1, np.random.default_rng(1))
    X[:, 0::7] = 1  # every slot active
    X[:, 1::7] = 1  # every layer with attention
    one = sp.to_arrays(sp.repair_x(X))
    for label in names:
        name, _, conventions = label.partition(":")
        cfg = yaml.safe_load((Path(root) / "conf" / "backend" / f"{name}.yaml").read_text())
        b = build_backend({**cfg, "conventions": conventions or cfg.get("conventions", "physical")})
        wl = resolve_workload({"prefill": 256, "decode": 256, "batch": 1}, b)
        runs = []
        for _ in range(3):
            clear_cache()
            t, c = time.perf_counter(), time.process_time()
            b.evaluate(one, wl)
            runs.append((time.perf_counter() - t, time.process_time() - c))
        wall, cpu = min(runs)
        print(f"{label}: cold 40-layer genome {wall:.3f} s wall, {cpu:.3f} s CPU")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
