"""Figure: RESULTS.md "Issue 56: the run as an Optuna study" (CPU seconds of writing <run>/study.db).

    nice -n 10 .venv/bin/python bench/bench_optuna_study.py

Runs the main job (the default `forge-search`, in this process) and then writes its study from the run's files
(`search.optuna_study.for_run(run).sync()`, what `optuna_study=true` does generation by generation), timing both
in CPU seconds of this process (wall time on a shared box says more about the load), with the load average
beside them; the ratio is study / search. Checks the study's Pareto front is the run's.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_module


def main() -> None:
    from search.cli import run
    from search.optuna_study import for_run
    from search.state import read_jsonl

    load = os.getloadavg()[0]
    d = Path(tempfile.mkdtemp(prefix="forge-study-")) / "run"
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose("forge-search", overrides=["progress=false", f"out_dir={d}"])
    c0, w0 = time.process_time(), time.perf_counter()
    run(cfg)
    c1, w1 = time.process_time(), time.perf_counter()
    n = for_run(d).sync()
    c2, w2 = time.process_time(), time.perf_counter()
    import optuna

    st = optuna.load_study(study_name=d.name, storage=f"sqlite:///{d / 'study.db'}")
    same = {t.user_attrs["genome_id"] for t in st.best_trials} == {r["id"] for r in read_jsonl(d / "pareto.jsonl")}
    print(f"search: {c1 - c0:.2f} CPU-s ({w1 - w0:.1f} s wall); study of {n} trials: {c2 - c1:.2f} CPU-s "
          f"({w2 - w1:.1f} s wall, {1e3 * (c2 - c1) / n:.1f} ms a trial); ratio {(c2 - c1) / (c1 - c0):.1f}; "
          f"study front == run front: {same}; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
