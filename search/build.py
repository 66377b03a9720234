"""One place builds a search: the config settled once (`search.settings.settle_config`: defaults filled, ranges checked),
then the space and its hypervolume anchor, the backend and workload, the evaluator and co-evolution
(`search.components`), the pymoo problem and algorithm and the Pareto archive, handed to `Search` ready.

Building writes nothing and runs no evaluation (the anchor is scored when the run starts), so bad input is
refused before the run folder is touched; where plug-in hooks change the model, a sample of the space's genomes
is built (meta device) to check that the workload counts what the model holds (forge.lm.hooks.check_agreement).
`parts` injects ready-made parts by name: the Python API's objects, the tests' fakes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from forge.lm.hooks import SAMPLE, check_agreement
from forge.spaces.space import SearchSpace
from search.algorithms import make_algorithm
from search.archive import Anchor, ParetoArchive, default_anchor
from search.components import (backend_of, build_coevolution, build_evaluator, build_space, build_workload,
                               seed_genome)
from search.problem import ForgeProblem
from search.runner import Search
from search.settings import Plan, SearchSettings, settle_config
from forge.disk import run_folder

PARTS = ("space", "evaluator", "backend", "workload", "coevolution", "predictor")


def build_search(cfg: dict[str, Any], run_dir: str | Path, parts: Mapping[str, Any] | None = None) -> Search:
    """A ready `Search` in `run_dir` from a plain config (`forge.runtime.config.to_container` of Hydra's); `parts` may give
    any of PARTS (`predictor`: a surrogate object, fitted on evaluator.labels when it arrives unfitted)."""
    c, p, run_dir = settle_config(cfg), dict(parts or {}), Path(run_dir)
    unknown = sorted(set(p) - set(PARTS))
    if unknown:  # a caller's bug, never the user's input
        raise TypeError(f"build_search: unknown parts {unknown}; known: {', '.join(PARTS)}")
    s, hv = SearchSettings.of(c["search"]), c["hv"]
    space = p.get("space") or build_space(c)
    anchor = hv_anchor(hv["anchor"], space)  # resolved with the space (bad input fails here)
    check_agreement([anchor.genome, *space.sample(SAMPLE, np.random.default_rng(int(c.get("seed", 0))))])
    sampling = seed_genome(s.sampling, space) if isinstance(s.sampling, (str, type(None))) else None
    cost = build_cost(c, p)  # a refused backend is refused before the surrogate loads
    evaluator = p.get("evaluator") or build_evaluator(c, space, run_dir / run_folder.LABEL_DB, p.get("predictor"))
    if "coevolution" in p:
        coevo = p["coevolution"]
    else:  # none to build while the settled search.coevolve.every is 0
        coevo = build_coevolution(c, space, run_dir) if s.coevolve_every else None
    problem = build_problem(c, space, evaluator, cost)
    plan = Plan(generations=s.generations, seed=int(c.get("seed", 0)), algorithm=s.algorithm,
                hv_ref=float(hv["ref"]), anchor_values=dict(hv["anchor_values"] or {}),
                progress=bool(c.get("progress", False)))
    algo = make_algorithm(space, problem, s, plan.seed, sampling)
    return Search(run_dir, problem, algo, ParetoArchive(problem.objectives, problem.signs), anchor, cfg, plan, coevo)


def build_cost(c: Mapping[str, Any], parts: Mapping[str, Any]) -> tuple[Any, Any]:
    """The run's backend and workload from the settled config, or `parts`' ones (`forge-verify` builds its problem
    from these too)."""
    backend = parts.get("backend") or backend_of(c)
    return backend, parts.get("workload") or build_workload(c, backend)


def build_problem(c: Mapping[str, Any], space: SearchSpace, evaluator: Any, cost: tuple[Any, Any]) -> ForgeProblem:
    """The pymoo problem: the space scored by `evaluator` and `cost` (`build_cost`), under the config's objectives
    and constraints."""
    backend, workload = cost
    return ForgeProblem(space, evaluator, backend, workload, c["objectives"], c.get("constraints", []))


def hv_anchor(spec: Any, space: SearchSpace) -> Anchor:
    """`hv.anchor`: `auto` (the space's GPT-2-style stack, search.archive.default_anchor) or a genome file/name,
    with its codec row."""
    genome = default_anchor(space) if spec in (None, "auto") else seed_genome(spec, space)
    return Anchor(genome, space.encode([genome]))
