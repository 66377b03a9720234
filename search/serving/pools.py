"""Prefill/decode pool co-search (paper 003): NSGA-II over two Table I designs, memory-centric initialization
as a pymoo Sampling, and HV / ADRS against a brute-force front.

A system is 20 integers, the value index of every Table I field of the prefill then the decode pool.
Objectives (minimized) are serving time and cost, both divided by the baseline system's (Table III style).
The joint search (JointProblem) puts one more integer in front, an index into a list of candidate genomes,
and adds the genome's loss proxy as a third objective; samplers, operators and metrics are shared.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
from pymoo.core.sampling import Sampling
from pymoo.indicators.gd import GD
from pymoo.indicators.hv import HV
from pymoo.indicators.igd import IGD
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.repair.rounding import RoundingRepair
from pymoo.operators.sampling.rnd import IntegerRandomSampling
from pymoo.optimize import minimize
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from backends.serving.pool import PoolSpace, total_memory_gb
from backends.serving.system import ServingModel
from forge.numeric import round_float, round_sig, settle
from search.survival import StableRankAndCrowding


BIG = 1e6
SETTLED = ("serving_time_s", "rps", "ttft_mean_s", "tpot_mean_s", "cost_usd")  # a serving model's float columns


class PoolProblem(Problem):
    """Two pools over one space; F = (serving time, cost) / baseline's; infeasible systems get a violation."""

    def __init__(self, space: PoolSpace, model: ServingModel, base: tuple[float, float], lead_ub: tuple[int, ...] = ()) -> None:
        self.space, self.model, self.base, self.lead = space, model, base, len(lead_ub)
        ub = np.concatenate([np.asarray(lead_ub, dtype=np.int64), space.sizes - 1, space.sizes - 1])
        super().__init__(n_var=len(ub), n_obj=2 + self.lead, n_ieq_constr=1, xl=np.zeros(len(ub)), xu=ub.astype(float),
                         vtype=int)

    def systems(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(np.rint(X), dtype=np.int64)[:, self.lead:]
        k = len(self.space.sizes)
        return self.space.decode(X[:, :k]), self.space.decode(X[:, k:])

    def scaled(self, r: dict[str, Any]) -> np.ndarray:
        """(time, cost) / baseline's; infeasible rows get finite placeholders so sorting works (G marks them)."""
        return np.column_stack([np.where(r["feasible"], r["serving_time_s"] / self.base[0], BIG),
                                np.where(r["feasible"], r["cost_usd"] / self.base[1], BIG)])

    def objectives(self, X: np.ndarray) -> dict[str, np.ndarray]:
        r = settled(self.model.evaluate(*self.systems(X)))
        r["F"] = self.scaled(r)
        return r

    def _evaluate(self, X: np.ndarray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        r = self.objectives(X)
        out["F"], out["G"] = r["F"], np.where(r["feasible"], -1.0, 1.0)[:, None]


class JointProblem(PoolProblem):
    """(genome, prefill pool, decode pool): gene 0 indexes `models` (one ServingModel per candidate genome);
    F = (time, cost) / the reference genome's baseline, plus `loss[genome]` (lower is better)."""

    def __init__(self, space: PoolSpace, models: list[ServingModel], base: tuple[float, float], loss: np.ndarray) -> None:
        if len(models) != len(loss) or len(models) < 1:
            raise ValueError(f"joint search needs one loss per candidate genome (got {len(models)} models, {len(loss)} losses)")
        super().__init__(space, models[0], base, lead_ub=(len(models) - 1,))
        self.models, self.loss = models, round_sig(loss)

    def genome_index(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(np.rint(X), dtype=np.int64)[:, 0]

    def objectives(self, X: np.ndarray) -> dict[str, np.ndarray]:
        (pre, dec), g = self.systems(X), self.genome_index(X)
        r: dict[str, Any] = {"serving_time_s": np.full(len(g), np.inf), "cost_usd": np.zeros(len(g)),
                             "feasible": np.zeros(len(g), dtype=bool)}
        for j in np.unique(g):
            m = g == j
            rj = settled(self.models[j].evaluate(pre[m], dec[m]))
            for k in r:
                r[k][m] = rj[k]
        r["F"] = np.column_stack([self.scaled(r), np.where(r["feasible"], self.loss[g], BIG)])
        return r


class MemoryCentricSampling(Sampling):
    """Paper 003 Algorithm 1: split candidates into u percentile bins of total memory (Eq. 2) and take
    ⌊t/u⌋ (+1 for the first t mod u bins) from each. The full space has ~9·10^14 systems, so the candidates
    are `n_candidates` uniform draws (the whole space when it is smaller); inside a bin we draw uniformly
    (the paper names TED as one choice of this basic sampler)."""

    def __init__(self, u: int = 5, n_candidates: int = 20000) -> None:
        super().__init__()
        self.u, self.n_candidates = int(u), int(n_candidates)

    def _do(self, problem: PoolProblem, n_samples: int, random_state: Any = None, **kwargs: Any) -> np.ndarray:
        rng = random_state if random_state is not None else np.random.default_rng()
        cand = candidates(problem, self.n_candidates, rng)
        c = total_memory_gb(*problem.systems(cand))
        edges = np.percentile(c, 100 * np.arange(self.u + 1) / self.u)
        q, rem = divmod(n_samples, self.u)
        picks = []
        for j in range(self.u):
            last = j == self.u - 1
            group = np.flatnonzero((c >= edges[j]) & ((c <= edges[j + 1]) if last else (c < edges[j + 1])))
            want = q + (1 if j < rem else 0)
            if len(group):
                picks.extend(rng.choice(group, size=min(want, len(group)), replace=False).tolist())
        while len(picks) < n_samples:  # bins of tied memory can be short: top up uniformly
            picks.append(int(rng.integers(len(cand))))
        return cand[np.array(picks[:n_samples])].astype(float)


def candidates(problem: PoolProblem, n: int, rng: np.random.Generator) -> np.ndarray:
    total = int(np.prod(problem.xu.astype(np.int64) + 1))
    if total <= n:
        return enumerate_all(problem)
    return np.stack([rng.integers(0, int(u) + 1, n) for u in problem.xu], axis=1)


def enumerate_all(problem: PoolProblem) -> np.ndarray:
    """Every system of the space (for brute force on a reduced space)."""
    return np.array(list(itertools.product(*[range(int(u) + 1) for u in problem.xu])), dtype=np.int64)


def nsga(problem: PoolProblem, sampling: Sampling, pop: int, gens: int, seed: int) -> dict[str, Any]:
    """NSGA-II on integer indices (SBX/PM with rounding, pymoo's integer recipe); history of HV inputs kept."""
    algo = NSGA2(pop_size=pop, sampling=sampling, crossover=SBX(prob=0.9, eta=15, vtype=float, repair=RoundingRepair()),
                 mutation=PM(eta=20, vtype=float, repair=RoundingRepair()), eliminate_duplicates=True,
                 survival=StableRankAndCrowding())
    res = minimize(problem, algo, ("n_gen", gens), seed=seed, save_history=True, verbose=False)
    seen = np.vstack([h.pop.get("X") for h in res.history])
    fronts = [front_of(h.opt.get("F"), h.opt.get("G")) for h in res.history]
    return {"X": seen, "fronts": fronts, "evaluations": int(res.algorithm.evaluator.n_eval)}


def front_of(F: np.ndarray, G: np.ndarray | None = None) -> np.ndarray:
    F = np.asarray(F, dtype=float)
    if G is not None:
        F = F[np.asarray(G).reshape(len(F), -1)[:, 0] <= 0]
    if len(F) == 0:
        return F.reshape(0, F.shape[1])
    return np.unique(F[NonDominatedSorting().do(F, only_non_dominated_front=True)], axis=0)


def quality(front: np.ndarray, ref_point: np.ndarray, true_front: np.ndarray | None) -> dict[str, float]:
    """HV (pymoo) in baseline units; ADRS as paper 003 Eq. 13 (mean distance of found points to the true
    front, pymoo GD) and the reference-centric form (pymoo IGD), in log10 objective units."""
    out = {"hv": round_float(HV(ref_point=ref_point)(front)) if len(front) else 0.0}
    if true_front is not None and len(front):
        lt, lf = np.log10(true_front), np.log10(front)
        out["adrs"], out["igd"] = round_float(GD(lt)(lf)), round_float(IGD(lt)(lf))
    return out


def settled(r: dict[str, Any]) -> dict[str, Any]:
    """A serving model's result with its float columns rounded (forge.numeric): what every comparison sees."""
    return {k: settle(v) if k in SETTLED else v for k, v in r.items()}
