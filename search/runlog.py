"""A search run's files, owned by one object: the JSONL logs (archive, history, loss cache), pareto.jsonl, the
checkpoint and its ledger, the CSV tables, and the caches that keep writing them cheap.

The loop (`search.runner.Search`) hands it records and rows; `RunLog` encodes each record once (records never
change once logged, and archive.jsonl, pareto.jsonl and the checkpoint repeat them generation after generation),
fsyncs only every `DURABLE_EVERY_S` seconds and at the end, and on resume drops every line written after the
checkpoint, so a resumed run writes exactly what an uninterrupted one would.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from forge.disk.io import atomic_write_text, json_line, loads
from forge.genomes.genome import Genome
from search import caches
from search.ledger import (LOSS_CACHE, LogLedger, has_checkpoint, rebuilt_cache, resume_state, snapshot_durable,
                           truncate_logs)
from search.state import CHECKPOINT, append_jsonl, append_lines, check_resumable, read_jsonl, save_checkpoint, sync_files
from search.tables import GenerationLog, genome_row, write_tables
from forge.disk import run_folder

DURABLE_EVERY_S = 5.0  # fsync the logs and the checkpoint at most this often (and when the loop ends)
LOGS = (run_folder.ARCHIVE, run_folder.HISTORY, run_folder.LABELS, run_folder.COEVOLUTION, LOSS_CACHE)
COVERED = (run_folder.ARCHIVE, run_folder.LABELS, run_folder.COEVOLUTION, LOSS_CACHE)  # the checkpoint records their prefixes


class RunLog:
    """The files of one run in `run_dir`, and what they hold in memory: `records` (id -> record at evaluation
    time) and `history` (one row per generation)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.history: list[dict[str, Any]] = []
        self.records: dict[str, dict[str, Any]] = {}
        self._json: dict[tuple, str] = {}  # record key -> its JSON line (see line)
        self._history_lines: list[str] = []  # json_line of each history row
        self._front_ids: list[str] | None = None  # the ids pareto.jsonl holds (None: not written by this process)
        self._synced_at = -np.inf  # when the logs and the checkpoint were last fsynced (the first one is)
        self.ledger = LogLedger(self.run_dir, COVERED)  # rows, bytes and hash of each log (see checkpoint())
        self._table_rows: list[dict[str, Any]] | None = []  # archive.csv rows, while this process logged them all
        # (and they are few: past search.caches.CACHE_ROWS, archive.csv is written from archive.jsonl at the end)
        self.table_log = GenerationLog(self.run_dir)  # history.csv + a logging line per generation

    def line(self, rec: dict[str, Any]) -> str:
        """A record's JSON line, encoded once (same id, generation and surrogate version = the same evaluation)."""
        key = (rec["id"], rec.get("generation"), rec.get("surrogate_version"))
        text = self._json.get(key)
        if text is None:
            text = self._json[key] = json_line(rec)
        return text

    # ------------------------------------------------------------ each generation
    def log_offspring(self, g: int, genomes: Sequence[Genome], recs: Iterable[dict[str, Any]], version: Any,
                      objectives: Sequence[str]) -> None:
        """archive.jsonl gains generation `g`'s evaluated offspring (synced with the checkpoint)."""
        lines = []
        for genome, rec in zip(genomes, recs):
            rec.update(generation=g, surrogate_version=version)
            # = genome.with_layers(active_layers).to_dict(): the pruned slots are never written, nor converted
            rec["genome"] = genome.trusted_copy(genome.active_layers, genome.precision).to_dict()
            self.records[rec["id"]] = rec
            lines.append(self.line(rec))
        append_lines(self.run_dir / run_folder.ARCHIVE, lines, sync=False)
        if self._table_rows is not None:
            self._table_rows += [genome_row(self.records[g.id], objectives) for g in genomes]
            if len(self._table_rows) > caches.CACHE_ROWS:
                self._table_rows = None

    def forget(self, keep: Iterable[str]) -> None:
        """After a generation's checkpoint: keep only the records of `keep` (the population: what the next
        generation mates, merges and checkpoints; the front's rows live in the archive, every row in archive.jsonl),
        and the newest encoded lines (an older one is encoded again when asked, to the same text)."""
        self.records = {i: self.records[i] for i in keep if i in self.records}
        caches.trim(self._json)

    def update_front(self, entries: Sequence[dict[str, Any]]) -> None:
        if [e["id"] for e in entries] != self._front_ids:  # most late generations change nothing
            self.write_front(entries, durable=False)

    def write_front(self, entries: Sequence[dict[str, Any]], durable: bool) -> None:
        """pareto.jsonl, derived from the archive the checkpoint holds: rewritten (atomically) in every generation
        that changes the front, made durable once at the end and on resume, so a generation costs no fsync for it."""
        atomic_write_text(self.run_dir / run_folder.PARETO, "".join(self.line(r) + "\n" for r in entries), durable)
        self._front_ids = [e["id"] for e in entries]

    def log_generation(self, row: dict[str, Any], eval_s: float) -> None:
        """history.jsonl (the checkpoint holds it), history.csv and the logging line gain `row`."""
        self.history.append(row)
        self._history_lines.append(json_line(row))
        append_lines(self.run_dir / run_folder.HISTORY, self._history_lines[-1:], sync=False)
        self.table_log.log(row, eval_s)

    def checkpoint(self, state: dict[str, Any], gen: int, losses: Iterable[tuple[int, str, Any]]) -> None:
        """Append the losses cached this generation to the loss cache, so a resume never re-predicts (not fsynced:
        a killed process loses nothing the OS holds, and a power loss's cut tail is predicted again), then write
        `state` (search.runner.Search.state) as the checkpoint, its records encoded once."""
        append_jsonl(self.run_dir / LOSS_CACHE, [{"generation": gen, "v": v, "id": i, "y": list(y)}
                                                 for v, i, y in losses], sync=False)
        encoded = {k: [self.line(r) for r in state.pop(k)] for k in ("archive", "pop_records")}
        state.pop("history")
        state["logs"] = self.ledger.update()  # what a resume checks the logs against (search.ledger)
        durable = time.perf_counter() - self._synced_at >= DURABLE_EVERY_S
        if durable:  # the rows it names reach the disk before it does
            sync_files([self.run_dir / run_folder.ARCHIVE, self.run_dir / LOSS_CACHE])
            self._synced_at = time.perf_counter()
        save_checkpoint(self.run_dir, state, {**encoded, "history": self._history_lines}, durable)
        if durable:
            snapshot_durable(self.run_dir)

    def sync(self) -> None:
        """Make the logs and the last checkpoint durable; it becomes the durable snapshot a resume falls back to
        when a power loss cut a log (search.ledger)."""
        sync_files(self.run_dir / name for name in (run_folder.ARCHIVE, run_folder.HISTORY, LOSS_CACHE, CHECKPOINT))
        if (self.run_dir / CHECKPOINT).is_file():
            snapshot_durable(self.run_dir)

    def write_tables(self, objectives: Sequence[str], blind: Any, odds: Any = None) -> None:
        """front.csv (with `odds`: each member's p_best and loss_group, search.odds), archive.csv beside the JSONL."""
        write_tables(self.run_dir, objectives, self._table_rows, blind, odds)

    # ------------------------------------------------------------ resume
    def resume_point(self) -> tuple[dict[str, Any], str | None] | None:
        """The checkpoint to continue from and the loss cache kept (None: intact), read only; None when there is
        none yet (killed in generation 0): then every log line is dropped and the run starts afresh."""
        if not has_checkpoint(self.run_dir):
            check_resumable(self.run_dir)
            truncate_logs(self.run_dir, -1, LOGS, self.table_log, history=[])
            return None
        st = dict(resume_state(self.run_dir, note=True))  # the newest checkpoint whose logs are intact, else refused
        cache = rebuilt_cache(self.run_dir, st, note=True)
        self._table_rows = None  # archive.csv is rebuilt from archive.jsonl, which holds earlier rows
        return st, cache

    def restore(self, st: Mapping[str, Any], gen: int, cache: str | None) -> dict[tuple[int, str], tuple]:
        """History and records from the checkpoint; the loss cache's entries up to generation `gen`."""
        self.history = list(st["history"])
        self._history_lines = [json_line(r) for r in self.history]
        self.records.update({r["id"]: r for r in st["pop_records"]})
        rows = read_jsonl(self.run_dir / LOSS_CACHE, True) if cache is None else map(loads, cache.splitlines())
        return {(int(r["v"]), r["id"]): tuple(r["y"]) for r in rows
                if int(r.get("generation", -1)) <= gen}  # newer lines are dropped by `rewind`

    def rewind(self, gen: int, st: Mapping[str, Any], cache: str | None, entries: Sequence[dict[str, Any]]) -> None:
        """Drop log lines written after the checkpoint of generation `gen`; history.jsonl and pareto.jsonl are
        written anew from it."""
        truncate_logs(self.run_dir, gen, [n for n in LOGS if n != run_folder.HISTORY], self.table_log,
                      st.get("logs"), {LOSS_CACHE: cache} if cache is not None else None, self.history)
        atomic_write_text(self.run_dir / run_folder.HISTORY, "".join(t + "\n" for t in self._history_lines))
        self.write_front(entries, durable=True)
        self.ledger.reset()  # the logs were rewritten: the next checkpoint hashes them anew
