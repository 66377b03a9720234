"""Hydra launchers from PyPI really run a forge-search multirun (issue 22 §3).

`forge-search -m hydra/launcher=submitit_local seed=0,1` (hydra-submitit-launcher: each job is a submitit
subprocess, the local stand-in of `submitit_slurm`) and `hydra/launcher=ray` (hydra-ray-launcher: each job a
Ray task on a local cluster) with a tiny budget. Both are slow (a Ray or submitit start-up, ~40 s on 2 cores).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

TINY = ["search.pop_size=4", "search.offspring=4", "search.generations=1", "progress=false"]
LAUNCHERS = {
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", []),
    "ray": ("hydra_plugins.hydra_ray_launcher", ["+hydra.launcher.ray.init.num_cpus=2",
                                                 "+hydra.launcher.ray.init.include_dashboard=false"]),
}


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """One 2-seed multirun per launcher, run once for the module: {launcher: (sweep dir, output)}."""
    out = {}
    for name, (plugin, extra) in LAUNCHERS.items():
        pytest.importorskip(plugin)
        sweep = tmp_path_factory.mktemp(name)
        cmd = [str(Path(sys.executable).with_name("forge-search")), "-m", f"hydra/launcher={name}", "seed=0,1",
               *TINY, *extra, f"hydra.sweep.dir={sweep}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=sweep)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        out[name] = (sweep, p.stdout + p.stderr)
    return out


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_multirun_through_the_launcher_completes_both_seeds(sweeps, launcher):
    sweep, _ = sweeps[launcher]
    for i, seed in enumerate((0, 1)):
        summary = json.loads((sweep / str(i) / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["generations_done"] == 1
        assert yaml.safe_load((sweep / str(i) / "config.yaml").read_text())["seed"] == seed
    used = yaml.safe_load((sweep / "multirun.yaml").read_text())["hydra"]["launcher"]["_target_"]
    assert used.startswith(LAUNCHERS[launcher][0])


def test_the_jobs_ran_where_the_launcher_put_them(sweeps):
    sub, _ = sweeps["submitit_local"]
    assert len(list((sub / ".submitit").glob("*/*_result.pkl"))) == 2  # one submitit job per seed
    log = sweeps["submitit_local"][1]  # issue 56: the driver ends the sweep with its jobs and the report line
    assert "sweep: 2 jobs" in log and "forge-report runs=" in log
    _, log = sweeps["ray"]
    assert log.count("(_run_job pid=") >= 2  # output forwarded from Ray workers
    assert "\x1b[" not in log  # issue 56: without ANSI colour codes (RAY_COLOR_PREFIX=0), so a next: line pastes


def test_launchers_agree_with_each_other_seed_for_seed(sweeps):
    """One seed drives everything: the same seed gives the same front whichever launcher ran it."""
    def front(launcher, i):
        rows = (sweeps[launcher][0] / str(i) / "pareto.jsonl").read_text().splitlines()
        return sorted(json.loads(r)["id"] for r in rows)

    assert front("ray", 0) == front("submitit_local", 0) and front("ray", 1) == front("submitit_local", 1)
    assert front("ray", 0) != front("ray", 1)


def test_a_sweep_joins_a_running_ray_cluster(tmp_path):
    """`+hydra.launcher.ray.init.address=<a running cluster>`: the launcher's object-store size, which Ray
    refuses for a cluster it joins, is not sent (issue 54). The test starts and stops its own head node."""
    import os

    from tests.ray_head import ray_head

    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    with ray_head(tmp_path) as (address, env):
        cmd = [str(Path(sys.executable).with_name("forge-search")), "-m", "hydra/launcher=ray", "seed=0", *TINY,
               f"+hydra.launcher.ray.init.address={address}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=tmp_path, env={**os.environ, **env})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert json.loads((tmp_path / "sweep" / "0" / "summary.json").read_text())["status"] == "complete"
