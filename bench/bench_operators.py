"""Issue 53 §1: the search's operators at equal evaluations, through one code path.

Every arm runs on the default job's own problem, built by `search.build.build_search` (the same space, surrogate,
backend, workload, objectives, constraints, HV anchor and reference), each evaluated batch merged into the same
`ParetoArchive`, the hypervolume taken by the run's own `Hypervolume`. The pymoo arms differ only in
`search.crossover` / `search.mutation` (operator plug-ins, conf/search/<kind>/), built by `make_algorithm` into the
same NSGA-II (binary tournament, stable rank-and-crowding survival, de-duplication by genome id, the space's repair);
`random` is `search.algorithm=random`; `optuna` is Optuna's NSGAIISampler (population 48, constraints given) asking
for each gene's grid index, the space's repair applied before evaluation. Budgets count evaluations (the last batch
is cut to the budget): 1,944 = 24 + 40 x 48 (the default job) and 19,416 = 24 + 404 x 48.

    nice -n 10 .venv/bin/python bench/bench_operators.py run --budget 1944 --seeds 10 --workers 2
    nice -n 10 .venv/bin/python bench/bench_operators.py run --budget 19416 --seeds 10 --arms stock,llmforge,mixed
    .venv/bin/python bench/bench_operators.py table        # arms x targets x budgets: HV, 95% bootstrap, paired wins

Rows land in bench/results/operators.jsonl as each run ends (a rerun skips what is there); `table` writes
bench/results/operators.md. BLAS and torch at one thread, as forge-search runs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "results" / "operators.jsonl"
TARGETS = {"roofline": [], "systolic": ["backend=gemmini"], "rdxe": ["backend=rdxe", "workload=rdxe-search"]}
LAYERX = {"_target_": "search.operators.LayerCrossover", "prob": 0.6}
LLMF = {"_target_": "search.operators.LayerMutation", "rate": 0.3}
SBX = "sbx"
PM = "pm"


def _mixed(**p: float) -> dict[str, Any]:
    base = {"p_delete": 0.0, "p_duplicate": 0.0, "p_rotate": 0.0, "p_perturb": 0.0}
    return {"_target_": "search.operators_mix.MixedMutation", **base, **p}


def _alone(op: str) -> dict[str, Any]:
    """The paper's mutation with only one of its four operators on (numeric perturbation: p_gene)."""
    on = {"p_delete": 0.0, "p_duplicate": 0.0, "p_rotate": 0.0, "p_gene": 0.0}
    return {**LLMF, **on, op: 1.0 if op != "p_gene" else 0.1}


# arm -> search.* overrides (crossover, mutation, algorithm), or "optuna"
ARMS: dict[str, Any] = {
    "llmforge": {"crossover": LAYERX, "mutation": "llmforge"},  # the paper's operators (the default before issue 53)
    "stock": {"crossover": SBX, "mutation": PM},  # pymoo's integer recipe, the space's repair
    "random": {"algorithm": "random"},
    "optuna": "optuna",
    # each of Forge's operators alone (layer crossover + one mutation operator), and mixed with the stock ones
    "layerx+delete": {"crossover": LAYERX, "mutation": _alone("p_delete")},
    "layerx+duplicate": {"crossover": LAYERX, "mutation": _alone("p_duplicate")},
    "layerx+rotate": {"crossover": LAYERX, "mutation": _alone("p_rotate")},
    "layerx+perturb": {"crossover": LAYERX, "mutation": _alone("p_gene")},
    "layerx+pm": {"crossover": {**LAYERX, "prob": 0.9}, "mutation": PM},
    "sbx+llmforge": {"crossover": SBX, "mutation": "llmforge"},
    "stock+delete": {"crossover": SBX, "mutation": _mixed(p_delete=0.3)},
    "stock+duplicate": {"crossover": SBX, "mutation": _mixed(p_duplicate=0.3)},
    "stock+rotate": {"crossover": SBX, "mutation": _mixed(p_rotate=0.3)},
    "stock+perturb": {"crossover": SBX, "mutation": _mixed(p_perturb=0.3)},
    # candidates for the default: the structural operators at a low rate over the stock recipe, aligned crossover
    "mixed": {"crossover": SBX, "mutation": "mixed"},
    "aligned+pm": {"crossover": "aligned", "mutation": PM},
    "aligned+mixed": {"crossover": "aligned", "mutation": "mixed"},
}
DEFAULT = "sbx+llmforge"  # the shipped default's arm (conf/search/nsga.yaml)
_PARTS: dict[str, dict[str, Any]] = {}  # per worker process: target -> evaluator, backend, workload (built once)


