"""Pool co-search on the tiny space: brute force, NSGA-II's HV/ADRS against it, memory-centric sampling,
and forge-serve command=pools end to end (summary.json, plot, one-line errors)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

from backends.serving.pool import PoolError, PoolSpace, design, total_memory_gb
from backends.serving.system import ServingModel
from backends.serving.trace import TraceError, synthetic
from forge.cli import resolve_arch
from forge.runtime.config import conf_dir
from search.serving.cli import run
from search.serving.pools import MemoryCentricSampling, PoolProblem, enumerate_all, front_of, nsga, quality
from tests.search.serving.test_cli_afd import cfg


def load(group: str, name: str) -> dict:
    return yaml.safe_load((conf_dir() / "serve" / group / f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def problem():
    model = ServingModel(resolve_arch("smollm2-135m"), synthetic(load("trace", "small"), 0), load("cost", "n4-hbm3"))
    b = load("baseline", "h100-8gpu")
    r = model.evaluate(design(b["prefill"]), design(b["decode"]))
    return PoolProblem(PoolSpace.from_config(load("space", "tiny")), model, (r["serving_time_s"][0], r["cost_usd"][0]))


def test_brute_force_front_is_nondominated_and_hv_adrs_behave(problem):
    X = enumerate_all(problem)
    assert len(X) == 64
    r = problem.objectives(X)
    true = front_of(r["F"], np.where(r["feasible"], -1.0, 1.0))
    F = r["F"][r["feasible"]]
    for f in true:  # nothing in the space dominates a front point
        assert not np.any(np.all(F <= f, axis=1) & np.any(F < f, axis=1))
    ref = 1.1 * F.max(axis=0)
    q_true = quality(true, ref, true)
    assert q_true["adrs"] == pytest.approx(0) and q_true["igd"] == pytest.approx(0)
    worse = quality(true[:1] * 1.5, ref, true)
    assert worse["hv"] < q_true["hv"] and worse["adrs"] > 0 and worse["igd"] > 0


def test_nsga_reaches_the_brute_force_front_on_the_tiny_space(problem):
    X = enumerate_all(problem)
    r = problem.objectives(X)
    true = front_of(r["F"], np.where(r["feasible"], -1.0, 1.0))
    ref = 1.1 * r["F"][r["feasible"]].max(axis=0)
    res = nsga(problem, MemoryCentricSampling(u=5), pop=16, gens=6, seed=0)
    q = quality(res["fronts"][-1], ref, true)
    assert q["hv"] <= quality(true, ref, None)["hv"] + 1e-12
    assert q["hv"] >= 0.95 * quality(true, ref, None)["hv"] and q["adrs"] < 0.05


def test_memory_centric_sampling_covers_every_memory_bin(problem):
    S = MemoryCentricSampling(u=5, n_candidates=500)._do(problem, 10, random_state=np.random.default_rng(0))
    c = total_memory_gb(*problem.systems(S))
    allc = total_memory_gb(*problem.systems(enumerate_all(problem)))
    edges = np.percentile(allc, [0, 20, 40, 60, 80, 100])
    assert S.shape == (10, 20) and len(np.unique(np.digitize(c, edges[1:-1]))) >= 4


def test_pools_cli_writes_summary_and_plot(tmp_path):
    s = run(cfg("command=pools", "serve/space=tiny", "serve/trace=small", "serve.pools.pop_size=8",
                "serve.pools.generations=3", out=tmp_path))
    assert set(s["runs"]) == {"memory", "random"} and s["brute_force"]["front"]
    assert all(0 < r["hv"] <= s["brute_force"]["hv"] + 1e-9 and r["adrs"] >= 0 for r in s["runs"].values())
    assert (tmp_path / "summary.json").is_file() and (tmp_path / "pools.png").stat().st_size > 10_000


def test_bad_trace_and_pool_field(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("arrival_s,output_tokens\n0,4\n")
    with pytest.raises(TraceError, match="lacks columns prompt_tokens"):
        run(cfg("command=pools", "serve/space=tiny", f"trace={bad}", out=tmp_path))
    with pytest.raises(PoolError, match="pool field 'hbm_tb' is unknown"):
        run(cfg("command=pools", "serve/trace=small", "+serve.space.hbm_tb=[1]", out=tmp_path))


def test_cli_trace_error_is_one_line(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("time,prompt_tokens,output_tokens\n0,4,4\n")
    p = subprocess.run([sys.executable, "-m", "search.serving.cli", "pools", "serve/space=tiny", f"trace={bad}",
                        f"hydra.run.dir={tmp_path}"], capture_output=True, text=True)
    lines = [x for x in p.stderr.strip().splitlines() if x]
    assert p.returncode != 0 and len(lines) == 1 and "lacks columns arrival_s" in lines[0]


def test_space_that_cannot_hold_the_model_is_an_error(tmp_path):
    with pytest.raises(PoolError, match="no system found can serve llama-2-7b"):
        run(cfg("command=pools", "arch=llama-2-7b", "serve/space=tiny", "serve/trace=small", "serve.space.hbm_gb=[1]",
                "serve.space.devices=[1]", "serve.pools.pop_size=4", "serve.pools.generations=1", out=tmp_path))


def test_joint_genome_and_pools_search_is_seeded_and_keeps_several_genomes(tmp_path):
    archs = "archs=[smollm2-135m,smollm2-360m,qwen2.5-0.5b]"
    args = ("command=pools", archs, "serve/space=tiny", "serve/trace=small", "serve.pools.pop_size=8",
            "serve.pools.generations=3", "serve.pools.inits=[memory]")
    a, b = run(cfg(*args, out=tmp_path / "a")), run(cfg(*args, out=tmp_path / "b"))
    assert a["runs"]["memory"]["front"] == b["runs"]["memory"]["front"]  # one seed drives everything
    assert a["systems"] == 3 * 64 and a["joint"]["archs"] == ["smollm2-135m", "smollm2-360m", "qwen2.5-0.5b"]
    assert "params proxy" in a["joint"]["loss_objective"]
    # smallest model is fastest/cheapest, biggest has the lowest loss proxy: both ends are Pareto-optimal
    assert {"smollm2-135m", "qwen2.5-0.5b"} <= set(a["brute_force"]["front_archs"])
    r = a["runs"]["memory"]
    assert len(r["front_archs"]) >= 2 and 0 < r["hv"] <= a["brute_force"]["hv"] + 1e-9
    assert all(len(p) and "loss_proxy" in p for p in r["front"])


def test_joint_search_needs_two_archs(tmp_path):
    with pytest.raises(PoolError, match="at least two genomes"):
        run(cfg("command=pools", "archs=[smollm2-135m]", "serve/space=tiny", "serve/trace=small", out=tmp_path))
