"""The Forge-DSE generation loop (LLMForge Algorithm 3) with logging, checkpoints and resume.

Generation 0 samples and evaluates the initial population of N; generations 1..G each mate λ
offspring, evaluate them in one batch, run NSGA-II survival on P ∪ Q, merge the feasible pool into
the Pareto archive, log, optionally fire a co-evolution event (g mod K = 0), and checkpoint.
All randomness comes from pymoo's generator, seeded by `seed` and saved in every checkpoint, so a
resumed run writes exactly what an uninterrupted one would. Ctrl-C keeps the last checkpoint.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np
from pymoo.core.population import Population

from forge.disk.io import as_float, atomic_write_text, json_line
from forge.runtime.signals import term_as_interrupt
from search.algorithms import ForgeNSGA2, pop_column
from search.archive import Anchor, Hypervolume, ParetoArchive
from search.coevolution import Survivors
from search.evaluators import check_resumed
from search.ledger import LOSS_CACHE, LogLedger, rebuilt_cache, resume_state, snapshot_durable, truncate_logs
from search.objectives import LOSS
from search.problem import ForgeProblem
from search.settings import Plan
from search.summary import write_summary
from search.state import (CHECKPOINT, ResumeError, append_jsonl, append_lines, check_resumable, read_jsonl,
                          save_checkpoint, sync_files)
from search.tables import GenerationLog, genome_row, write_tables

DURABLE_EVERY_S = 5.0  # fsync the logs and the checkpoint at most this often (and when the loop ends)
LOGS = ("archive.jsonl", "history.jsonl", "labels.jsonl", "coevolution.jsonl", LOSS_CACHE)
COVERED = ("archive.jsonl", "labels.jsonl", "coevolution.jsonl", LOSS_CACHE)  # the checkpoint records their prefixes


class Search:
    """One search run in `run_dir`, its parts built by `search.build.build_search`; `load()` continues from the
    checkpoint. `config` is what the checkpoint saves (the launched config, as given)."""

    def __init__(self, run_dir: Path, problem: ForgeProblem, algo: ForgeNSGA2, archive: ParetoArchive,
                 anchor: Anchor, config: dict[str, Any], plan: Plan, coevolution: Any = None):
        self.run_dir, self.problem, self.algo, self.archive = Path(run_dir), problem, algo, archive
        self.space, self.cfg, self.plan, self._anchor = problem.space, config, plan, anchor
        self.anchor_genome = anchor.genome
        self.G, self.seed, self.coevo, self.progress = plan.generations, plan.seed, coevolution, plan.progress
        self.history: list[dict[str, Any]] = []
        self.records: dict[str, dict[str, Any]] = {}  # id -> record at evaluation time
        self.timers: dict[str, float] = defaultdict(float)
        self.gen, self.wall_before = -1, 0.0
        self._json: dict[tuple, str] = {}  # record key -> its JSON line (see _line)
        self._history_lines: list[str] = []  # json_line of each history row
        self._front_ids: list[str] | None = None  # the ids pareto.jsonl holds (None: not written by this process)
        self._synced_at = -np.inf  # when the logs and the checkpoint were last fsynced (the first one is)
        self.ledger = LogLedger(self.run_dir, COVERED)  # rows, bytes and hash of each log (see checkpoint())
        self._table_rows: list[dict[str, Any]] | None = []  # archive.csv rows, while this process logged them all
        self.table_log = GenerationLog(self.run_dir)  # history.csv + a logging line per generation
        self._hv: tuple[Hypervolume, Hypervolume, dict[str, float]] | None = None  # scored on first need

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

    def _log_offspring(self, g: int, off: Population) -> None:
        genomes, m = self.problem.metrics(pop_column(off, "X"))
        lines = []
        for genome, rec in zip(genomes, self.problem.records(genomes, m)):
            rec.update(generation=g, surrogate_version=self.problem.evaluator.version)
            # = genome.with_layers(active_layers).to_dict(): the pruned slots are never written, nor converted
            rec["genome"] = genome.trusted_copy(genome.active_layers, genome.precision).to_dict()
            self.records[rec["id"]] = rec
            lines.append(self._line(rec))
        append_lines(self.run_dir / "archive.jsonl", lines, sync=False)  # synced with the checkpoint
        if self._table_rows is not None:
            objectives = self.problem.objectives
            self._table_rows += [genome_row(self.records[g.id], objectives) for g in genomes]

    def _update_archive(self, pool: Population) -> None:
        ids = self.problem.ids(pop_column(pool, "X"))
        feas = pop_column(pool, "feas").reshape(-1)
        keep = [j for j in range(len(pool)) if feas[j]]
        self.archive.update([self.records[ids[j]] for j in keep], pop_column(pool, "F")[keep])
        if [e["id"] for e in self.archive.entries] != self._front_ids:  # most late generations change nothing
            self._write_front(durable=False)

    def _write_front(self, durable: bool) -> None:
        """pareto.jsonl, derived from the archive the checkpoint holds: rewritten (atomically) in every generation
        that changes the front, made durable once at the end and on resume, so a generation costs no fsync for it."""
        atomic_write_text(self.run_dir / "pareto.jsonl", "".join(self._line(r) + "\n" for r in self.archive.entries),
                          durable)
        self._front_ids = [e["id"] for e in self.archive.entries]

    def _log_generation(self, g: int, n_new: int) -> None:
        hv, hv_lp = self.hv_values()
        F, feas = pop_column(self.algo.pop, "F"), pop_column(self.algo.pop, "feas").reshape(-1)
        best = {o: float(F[feas, i].min()) if feas.any() else None for i, o in enumerate(self.problem.objectives)}
        row = {"generation": g, "evaluations": self.problem.n_evaluated, "new": n_new, "hv": hv,
               "hv_loss_params": hv_lp, "archive_size": len(self.archive), "n_feasible": int(feas.sum()),
               "best": best, "surrogate_version": self.problem.evaluator.version}
        self.history.append(row)
        self._history_lines.append(json_line(row))
        append_lines(self.run_dir / "history.jsonl", self._history_lines[-1:], sync=False)  # the checkpoint holds it
        self.table_log.log(row, sum(self.problem.timers.values()))

    # ------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        ev = self.problem.evaluator
        pop_ids = self.problem.ids(pop_column(self.algo.pop, "X"))
        return {"generation": self.gen, "config": self.cfg, **self.algo.checkpoint_state(),
                "pop_records": [self.records[i] for i in pop_ids], "archive": self.archive.to_rows(),
                "history": self.history, "n_evaluated": self.problem.n_evaluated,
                "surrogate_version": ev.version, "timers": self.all_timers(), "wall_s": self.wall(),
                "coevolution": self.coevo.state() if self.coevo is not None else None}

    def _flush_loss_cache(self) -> None:
        """Append losses cached this generation to state/loss_cache.jsonl, so a resume never re-predicts
        (a different batch composition could change the last bits of a float prediction). Not fsynced: a
        killed process loses nothing the OS holds; only a power loss could drop its tail, which a resume then
        re-predicts."""
        append_jsonl(self.run_dir / LOSS_CACHE, [{"generation": self.gen, "v": v, "id": i, "y": list(y)}
                                                 for v, i, y in self.problem.new_losses()], sync=False)

    def checkpoint(self) -> None:
        self._flush_loss_cache()
        state = self.state()
        encoded = {k: [self._line(r) for r in state.pop(k)] for k in ("archive", "pop_records")}
        state.pop("history")
        state["logs"] = self.ledger.update()  # what a resume checks the logs against (search.ledger)
        durable = time.perf_counter() - self._synced_at >= DURABLE_EVERY_S
        if durable:  # the rows it names reach the disk before it does
            sync_files([self.run_dir / "archive.jsonl", self.run_dir / LOSS_CACHE])
            self._synced_at = time.perf_counter()
        save_checkpoint(self.run_dir, state, {**encoded, "history": self._history_lines}, durable)
        if durable:
            snapshot_durable(self.run_dir)

    def sync(self) -> None:
        """Make the logs and the last checkpoint durable (the loop syncs only every `DURABLE_EVERY_S`); it becomes
        the durable snapshot a resume falls back to when a power loss cut a log (search.ledger)."""
        sync_files(self.run_dir / name for name in ("archive.jsonl", "history.jsonl", LOSS_CACHE, CHECKPOINT))
        if (self.run_dir / CHECKPOINT).is_file():
            snapshot_durable(self.run_dir)

    def _line(self, rec: dict[str, Any]) -> str:
        """A record's JSON line, encoded once: records never change once logged (same id, generation and
        surrogate version = the same evaluation), and archive.jsonl, pareto.jsonl and the checkpoint all repeat
        them, generation after generation."""
        key = (rec["id"], rec.get("generation"), rec.get("surrogate_version"))
        text = self._json.get(key)
        if text is None:
            text = self._json[key] = json_line(rec)
        return text

    def load(self) -> None:
        """Continue from `run_dir`'s checkpoint: restore everything, then drop log lines written after it.
        With no checkpoint yet (killed in generation 0) the run starts afresh: every log line is dropped.
        A checkpoint that cannot be restored is refused before any log is touched."""
        if not (self.run_dir / CHECKPOINT).exists():
            check_resumable(self.run_dir)
            truncate_logs(self.run_dir, -1, LOGS, self.table_log)
            return
        st = dict(resume_state(self.run_dir, note=True))  # the newest checkpoint whose logs are intact, else refused
        cache = rebuilt_cache(self.run_dir, st, note=True)  # None: the loss cache is intact
        self._table_rows = None  # archive.csv is rebuilt from archive.jsonl, which holds earlier rows
        self.hypervolumes()  # the anchor is scored by the run's first surrogate, as the uninterrupted run did
        try:
            self._restore(st, cache)
        except ResumeError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # the checkpoint is data
            raise ResumeError(f"{self.run_dir / CHECKPOINT}: corrupt checkpoint, cannot restore it "
                              f"({type(e).__name__}: {str(e)[:80]}); allowed: the checkpoint forge-search wrote") from None
        truncate_logs(self.run_dir, self.gen, [n for n in LOGS if n != "history.jsonl"], self.table_log,
                      st.get("logs"), {LOSS_CACHE: cache} if cache is not None else None)
        atomic_write_text(self.run_dir / "history.jsonl", "".join(t + "\n" for t in self._history_lines))  # checkpoint's
        self._write_front(durable=True)
        self.ledger.reset()  # the logs were rewritten: the next checkpoint hashes them anew

    def _restore(self, st: dict[str, Any], cache: str | None = None) -> None:
        self.gen, self.history = int(st["generation"]), list(st["history"])
        self._history_lines = [json_line(r) for r in self.history]
        n_var = np.asarray(st["pop"].get("X") or [[0] * self.space.n_var]).shape[-1]
        if n_var != self.space.n_var:
            raise ResumeError(f"{self.run_dir / CHECKPOINT}: its population has {n_var} genes per genome, the space "
                              f"{self.space.name} {self.space.n_var}; allowed: the checkpoint of a run of this space")
        if self.gen >= 0:
            self.algo.restore(st)
        self.archive = ParetoArchive.from_rows(self.archive.objectives, st["archive"], self.problem.signs)
        self.records.update({r["id"]: r for r in st["pop_records"]})
        self.problem.n_evaluated = int(st["n_evaluated"])
        rows = read_jsonl(self.run_dir / LOSS_CACHE, True) if cache is None else map(json.loads, cache.splitlines())
        cached = {(int(r["v"]), r["id"]): tuple(r["y"]) for r in rows
                  if int(r.get("generation", -1)) <= self.gen}  # newer lines are dropped below
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
            try:
                for g in range(self.gen + 1, self.G + 1):
                    self.step(g)
                    bar.update(self)
                    if stop_after is not None and g >= stop_after and g < self.G:
                        status = "stopped"
                        break
            except KeyboardInterrupt:
                status, stopped_by = "interrupted", caught.get("signal", "SIGINT")
            except Exception as e:  # a bug or a full disk: never leave `running` behind; the checkpoint stays
                self._sync_quietly()
                self._write_failed(e)
                raise
        if self.gen >= 0 and status != "interrupted":  # an interrupted step may have left the archive half-merged
            self._write_front(durable=True)
        self.sync()
        write_tables(self.run_dir, self.problem.objectives, self._table_rows,
                     getattr(self.problem.evaluator, "blind", ()))  # front.csv, archive.csv beside the JSONL
        return self.write_summary(status, stopped_by)

    def _sync_quietly(self) -> None:
        """`sync` when the loop failed: the original error is the one to report."""
        try:
            self.sync()
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