def _config(target: str, seed: int, arm: Any) -> dict[str, Any]:
    from hydra import compose, initialize_config_module

    from forge.runtime.config import to_container

    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = to_container(compose("forge-search", overrides=[*TARGETS[target], f"seed={seed}", "progress=false"]))
    cfg["search"].update(arm if isinstance(arm, dict) else {})
    return cfg


def _search(target: str, seed: int, arm: Any, run_dir: Path) -> Any:
    from search.build import build_search, build_cost
    from search.components import build_evaluator, build_space
    from search.settings import settle_config

    cfg = _config(target, seed, arm)
    if target not in _PARTS:
        c = settle_config(cfg)
        backend, workload = build_cost(c, {})
        _PARTS[target] = {"evaluator": build_evaluator(c, build_space(c)), "backend": backend, "workload": workload}
    return build_search(cfg, run_dir, _PARTS[target])


def _evaluate(search: Any, X: Any) -> tuple[Any, Any, Any]:
    """F, G, feasibility of rows, through the run's problem (counted against the budget)."""
    import numpy as np

    out = search.problem.evaluate(X, return_as_dictionary=True)
    F, G = out["F"], out["G"]
    return F, G, np.all(G <= 0, axis=1)


def _merge(search: Any, X: Any, F: Any, feas: Any) -> None:
    ids = search.problem.ids(X)
    search.archive.update([{"id": ids[j]} for j in range(len(X)) if feas[j]], F[feas])


def run_pymoo(search: Any, budget: int) -> None:
    algo, problem = search.algo, search.problem
    while problem.n_evaluated < budget:
        off = algo.ask()
        off = off[: budget - problem.n_evaluated]
        if len(off) == 0:  # every child a duplicate after pymoo's 100 matings: the arm is stuck
            break
        algo.evaluator.eval(problem, off, algorithm=algo)
        algo.tell(infills=off)
        X = off.get("X")
        _merge(search, X, off.get("F"), off.get("feas").reshape(-1))


def run_optuna(search: Any, budget: int, seed: int) -> None:
    import numpy as np
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    problem, space = search.problem, search.space
    xl, xu = problem.bounds()
    sampler = optuna.samplers.NSGAIISampler(population_size=48, seed=seed)
    study = optuna.create_study(directions=["minimize"] * problem.n_obj, sampler=sampler)
    while problem.n_evaluated < budget:
        trials = [study.ask() for _ in range(min(48, budget - problem.n_evaluated))]
        X = np.array([[t.suggest_int(f"x{j}", int(xl[j]), int(xu[j])) for j in range(problem.n_var)]
                      for t in trials], dtype=np.int64)
        X = space.repair_x(X)
        F, G, feas = _evaluate(search, X)
        for t, f, g in zip(trials, F, G):
            for j, v in enumerate(g):  # <= 0: satisfied (Optuna 5's constraint API)
                t.set_constraint(f"g{j}", float(v))
            study.tell(t, [float(v) for v in f])
        _merge(search, X, F, feas)


