"""The Forge-DSE generation loop (LLMForge Algorithm 3), its checkpoints and resume; the files it writes are its
`search.runlog.RunLog`'s.

Generation 0 samples and evaluates the initial population of N; generations 1..G each mate λ
offspring, evaluate them in one batch, run NSGA-II survival on P ∪ Q, merge the feasible pool into
the Pareto archive, log, optionally fire a co-evolution event (g mod K = 0), and checkpoint.
All randomness comes from pymoo's generator, seeded by `seed` and saved in every checkpoint, so a
resumed run writes exactly what an uninterrupted one would. Ctrl-C keeps the last checkpoint.
"""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np
from pymoo.core.population import Population

from forge.disk.io import as_float
from forge.runtime.signals import term_as_interrupt
from search.algorithms import ForgeNSGA2, pop_column
from search.archive import Anchor, Hypervolume, ParetoArchive
from search.coevolution import Survivors
from search.evaluators import check_resumed
from search.objectives import LOSS
from search.problem import ForgeProblem
from search.runlog import RunLog
from search.settings import Plan
from search.state import CHECKPOINT, ResumeError
from search.summary import write_summary


class Search:
    """One search run in `run_dir`, its parts built by `search.build.build_search`; `load()` continues from the
    checkpoint. `config` is what the checkpoint saves (the launched config, as given)."""

    def __init__(self, run_dir: Path, problem: ForgeProblem, algo: ForgeNSGA2, archive: ParetoArchive,
                 anchor: Anchor, config: dict[str, Any], plan: Plan, coevolution: Any = None):
        self.run_dir, self.problem, self.algo, self.archive = Path(run_dir), problem, algo, archive
        self.space, self.cfg, self.plan, self._anchor = problem.space, config, plan, anchor
        self.anchor_genome = anchor.genome
        self.G, self.seed, self.coevo, self.progress = plan.generations, plan.seed, coevolution, plan.progress
        self.log = RunLog(self.run_dir)  # the files the run writes, and the records and history they hold
        self.timers: dict[str, float] = defaultdict(float)
        self.gen, self.wall_before = -1, 0.0
        self._hv: tuple[Hypervolume, Hypervolume, dict[str, float]] | None = None  # scored on first need
        self.study = self._study_writer() if config.get("optuna_study") else None  # <run>/study.db, a live view

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.log.history

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """id -> record at evaluation time."""
        return self.log.records

    # ------------------------------------------------------------ hypervolume
    def hypervolumes(self) -> tuple[Hypervolume, Hypervolume, dict[str, float]]:
        """(HV over the objectives, HV over loss × params, the anchor's metrics), the anchor scored on first
        need by the search's own evaluator and backend (at `run()` or `load()`, before any co-evolution swap),
        so building a `Search` runs nothing."""
        if self._hv is None:
            known = dict(self.plan.anchor_values)
            if self.problem.evaluator.kind != "surrogate" and LOSS not in known:
                bound = [c.bound for c in self.problem.constraints if c.name == LOSS]
                known[LOSS] = bound[0] if bound else 4.0  # train mode: never train the anchor
            m = self.problem.point_metrics(self.anchor_genome, known, self._anchor.x)
            ref = self.plan.hv_ref
            self._hv = (Hypervolume([m[o] for o in self.problem.objectives], ref, self.problem.signs),
                        Hypervolume([m[LOSS], m["params"]], ref), m)
        return self._hv

    @property
    def hv(self) -> Hypervolume:
        return self.hypervolumes()[0]

    @property
    def hv_loss_params(self) -> Hypervolume:
        return self.hypervolumes()[1]

    @property
    def anchor(self) -> dict[str, float]:
        return self.hypervolumes()[2]

    def hv_values(self) -> tuple[float, float]:
        rows = self.archive.entries
        F2 = np.array([[as_float(r["metrics"].get(k), np.inf) for k in (LOSS, "params")] for r in rows]).reshape(-1, 2)
        return self.hv(self.archive.F), self.hv_loss_params(F2)

    # ------------------------------------------------------------ one generation
    def _timed(self, phase: str, fn: Callable, *a, **k):
        t0 = time.perf_counter()
        out = fn(*a, **k)
        self.timers[phase] += time.perf_counter() - t0
        return out

    def step(self, g: int) -> None:
        algo = self.algo
        parents = algo.pop if g > 0 else Population.empty()
        off = self._timed("mating", algo.infill)
        off.set("fgen", np.full(len(off), g))
        algo.evaluator.eval(self.problem, off, algorithm=algo)
        self._log_offspring(g, off)
        pool = Population.merge(parents, off) if g > 0 else off
        self._timed("survival", algo.advance, infills=off)
        self._timed("archive", self._update_archive, pool)
        if self.coevo is not None and self.coevo.due(g):
            pop = Survivors(self.problem.genomes(pop_column(algo.pop, "X")), pop_column(algo.pop, "F"),
                            pop_column(algo.pop, "CV"))
            self._timed("coevolution", self.coevo.fire, g, pop, self.problem.evaluator, self.run_dir)
        self.gen = g
        self._timed("log", self._log_generation, g, len(off))
        self._timed("checkpoint", self.checkpoint)
        if self.study is not None:
            self._timed("study", self.study.sync)
        self.log.forget(self.problem.ids(pop_column(algo.pop, "X")))  # memory flat with the search's length

    def _study_writer(self) -> Any:
        from search.optuna_study import StudyWriter

        maxi = [o.name for o in self.problem.specs if o.sign < 0]
        return StudyWriter(self.run_dir, self.problem.objectives, maxi, list(self.problem.constraints))

    def _log_offspring(self, g: int, off: Population) -> None:
        genomes, m = self.problem.metrics(pop_column(off, "X"))
        self.log.log_offspring(g, genomes, self.problem.records(genomes, m), self.problem.evaluator.version,
                               self.problem.objectives)

    def _update_archive(self, pool: Population) -> None:
        ids = self.problem.ids(pop_column(pool, "X"))
        feas = pop_column(pool, "feas").reshape(-1)
        keep = [j for j in range(len(pool)) if feas[j]]
        self.archive.update([self.records[ids[j]] for j in keep], pop_column(pool, "F")[keep])
        self.log.update_front(self.archive.entries)

    def _log_generation(self, g: int, n_new: int) -> None:
        hv, hv_lp = self.hv_values()
        F, feas = pop_column(self.algo.pop, "F"), pop_column(self.algo.pop, "feas").reshape(-1)
        best = {o: float(F[feas, i].min()) if feas.any() else None for i, o in enumerate(self.problem.objectives)}
        row = {"generation": g, "evaluations": self.problem.n_evaluated, "new": n_new, "hv": hv,
               "hv_loss_params": hv_lp, "archive_size": len(self.archive), "n_feasible": int(feas.sum()),
               "best": best, "surrogate_version": self.problem.evaluator.version}
        self.log.log_generation(row, sum(self.problem.timers.values()))

    # ------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        ev = self.problem.evaluator
        pop_ids = self.problem.ids(pop_column(self.algo.pop, "X"))
        return {"generation": self.gen, "config": self.cfg, **self.algo.checkpoint_state(),
                "pop_records": [self.records[i] for i in pop_ids], "archive": self.archive.to_rows(),
                "history": self.history, "n_evaluated": self.problem.n_evaluated,
                "surrogate_version": ev.version, "timers": self.all_timers(), "wall_s": self.wall(),
                "coevolution": self.coevo.state() if self.coevo is not None else None}

    def checkpoint(self) -> None:
        losses = self.problem.new_losses()  # cached this generation: a resume never re-predicts them
        self.log.checkpoint(self.state(), self.gen, losses)

    def load(self) -> None:
        """Continue from `run_dir`'s checkpoint: restore everything, then drop log lines written after it.
        With no checkpoint yet (killed in generation 0) the run starts afresh: every log line is dropped.
        A checkpoint that cannot be restored is refused before any log is touched."""
        point = self.log.resume_point()
        if point is None:
            return
        st, cache = point
        self.hypervolumes()  # the anchor is scored by the run's first surrogate, as the uninterrupted run did
        try:
            self._restore(st, cache)
        except ResumeError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # the checkpoint is data
            raise ResumeError(f"{self.run_dir / CHECKPOINT}: corrupt checkpoint, cannot restore it "
                              f"({type(e).__name__}: {str(e)[:80]}); allowed: the checkpoint forge-search wrote") from None
        self.log.rewind(self.gen, st, cache, self.archive.entries)

    def _restore(self, st: dict[str, Any], cache: str | None = None) -> None:
        self.gen = int(st["generation"])
        n_var = np.asarray(st["pop"].get("X") or [[0] * self.space.n_var]).shape[-1]
        if n_var != self.space.n_var:
            raise ResumeError(f"{self.run_dir / CHECKPOINT}: its population has {n_var} genes per genome, the space "
                              f"{self.space.name} {self.space.n_var}; allowed: the checkpoint of a run of this space")
        if self.gen >= 0:
            self.algo.restore(st)
        self.archive = ParetoArchive.from_rows(self.archive.objectives, st["archive"], self.problem.signs)
        self.problem.n_evaluated = int(st["n_evaluated"])
        cached = self.log.restore(st, self.gen, cache)
        self.problem.preload_losses(cached)
        if self.coevo is not None and st.get("coevolution"):
            self.coevo.restore(st["coevolution"], self.problem.evaluator, self.run_dir)
        if self.gen >= 0:  # the surrogate built for this resume is the run's: it predicts what the run cached
            X = pop_column(self.algo.pop, "X")
            check_resumed(self.problem.evaluator, self.problem.genomes(X), self.problem.ids(X), cached, self.run_dir)
        self.timers.update({k: v for k, v in st["timers"].items() if not k.startswith("eval.")})
        self.wall_before = float(st["wall_s"])

    def all_timers(self) -> dict[str, float]:
        return {**self.timers, **{f"eval.{k}": v for k, v in self.problem.timers.items()}}

    def wall(self) -> float:
        return self.wall_before + (time.perf_counter() - self._t0 if hasattr(self, "_t0") else 0.0)

    # ------------------------------------------------------------ driver
    def run(self, stop_after: int | None = None) -> dict[str, Any]:
        """Run generations gen+1 .. G; stop early after `stop_after` (tests) or on Ctrl-C / SIGTERM.
        summary.json says `running` until the loop ends, so a killed run never passes for a finished one."""
        from search.progress import SearchProgress

        self.hypervolumes()  # scored before the clock starts, as when it was scored on construction
        self._t0, status, stopped_by = time.perf_counter(), "complete", None
        self.write_summary("running")
        with SearchProgress(self.G, enabled=self.progress) as bar, term_as_interrupt() as caught:
            if self.coevo is not None:
                self.coevo.note = bar.note  # its trainings and refits show in the progress display
                getattr(self.coevo, "start", lambda: None)()  # an asynchronous one's picks in flight at resume
            try:
                for g in range(self.gen + 1, self.G + 1):
                    self.step(g)
                    bar.update(self)
                    if stop_after is not None and g >= stop_after and g < self.G:
                        status = "stopped"
                        break
                if status == "complete":
                    self._timed("coevolution", self._finish_coevolution)
            except KeyboardInterrupt:
                status, stopped_by = "interrupted", caught.get("signal", "SIGINT")
            except Exception as e:  # a bug or a full disk: never leave `running` behind; the checkpoint stays
                self._sync_quietly()
                self._write_failed(e)
                raise
            finally:  # an asynchronous co-evolution's labeller threads: a stop lets the trainings in flight end
                getattr(self.coevo, "close", lambda wait: None)(status in ("complete", "stopped"))
        if self.gen >= 0 and status != "interrupted":  # an interrupted step may have left the archive half-merged
            self.log.write_front(self.archive.entries, durable=True)
        self.log.sync()
        self.log.write_tables(self.problem.objectives, getattr(self.problem.evaluator, "blind", ()),
                              getattr(getattr(self.problem.evaluator, "predictor", None), "pairwise", None))
        return self.write_summary(status, stopped_by)

    def _finish_coevolution(self) -> None:
        """Co-evolution's picks still in flight when the last generation ends are folded in, then checkpointed."""
        finish = getattr(self.coevo, "finish", None)
        if finish is not None and self.gen >= 0 and finish(self.gen, self.problem.evaluator, self.run_dir):
            self.checkpoint()

    def _sync_quietly(self) -> None:
        """`sync` when the loop failed: the original error is the one to report."""
        try:
            self.log.sync()
        except OSError:
            pass

    def _write_failed(self, e: Exception) -> None:
        """summary.json status `failed` with the reason; on a full disk even that may not fit (then it stays)."""
        reason = (str(e).strip().splitlines() or [""])[0]
        try:
            self.write_summary("failed", reason=f"{type(e).__name__}: {reason}" if reason else type(e).__name__)
        except Exception:  # noqa: BLE001  (the original error is the one to report)
            pass

    def write_summary(self, status: str, interrupted_by: str | None = None, reason: str | None = None) -> dict[str, Any]:
        """summary.json (search.summary); `status` is the field consumers check."""
        return write_summary(self, status, interrupted_by, reason)
