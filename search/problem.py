"""The pymoo problem: decode offspring, evaluate loss (surrogate or real training) and hardware cost.

`_evaluate` is vectorized over the whole offspring batch (LLMForge Algorithm 3, line 13): one
predictor call and one backend call per generation. Every result is cached by genome id (the loss
also by surrogate version, since co-evolution hot-swaps the predictor). Objectives and constraints
are named; a name is the loss, a model total from `forge.workload.model_totals`, a core backend
metric or any numeric backend extra. Constraints are strings such as `val_loss < 3.8` or
`ttft_ms <= 20`; hardware-infeasible genomes get one extra violated constraint and are dominated out.
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Callable, Sequence

import numpy as np
from pymoo.core.duplicate import DuplicateElimination
from pymoo.core.problem import Problem

from backends.interface import Backend, CostTable, Workload
from forge.genome import Genome
from forge.precision import QuantPenalty
from forge.space import SearchSpace
from forge.workload import model_totals

LOSS = "val_loss"
MODEL_METRICS = ("params", "non_embedding_params", "kv_bytes_per_token", "flops_per_token",
                 "n_active_layers", "n_attn_layers")
CORE_COST = ("ttft_ms", "tpot_ms", "energy_per_token_uj")
DESIGN_KEYS = ("shape", "precision", "batch")  # backend extras recorded with each Pareto row (as text)
BIG_F, BIG_G = 1e12, 1e9  # finite stand-ins for inf (pymoo's sorting and crowding need finite numbers)


class SearchConfigError(ValueError):
    """Bad search configuration; the message names the key and what is allowed."""


@dataclass(frozen=True)
class Constraint:
    """`name op bound`, with op in <, <=, >, >=; g ≤ 0 means satisfied (pymoo convention)."""

    name: str
    op: str
    bound: float

    def g(self, values: np.ndarray) -> np.ndarray:
        return values - self.bound if self.op in ("<", "<=") else self.bound - values

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    m = re.fullmatch(r"\s*([A-Za-z_][\w.]*)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*", str(text))
    if not m:
        raise SearchConfigError(f"constraint {text!r} is invalid; allowed: '<metric> <|<=|>|>= <number>', "
                                f"e.g. 'val_loss < 3.8' or 'ttft_ms <= 20'")
    return Constraint(m.group(1), m.group(2), float(m.group(3)))


def strip_precision(genomes: Sequence[Genome]) -> list[Genome]:
    """The architectures the loss model sees (precision genes removed)."""
    return [g.with_precision(None) if g.precision is not None else g for g in genomes]


class LossEvaluator:
    """Surrogate mode: loss = μ − β·σ from a Predictor (σ from n_mc MC-dropout passes; 0 = deterministic; with a
    calibrated interval σ is its lower tail, see `optimism`), and a calibrated interval [lo, hi] around μ at
    `level` (the predictor's `interval`; NaN without one).

    The surrogate sees each genome's architecture only (precision genes stripped, so shipped checkpoints
    predict exactly as before); μ then gains the quantization penalty of the genome's (W, A, KV) formats,
    a separate model (`forge.precision.QuantPenalty`, evaluator.quant_penalty) that a measured table replaces."""

    kind = "surrogate"

    def __init__(self, predictor: Any, beta: float = 0.0, n_mc: int = 0, seed: int = 0,
                 penalty: QuantPenalty | None = None, level: float = 0.9):
        if beta and not n_mc:
            raise SearchConfigError("evaluator.beta > 0 needs evaluator.n_mc > 0 (σ comes from MC dropout)")
        if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
            raise SearchConfigError(f"evaluator.interval_level = {level!r}; allowed: a number with 0 < level < 1")
        self.predictor, self.beta, self.n_mc, self.seed = predictor, float(beta), int(n_mc), int(seed)
        self.penalty, self.level = penalty or QuantPenalty(), float(level)
        self.version = 0  # bumped by every co-evolution hot-swap

    def interval(self, mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The predictor's calibrated (lo, hi) around μ (which includes any quantization penalty: the
        interval covers the surrogate's error only); NaN when the predictor has no calibration."""
        if not hasattr(self.predictor, "interval"):
            nan = np.full(len(mu), np.nan)
            return nan, nan.copy()
        lo, hi = self.predictor.interval(np.asarray(mu, float), np.asarray(sigma, float), self.level)
        return np.asarray(lo, float), np.asarray(hi, float)

    def interval_info(self) -> dict[str, Any]:
        """{level, method, source} for summary.json and the export card."""
        info = getattr(self.predictor, "interval_info", None)
        got = info(self.n_mc > 0) if info else {"method": "none", "source": "the predictor has no interval"}
        cal_mc = got["source"].get("n_mc") if isinstance(got.get("source"), dict) else None
        if got.get("method") == "conformal-sigma" and cal_mc not in (None, self.n_mc):
            got["note"] = (f"σ scores were calibrated with n_mc={cal_mc} passes, this search uses {self.n_mc}: "
                           "σ from a different pass count may be scaled differently")
        return {"level": self.level, **got}

    def swap(self, predictor: Any) -> None:
        self.predictor, self.version = predictor, self.version + 1

    def optimism(self, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """The σ that `beta` multiplies: with a calibrated interval, the calibrated lower tail in σ units,
        (μ − lo) / z (z the two-sided Gaussian quantile of `level`, so beta = z reaches the calibrated lower
        bound); raw MC-dropout σ only when the predictor has no calibration."""
        lo, _ = self.interval(mu, sigma)
        if not np.all(np.isfinite(lo)):
            return sigma
        return np.maximum(mu - lo, 0.0) / NormalDist().inv_cdf(0.5 + self.level / 2.0)

    def __call__(self, genomes: Sequence[Genome]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        _seed_torch(self.seed + 7919 * self.version)
        arch = strip_precision(genomes)
        mu, sigma = self.predictor.predict(arch, n_mc=self.n_mc)
        mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
        if any(g.precision is not None for g in genomes):
            mu = mu + np.array([self.penalty(g.precision) for g in genomes])
        return (mu - self.beta * self.optimism(mu, sigma) if self.beta else mu), mu, sigma


class TrainEvaluator:
    """Train mode: every candidate is really trained through a Trainer (`train(genomes) -> labels`)."""

    kind = "train"
    version = 0

    def __init__(self, trainer: Any, penalty: QuantPenalty | None = None):
        self.trainer, self.penalty = trainer, penalty or QuantPenalty()

    def __call__(self, genomes: Sequence[Genome]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Training runs in full precision on the architecture; the formats add the quantization penalty."""
        arch = strip_precision(genomes)
        labels = {lab.genome.id: float(lab.label) for lab in self.trainer.train(arch)}
        y = np.array([labels.get(a.id, np.inf) + self.penalty(g.precision) for a, g in zip(arch, genomes)], dtype=float)
        return y, y.copy(), np.zeros_like(y)

    def interval(self, mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A trained label is a measurement: its interval is the point itself."""
        return np.asarray(mu, float), np.asarray(mu, float).copy()

    def interval_info(self) -> dict[str, Any]:
        return {"level": 1.0, "method": "measured", "source": "real training (evaluator.kind=train)"}


def _seed_torch(seed: int) -> None:
    """MC dropout draws from torch's generator: seed it so the same run gives the same σ."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.manual_seed(seed)


class ForgeProblem(Problem):
    """Minimize the configured objectives subject to the configured constraints over the genome codec."""

    def __init__(self, space: SearchSpace, evaluator: Any, backend: Backend, workload: Workload,
                 objectives: Sequence[str], constraints: Sequence[str | Constraint]):
        self.space, self.evaluator, self.backend, self.workload = space, evaluator, backend, workload
        self.objectives = list(objectives)
        self.constraints = [c if isinstance(c, Constraint) else parse_constraint(c) for c in constraints]
        if not self.objectives:
            raise SearchConfigError("objectives is empty; allowed: a list such as [val_loss, ttft_ms]")
        xl, xu = space.bounds()
        super().__init__(n_var=space.n_var, n_obj=len(self.objectives), n_ieq_constr=len(self.constraints) + 1,
                         xl=xl, xu=xu, vtype=int)
        self._genomes: dict[bytes, Genome] = {}
        self._ids: dict[bytes, str] = {}
        self._cost: dict[str, dict[str, float]] = {}
        self._design: dict[str, dict[str, Any]] = {}  # backend's chosen shape / precision / batch per id
        self._loss: dict[tuple[int, str], tuple[float, float, float]] = {}
        self.timers: dict[str, float] = defaultdict(float)
        self.n_evaluated = 0  # genomes passed through _evaluate (the evaluation budget)
        self.validate_names()

    # ------------------------------------------------------------ names
    def extras(self) -> list[str]:
        """Numeric extras this backend reports (probed on one genome of the space)."""
        g = self.space.decode(self.space.sample_x(1, np.random.default_rng(0)))
        t = self.backend.evaluate(g, self.workload)
        return sorted(k for k, v in (t.extras[0] if t.extras else {}).items()
                      if isinstance(v, (int, float, np.number)) and not isinstance(v, bool))

    def validate_names(self) -> None:
        needed = set(self.objectives) | {c.name for c in self.constraints}
        known = {LOSS, *MODEL_METRICS, *CORE_COST}
        unknown = sorted(needed - known)
        if unknown:
            valid = sorted(known | set(self.extras()))
            bad = sorted(set(unknown) - set(valid))
            if bad:
                raise SearchConfigError(f"objective/constraint {bad[0]!r} is unknown for backend "
                                        f"{getattr(self.backend, 'name', '?')}; allowed: {', '.join(valid)}")
        if len(set(self.objectives)) != len(self.objectives):
            raise SearchConfigError(f"objectives {self.objectives} repeat a name; allowed: distinct names")

    # ------------------------------------------------------------ decode / ids
    def genomes(self, X: np.ndarray, values: dict[str, np.ndarray] | None = None) -> list[Genome]:
        """Decode rows (cached by row bytes: decoding and hashing happen once per distinct row).

        `values` is `space.values(X)` when the caller already has it (one conversion per generation)."""
        t0 = time.perf_counter()
        X = np.asarray(X, dtype=np.int64)
        keys = [row.tobytes() for row in X]
        miss = [i for i, k in enumerate(keys) if k not in self._genomes]
        if miss:
            v = self.space.values(X[miss]) if values is None else {k: a[miss] for k, a in values.items()}
            for i, g in zip(miss, self.space.genomes_from_values(v)):
                self._genomes[keys[i]], self._ids[keys[i]] = g, g.id
        self.timers["decode"] += time.perf_counter() - t0
        return [self._genomes[k] for k in keys]

    def ids(self, X: np.ndarray) -> list[str]:
        self.genomes(X)
        return [self._ids[np.asarray(row, dtype=np.int64).tobytes()] for row in np.asarray(X)]

    # ------------------------------------------------------------ evaluation
    def metrics(self, X: np.ndarray) -> tuple[list[Genome], dict[str, np.ndarray]]:
        """Every metric needed by the objectives and constraints, plus feasibility, for each row.

        The matrix is converted to per-layer values once; genomes (for the evaluator, the backend and the
        cache keys) and the analyzer's arrays (for the model totals) are both built from that one conversion."""
        X = np.asarray(X, dtype=np.int64)
        values = self.space.values(X)
        genomes = self.genomes(X, values)
        ids = [self._ids[row.tobytes()] for row in X]
        out = self._loss_metrics(genomes, ids)
        out.update(self._cost_metrics(genomes, ids))
        t0 = time.perf_counter()
        out.update({k: np.asarray(v, float) for k, v in model_totals(self.space.arrays_from_values(values)).items()})
        self.timers["model_totals"] += time.perf_counter() - t0
        return genomes, out

    def _loss_metrics(self, genomes: list[Genome], ids: list[str]) -> dict[str, np.ndarray]:
        v = self.evaluator.version
        todo = list(dict.fromkeys(i for i in ids if (v, i) not in self._loss))
        if todo:
            t0 = time.perf_counter()
            first = {i: g for g, i in zip(genomes, ids)}
            loss, mu, sigma = self.evaluator([first[i] for i in todo])
            for j, i in enumerate(todo):
                self._loss[(v, i)] = (float(loss[j]), float(mu[j]), float(sigma[j]))
            self.timers[self.evaluator.kind] += time.perf_counter() - t0
        rows = np.array([self._loss[(v, i)] for i in ids], dtype=float).reshape(len(ids), 3)
        out = {LOSS: rows[:, 0], "mu": rows[:, 1], "sigma": rows[:, 2]}
        if hasattr(self.evaluator, "interval"):  # injected evaluators (tests) may have none
            out["loss_lo"], out["loss_hi"] = self.evaluator.interval(rows[:, 1], rows[:, 2])
        return out

    def _cost_metrics(self, genomes: list[Genome], ids: list[str]) -> dict[str, np.ndarray]:
        todo = list(dict.fromkeys(i for i in ids if i not in self._cost))
        if todo:
            t0 = time.perf_counter()
            first = {i: g for g, i in zip(genomes, ids)}
            table: CostTable = self.backend.evaluate([first[i] for i in todo], self.workload)
            names = [n for n in dict.fromkeys([*CORE_COST, *self.objectives, *(c.name for c in self.constraints)])
                     if n not in (LOSS, *MODEL_METRICS)]
            cols = {n: table.objective(n) for n in names}
            for j, i in enumerate(todo):
                self._cost[i] = {n: float(cols[n][j]) for n in names} | {"feasible": float(table.feasible[j])}
                self._cost[i]["reason"] = table.reason[j]  # type: ignore[assignment]
                ex = table.extras[j] if table.extras else {}
                self._design[i] = {k: ex[k] for k in DESIGN_KEYS if k in ex}
            self.timers["backend"] += time.perf_counter() - t0
        keys = [k for k in self._cost[ids[0]] if k != "reason"] if ids else []
        out = {k: np.array([self._cost[i][k] for i in ids], dtype=float) for k in keys}
        out["reason"] = np.array([self._cost[i]["reason"] for i in ids], dtype=object)
        return out

    def fg(self, m: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(F, G) from metrics; non-finite values become large finite ones (still dominated/violated)."""
        F = np.column_stack([m[o] for o in self.objectives]).astype(float)
        G = [c.g(m[c.name]) for c in self.constraints] + [np.where(m["feasible"] > 0, 0.0, 1.0)]
        G = np.column_stack(G).astype(float)
        F = np.where(np.isfinite(F), F, BIG_F)
        G = np.where(np.isfinite(G), G, BIG_G)
        return F, G

    def _evaluate(self, X, out, *args, **kwargs):
        _, m = self.metrics(X)
        out["F"], out["G"] = self.fg(m)
        self.n_evaluated += len(X)

    def record(self, genome: Genome, m: dict[str, np.ndarray], j: int) -> dict[str, Any]:
        """One JSON-able row: objectives, constraint values, μ/σ and the loss interval, feasibility, the backend's reason."""
        keys = dict.fromkeys([*self.objectives, *(c.name for c in self.constraints), LOSS, "mu", "sigma",
                              "loss_lo", "loss_hi", "params", *CORE_COST])
        vals = {k: _num(m[k][j]) for k in keys if k in m}
        feasible = bool(m["feasible"][j] > 0) and all(float(c.g(m[c.name][j:j + 1])[0]) <= 0 for c in self.constraints)
        design = dict(self._design.get(genome.id, {}))
        if genome.precision is not None:
            design["precision"] = str(genome.precision)
        rec = {"id": genome.id, "metrics": vals, "feasible": feasible, "reason": str(m["reason"][j])}
        return rec | ({"design": design} if design else {})


def _num(x: Any) -> float | str:
    """JSON-safe float: inf/nan become strings."""
    x = float(x)
    return x if np.isfinite(x) else ("inf" if x > 0 else ("-inf" if x < 0 else "nan"))


class IdDuplicateElimination(DuplicateElimination):
    """Two rows are duplicates exactly when they build the same network (same genome id)."""

    def __init__(self, ids: Callable[[np.ndarray], list[str]]):
        super().__init__()
        self.ids = ids

    def _do(self, pop, other, is_duplicate):
        keys = self.ids(pop.get("X"))
        if other is None:
            seen: set[str] = set()
            for i, k in enumerate(keys):
                is_duplicate[i] = k in seen
                seen.add(k)
        else:
            taken = set(self.ids(other.get("X")))
            is_duplicate[:] = [k in taken for k in keys]
        return is_duplicate