def one(target: str, arm: str, seed: int, budget: int) -> dict[str, Any]:
    """One run: the arm's search from the default job's problem, to `budget` evaluations; its HV."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    spec = ARMS[arm]
    with tempfile.TemporaryDirectory() as d:
        search = _search(target, seed, spec if spec != "optuna" else {}, Path(d) / "run")
        search.hypervolumes()  # the anchor, scored before the clock starts (not an evaluation)
        t0 = time.process_time()
        if spec == "optuna":
            run_optuna(search, budget, seed)
        else:
            run_pymoo(search, budget)
        cpu = time.process_time() - t0
        return {"target": target, "arm": arm, "seed": seed, "budget": budget, "hv": float(search.hv(search.archive.F)),
                "evaluations": int(search.problem.n_evaluated), "front": len(search.archive), "cpu_s": round(cpu, 3)}


def _done() -> set[tuple]:
    if not OUT.is_file():
        return set()
    rows = [json.loads(x) for x in OUT.read_text().splitlines() if x.strip()]
    return {(r["target"], r["arm"], r["seed"], r["budget"]) for r in rows}


def cmd_run(a: argparse.Namespace) -> None:
    arms = a.arms.split(",") if a.arms else list(ARMS)
    targets = a.targets.split(",") if a.targets else list(TARGETS)
    if "optuna" in arms:
        try:
            import optuna  # noqa: F401
        except ImportError:
            print("optuna is not installed (pip install optuna): its arm is left out", file=sys.stderr)
            arms.remove("optuna")
    done = _done()
    jobs = [(t, arm, s, a.budget) for arm in ("pymoo", "optuna") for s in range(a.first_seed, a.seeds) for t in targets
            for arm in [x for x in arms if (x == "optuna") == (arm == "optuna")]  # Optuna's slow runs last
            if (t, arm, s, a.budget) not in done]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(a.workers) as pool:
        futs = [pool.submit(one, *j) for j in jobs]
        for f in as_completed(futs):
            try:
                row = f.result()
            except Exception as e:  # noqa: BLE001  (a failing arm is reported, the others go on)
                print(f"failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                continue
            with OUT.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


def _boot(x: Any, rng: Any, n: int = 2000) -> tuple[float, float]:
    import numpy as np

    m = rng.choice(x, size=(n, len(x)), replace=True).mean(axis=1)
    return float(np.percentile(m, 2.5)), float(np.percentile(m, 97.5))


def _wins(a: Any, b: Any, rng: Any, n: int = 2000) -> tuple[float, float, float]:
    """Paired win rate of a over b (ties count half), with a 95% bootstrap interval over seeds."""
    import numpy as np

    w = (a > b) + 0.5 * (a == b)
    idx = rng.integers(0, len(w), size=(n, len(w)))
    m = w[idx].mean(axis=1)
    return float(w.mean()), float(np.percentile(m, 2.5)), float(np.percentile(m, 97.5))


def cmd_table(a: argparse.Namespace) -> None:
    """Per budget and target, each arm's HV (mean, 95% bootstrap interval over seeds) and its paired win rate
    (same seed) against stock pymoo, against Optuna and against the default, with their 95% bootstrap intervals."""
    import numpy as np

    rows = [json.loads(x) for x in OUT.read_text().splitlines() if x.strip()]
    rng = np.random.default_rng(0)
    lines = ["| budget | target | arm | seeds | HV mean | 95% CI | wins vs stock [95% CI] | wins vs optuna [95% CI] "
             f"| wins vs the default ({DEFAULT}) | CPU ms/eval |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for budget in sorted({r["budget"] for r in rows}):
        for t in TARGETS:
            by: dict[str, dict[int, dict]] = {}
            for r in rows:
                if r["budget"] == budget and r["target"] == t:
                    by.setdefault(r["arm"], {})[r["seed"]] = r
            for arm in sorted(by, key=lambda k: -np.mean([r["hv"] for r in by[k].values()])):
                hv = np.array([r["hv"] for r in by[arm].values()])
                lo, hi = _boot(hv, rng)
                vs = []
                for other in ("stock", "optuna", DEFAULT):
                    seeds = sorted(set(by[arm]) & set(by.get(other, {})))
                    if not seeds or other == arm:
                        vs.append("")
                        continue
                    w, wl, wh = _wins(*(np.array([by[k][s]["hv"] for s in seeds]) for k in (arm, other)), rng)
                    vs.append(f"{w:.2f} [{wl:.2f}, {wh:.2f}] (n={len(seeds)})")
                ms = 1000 * sum(r["cpu_s"] for r in by[arm].values()) / sum(r["evaluations"] for r in by[arm].values())
                lines.append(f"| {budget:,} | {t} | {arm} | {len(hv)} | {hv.mean():.4f} | [{lo:.4f}, {hi:.4f}] | "
                             f"{vs[0]} | {vs[1]} | {vs[2]} | {ms:.2f} |")
    text = "\n".join(lines) + "\n"
    (OUT.parent / "operators.md").write_text(text)
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--budget", type=int, default=1944)
    r.add_argument("--seeds", type=int, default=10)
    r.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. seeds-1 (split one cell over runs)")
    r.add_argument("--arms", default="")
    r.add_argument("--targets", default="")
    r.add_argument("--workers", type=int, default=2)
    sub.add_parser("table")
    a = ap.parse_args()
    cmd_run(a) if a.cmd == "run" else cmd_table(a)


if __name__ == "__main__":
    main()
