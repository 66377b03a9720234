"""The pymoo problem: decode offspring, evaluate loss (an evaluator of `search.evaluators`) and hardware cost.

`_evaluate` is vectorized over the whole offspring batch (LLMForge Algorithm 3, line 13): one
predictor call and one backend call per generation. Every result is cached by genome id (the loss
also by surrogate version, since co-evolution hot-swaps the predictor). Objectives and constraints
are named and directed (`search.objectives`): the loss, a model or workload total from `forge.lm.workload`,
a core backend metric, any numeric backend extra, or a user function. Constraints are strings such as
`val_loss < 3.8` or `ttft_ms <= 20` (`search.constraints`); hardware-infeasible genomes get one extra
violated constraint and are dominated out. Every float the evaluator, the backend or a user function returns is
rounded here, once, to `forge.numeric.DIGITS` significant digits (`settle`): F, G, the archive, the run files and
every later comparison see the same numbers on any CPU (issue 33).
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np
from pymoo.core.problem import Problem

from backends.interface import Backend, Workload, evaluated
from forge.spaces.arrays import GenomeBatch, PopArrays
from forge.genomes.genes import attention_genes
from forge.genomes.genome import Genome
from forge.disk.io import json_num
from forge.numeric import round_sig, settle
from forge.spaces.space import SearchSpace
from forge.lm.workload import WORKLOAD_TOTALS, model_totals, workload_totals
from search import caches
from search.caches import trim
from search.constraints import Constraint, parse_constraint
from search.errors import SearchConfigError
from search.objectives import CORE_COST, LOSS, MODEL_METRICS, NOT_BACKEND, Objective, parse_objectives

DESIGN_KEYS = ("shape", "precision", "batch")  # backend extras recorded with each Pareto row (as text)
BIG_F, BIG_G = 1e12, 1e9  # finite stand-ins for inf (pymoo's sorting and crowding need finite numbers)


class ForgeProblem(Problem):
    """Minimize the configured objectives subject to the configured constraints over the genome codec."""

    def __init__(self, space: SearchSpace, evaluator: Any, backend: Backend, workload: Workload,
                 objectives: Sequence[Any], constraints: Sequence[str | Constraint]):
        self.space, self.evaluator, self.backend, self.workload = space, evaluator, backend, workload
        self.specs: list[Objective] = parse_objectives(objectives)
        self.objectives = [o.name for o in self.specs]
        self.signs = np.array([o.sign for o in self.specs])
        self.user = {o.name: o for o in self.specs if o.fn is not None}
        self.constraints = [c if isinstance(c, Constraint) else parse_constraint(c) for c in constraints]
        xl, xu = space.bounds()
        super().__init__(n_var=space.n_var, n_obj=len(self.objectives), n_ieq_constr=len(self.constraints) + 1,
                         xl=xl, xu=xu, vtype=int)
        self._genomes: dict[bytes, Genome] = {}
        self._ids: dict[bytes, str] = {}
        self._last: tuple[Any, list[Genome], dict[str, np.ndarray]] | None = None  # the batch just evaluated
        self._attention = set(attention_genes())
        self._keys: dict[bytes, bytes] = {}  # row bytes -> network key (see keys)
        self._cost: dict[str, dict[str, float]] = {}
        self._design: dict[str, dict[str, Any]] = {}  # backend's chosen shape / precision / batch per id
        self._loss: dict[tuple[int, str], tuple[float, float, float]] = {}
        self._unsaved: dict[tuple[int, str], tuple[float, float, float]] = {}  # losses not yet handed out by new_losses
        self._kdt = np.uint8 if int(np.max(xu, initial=0)) < 256 else np.int64  # row keys: one byte a gene
        self._user: dict[str, dict[str, float]] = {}  # user-function objectives by genome id
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
        known = {LOSS, *MODEL_METRICS, *WORKLOAD_TOTALS, *CORE_COST, *self.user}
        unknown = sorted(needed - known)
        if unknown:
            valid = sorted(known | set(self.extras()))
            bad = sorted(set(unknown) - set(valid))
            if bad:
                raise SearchConfigError(f"objective/constraint {bad[0]!r} is unknown for backend "
                                        f"{getattr(self.backend, 'name', '?')}; allowed: {', '.join(valid)}")

    # ------------------------------------------------------------ decode / ids
    def _row_bytes(self, X: np.ndarray) -> list[bytes]:
        """One cache key per row (its grid indices, a byte each where every grid is that short)."""
        return [r.tobytes() for r in np.asarray(X).astype(self._kdt)]

    def trim_caches(self) -> None:
        """Keep the newest `search.caches.CACHE_ROWS` entries of each per-genome cache (a genome seen again is decoded
        or scored again, to the same numbers); the losses only where the evaluator is deterministic (a surrogate
        without MC dropout): a sampled or trained loss is never drawn twice."""
        for cache in (self._genomes, self._ids):  # in step: a row in one is in the other
            trim(cache, caches.GENOME_ROWS)
        for cache in (self._keys, self._cost, self._design, self._user):  # a user objective: a function of the genome
            trim(cache)
        if getattr(self.evaluator, "kind", None) == "surrogate" and not getattr(self.evaluator, "n_mc", 0):
            trim(self._loss)

    def genomes(self, X: np.ndarray, values: dict[str, np.ndarray] | None = None) -> list[Genome]:
        """Decode rows (cached by row bytes: decoding and hashing happen once per distinct row).

        `values` is `space.values(X)` when the caller already has it (one conversion per generation)."""
        t0 = time.perf_counter()
        X = np.asarray(X, dtype=np.int64)
        keys = self._row_bytes(X)
        miss = [i for i, k in enumerate(keys) if k not in self._genomes]
        if miss:
            v = self.space.values(X[miss]) if values is None else {k: a[miss] for k, a in values.items()}
            for i, g in zip(miss, self.space.genomes_from_values(v)):
                self._genomes[keys[i]], self._ids[keys[i]] = g, g.id
        self.timers["decode"] += time.perf_counter() - t0
        return [self._genomes[k] for k in keys]

    def ids(self, X: np.ndarray) -> list[str]:
        X = np.asarray(X, dtype=np.int64)
        self.genomes(X)
        return [self._ids[k] for k in self._row_bytes(X)]

    def keys(self, X: np.ndarray) -> list[bytes]:
        """One key per row, equal exactly when the ids are (the same network), read from the encoded rows
        without decoding: active slots in order, attention genes blanked on identity layers, plus the
        precision genes. Grid indices stand for values one to one, so this is the id's canonical form."""
        X = np.asarray(X, dtype=np.int64)
        rows = self._row_bytes(X)
        miss = [j for j, b in enumerate(rows) if b not in self._keys]
        if miss:
            self._keys.update(zip((rows[j] for j in miss), self._row_keys(X[miss])))
        return [self._keys[b] for b in rows]

    def _row_keys(self, X: np.ndarray) -> list[bytes]:
        sp = self.space
        X3 = X[:, :sp.n_layer_var].reshape(len(X), sp.L_max, sp.n_genes).copy()
        att = [j for j, k in enumerate(sp.codec_genes) if k in self._attention]
        X3[:, :, att] *= X3[:, :, 1:2]
        act = X3[:, :, 0].astype(bool)
        X3 = np.take_along_axis(X3, np.argsort(~act, axis=1, kind="stable")[:, :, None], axis=1)
        X3 *= np.sort(act, axis=1)[:, ::-1, None]
        return self._row_bytes(np.concatenate([X3.reshape(len(X), -1), X[:, sp.n_layer_var:]], axis=1))

    # ------------------------------------------------------------ evaluation
    def metrics(self, X: np.ndarray) -> tuple[list[Genome], dict[str, np.ndarray]]:
        """Every metric needed by the objectives and constraints, plus feasibility, for each row.

        The matrix is converted to per-layer values once; genomes (for the evaluator, the backend and the
        cache keys) and the analyzer's arrays (for the model totals) are both built from that one conversion."""
        X = np.asarray(X, dtype=np.int64)
        key = (self.evaluator.version, X.tobytes())
        if self._last is not None and self._last[0] == key:  # the runner logs the batch it just evaluated
            return self._last[1], dict(self._last[2])
        self.trim_caches()  # nothing read from them is still to be read: this batch fills them again
        values = self.space.values(X)
        genomes = self.genomes(X, values)
        t0 = time.perf_counter()
        arrays = self.space.arrays_from_values(values)
        self.timers["decode"] += time.perf_counter() - t0
        ids = [self._ids[k] for k in self._row_bytes(X)]
        out = self._loss_metrics(genomes, ids, arrays)
        out.update(self._cost_metrics(genomes, ids, arrays))
        t0 = time.perf_counter()
        out.update(self.totals(arrays))
        self.timers["model_totals"] += time.perf_counter() - t0
        if self.user:
            out.update(self._user_metrics(genomes, ids))
        self._last = (key, genomes, out)
        return genomes, dict(out)

    def point_metrics(self, genome: Genome, known: Mapping[str, float] | None = None,
                      X: np.ndarray | None = None) -> dict[str, float]:
        """Every metric of one genome as floats (the hypervolume anchor's; `X`: its codec row, when encoded
        already): values in `known` are kept, and when the loss is among them the evaluator is never called (a
        train-mode search never trains its anchor)."""
        m = dict(known or {})
        X = self.space.encode([genome]) if X is None else X
        if LOSS not in m:
            _, full = self.metrics(X)
        else:
            full = self._cost_metrics([genome], [genome.id])
            full.update(self.totals(self.space.to_arrays(X)))
            if self.user:
                full.update(self._user_metrics([genome], [genome.id]))
        for k, v in full.items():
            if k not in m and k != "reason":
                m[k] = float(np.asarray(v)[0])
        return m

    # ------------------------------------------------------------ loss cache (resume)
    def new_losses(self) -> list[tuple[int, str, tuple[float, float, float]]]:
        """(version, id, (loss, μ, σ)) computed since the last call, in order: what the runner appends to its
        loss cache so a resume never re-predicts."""
        out = [(v, i, y) for (v, i), y in self._unsaved.items()]
        self._unsaved.clear()
        return out

    def preload_losses(self, cached: Mapping[tuple[int, str], Sequence[float]]) -> None:
        """Losses read back from a loss cache: used as if computed here, and never handed out again."""
        for k, y in cached.items():
            self._loss[k] = tuple(y)  # type: ignore[assignment]
            self._unsaved.pop(k, None)

    def totals(self, arrays: Any) -> dict[str, np.ndarray]:
        """Model totals, plus the workload totals when an objective or constraint names one."""
        out = {k: np.asarray(v, float) for k, v in model_totals(arrays).items()}
        needed = set(self.objectives) | {c.name for c in self.constraints}
        if needed & set(WORKLOAD_TOTALS):
            w = self.workload
            batch = 1 if w.batch_max else w.batch
            out.update(workload_totals(arrays, w.prefill + w.decode, batch, w.precision))
        return out

    def _user_metrics(self, genomes: list[Genome], ids: list[str]) -> dict[str, np.ndarray]:
        """User-function objectives, computed once per genome id."""
        todo = {i: g for g, i in zip(genomes, ids) if i not in self._user}
        if todo:
            cols = {n: settle(o.values(list(todo.values()))) for n, o in self.user.items()}
            for j, i in enumerate(todo):
                self._user[i] = {n: float(c[j]) for n, c in cols.items()}
        return {n: np.array([self._user[i][n] for i in ids], dtype=float) for n in self.user}

    def _loss_metrics(self, genomes: list[Genome], ids: list[str], arrays: PopArrays | None = None
                      ) -> dict[str, np.ndarray]:
        v = self.evaluator.version
        todo = list(dict.fromkeys(i for i in ids if (v, i) not in self._loss))
        if todo:
            t0 = time.perf_counter()
            loss, mu, sigma = (settle(a) for a in self.evaluator(_batch(genomes, ids, todo, arrays)))
            for j, i in enumerate(todo):
                self._loss[(v, i)] = self._unsaved[(v, i)] = (float(loss[j]), float(mu[j]), float(sigma[j]))
            self.timers[self.evaluator.kind] += time.perf_counter() - t0
        rows = np.array([self._loss[(v, i)] for i in ids], dtype=float).reshape(len(ids), 3)
        out = {LOSS: rows[:, 0], "mu": rows[:, 1], "sigma": rows[:, 2]}
        if hasattr(self.evaluator, "interval"):  # injected evaluators (tests) may have none
            out["loss_lo"], out["loss_hi"] = (round_sig(a) for a in self.evaluator.interval(rows[:, 1], rows[:, 2]))
        return out

    def _cost_metrics(self, genomes: list[Genome], ids: list[str], arrays: PopArrays | None = None
                      ) -> dict[str, np.ndarray]:
        todo = list(dict.fromkeys(i for i in ids if i not in self._cost))
        if todo:
            t0 = time.perf_counter()
            table = evaluated(self.backend, _batch(genomes, ids, todo, arrays), self.workload, len(todo))
            names = [n for n in dict.fromkeys([*CORE_COST, *self.objectives, *(c.name for c in self.constraints)])
                     if n not in (*NOT_BACKEND, *self.user)]
            cols = {n: settle(table.objective(n)) for n in names}
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
        F = np.column_stack([m[o] for o in self.objectives]).astype(float) * self.signs
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
        return self.records([genome], {k: v[j:j + 1] for k, v in m.items()})[0]

    def records(self, genomes: Sequence[Genome], m: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        """`record` for every row of a batch (columns converted and constraints checked once per batch)."""
        keys = dict.fromkeys([*self.objectives, *(c.name for c in self.constraints), LOSS, "mu", "sigma",
                              "loss_lo", "loss_hi", "params", *CORE_COST])
        cols = {k: np.asarray(m[k], float).tolist() for k in keys if k in m}
        ok = np.asarray(m["feasible"]) > 0
        for c in self.constraints:
            ok &= c.g(m[c.name]) <= 0
        out = []
        for j, genome in enumerate(genomes):
            design = dict(self._design.get(genome.id, {}))
            if genome.precision is not None:
                design["precision"] = str(genome.precision)
            rec = {"id": genome.id, "metrics": {k: json_num(v[j]) for k, v in cols.items()}, "feasible": bool(ok[j]),
                   "reason": str(m["reason"][j])}
            out.append(rec | ({"design": design} if design else {}))
        return out

    def violations(self, rec: dict[str, Any]) -> dict[str, float]:
        """By how much a record misses each constraint it violates (`ttft_ms <= 100`: 37.5 ms over), plus
        `hardware` when the backend found no design for it: what the no-feasible-genome table shows."""
        out = {}
        for c in self.constraints:
            v = float(c.g(np.array([float(rec["metrics"].get(c.name, "inf"))]))[0])
            if v > 0:
                out[str(c)] = v
        if rec.get("reason") and not rec.get("feasible") and not out:
            out["hardware"] = 1.0
        return out


def _batch(genomes: list[Genome], ids: list[str], todo: list[str], arrays: PopArrays | None) -> list[Genome]:
    """The first genome of each id in `todo`, with its rows of `arrays` when given (a GenomeBatch)."""
    first: dict[str, int] = {}
    for j, i in enumerate(ids):
        first.setdefault(i, j)
    rows = [first[i] for i in todo]
    picked = [genomes[j] for j in rows]
    return GenomeBatch(picked, arrays.take(np.asarray(rows))) if arrays is not None else picked
