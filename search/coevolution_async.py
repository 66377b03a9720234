"""Asynchronous co-evolution (issue 54, `search.coevolve.mode=async`): W trainings in flight, no barrier per event.

Synchronous co-evolution (search.coevolution) trains an event's b picks to the last one, then refits, while the
search waits and so do the workers between events: with W > b GPUs, W − b of them never work, and every worker
idles while the slowest pick of a batch finishes and while the search runs its next K generations.
Here, at each event (every K generations, the refit schedule):

1. hand out max(b, free workers) new picks (the same acquisition, never a genome labelled, picked or in flight),
   queued first in first out to W labeller threads, each training one genome at a time through its own copy
   of the dispatcher (W = the dispatcher's `workers`);
2. wait only until a worker is free (fewer than W picks outstanding), not for the event's picks;
3. fold in every label that has arrived (in hand-out order), then refit the surrogate on the whole buffer.

What is still training when the search ends is waited for and folded in (`finish`), so the run spends every label
it handed out. At W = 1 step 2 waits for every pick, so the run is the synchronous one: its fronts, archive,
history and labels.jsonl are byte for byte those of `mode=sync` (coevolution.jsonl adds `folded` and
`in_flight`). At W > 1 which labels an event folds in depends on which trainings finished first, so a seed no
longer fixes the front. The picks not yet folded are in every checkpoint and are handed out again on resume;
trainings that finished before a kill are in the run's label store, which gives them back untrained, so a
resume neither loses nor repeats a training at any W.
"""
from __future__ import annotations

import copy
import queue
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from forge.disk.io import json_num
from forge.genomes.genome import genome_from_dict
from forge.genomes.labels import Label
from search.coevolution import CoEvolution, SurrogateSlot, Survivors
from search.errors import SearchConfigError

MODES = ("sync", "async")


class Labeller:
    """W threads, each training one genome at a time on its own shallow copy of `trainer` (a Forge dispatcher's
    `train` keeps per-call state, so one object is not shared by two calls in flight); first in, first out.
    dispatch=local's `start_method: auto` starts their workers from a fork server, not by forking the threads."""

    def __init__(self, trainer: Any, workers: int):
        self.trainer, self.workers = trainer, int(workers)
        self._todo: queue.Queue = queue.Queue()
        self._done: dict[int, Label] = {}
        self._cv = threading.Condition()
        self._threads: list[threading.Thread] = []
        self.trainers: list[Any] = []  # each thread's copy of the trainer
        self._error: BaseException | None = None
        self.busy_s = 0.0  # worker-seconds spent inside train()

    def _start(self) -> None:
        store = getattr(self.trainer, "store", None)
        if store is not None and hasattr(store, "engine"):
            store.engine  # opened once here, not raced by the threads
        for k in range(self.workers):
            mine = copy.copy(self.trainer)
            if hasattr(mine, "first_slot"):  # dispatch=local: thread k's trainings on the node's k-th GPU
                mine.first_slot = k
            self.trainers.append(mine)
            t = threading.Thread(target=self._work, args=(mine,), daemon=True, name=f"forge-labeller-{k}")
            t.start()
            self._threads.append(t)

    def _work(self, trainer: Any) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            seq, genome = item
            t0 = time.perf_counter()
            try:
                lab = trainer.train([genome])[0]
            except BaseException as e:  # noqa: BLE001  (a bug in the dispatcher: raised in the search's thread)
                with self._cv:
                    self._error = e
                    self._cv.notify_all()
                return
            with self._cv:
                self.busy_s += time.perf_counter() - t0
                self._done[seq] = lab
                self._cv.notify_all()

    def submit(self, items: list[tuple[int, Any]]) -> None:
        if items and not self._threads:
            self._start()
        for item in items:
            self._todo.put(item)

    def collect(self, outstanding: set[int], below: int) -> dict[int, Label]:
        """Wait until fewer than `below` of the `outstanding` hand-outs are unfinished; take every finished one."""
        with self._cv:
            while self._error is None and len(outstanding - self._done.keys()) >= below:
                self._cv.wait(timeout=1.0)
            if self._error is not None:
                raise self._error
            got = {s: self._done.pop(s) for s in list(self._done) if s in outstanding}
        return got

    def close(self, wait: bool = True) -> None:
        """Drop what has not started; `wait`: let the trainings in flight end (their results reach the store)."""
        try:
            while True:
                self._todo.get_nowait()
        except queue.Empty:
            pass
        for _ in self._threads:
            self._todo.put(None)
        for t in self._threads if wait else ():
            t.join()
        self._threads = []


def workers_of(trainer: Any) -> int:
    """W: the dispatcher's `workers` (local: null is one per core; ray: what the cluster fits); 1 for a trainer
    that does not say."""
    import os

    w = getattr(trainer, "workers", None)
    if w is None and callable(getattr(trainer, "slots", None)):
        w = trainer.slots()
    if w is None and type(trainer).__name__ == "LocalTrainer":
        w = os.cpu_count() or 1
    return max(1, int(w or 1))


class AsyncCoEvolution(CoEvolution):
    """CoEvolution without the per-event barrier; `pending` (handed out, not folded in) is checkpointed."""

    def __init__(self, *args: Any, workers: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.stop is not None:
            raise SearchConfigError("search.coevolve.mode=async does not run the stopping rule yet; allowed: "
                                    "search.coevolve.stop=null with mode=async, or mode=sync")
        self.workers = workers_of(self.trainer) if workers is None else int(workers)
        self.pending: list[dict[str, Any]] = []  # {"seq", "genome", "generation", "mu"}, in hand-out order
        self.seq = 0
        self._lab: Labeller | None = None
        self._unsent: list[dict[str, Any]] = []  # restored from a checkpoint, not yet handed to the labeller

    @property
    def labeller(self) -> Labeller:
        if self._lab is None:
            self._lab = Labeller(self.trainer, self.workers)
        return self._lab

    def fire(self, g: int, pop: Survivors, slot: SurrogateSlot, run_dir: Path) -> dict[str, Any]:
        picks, _, seen = self._choose(g, pop, slot, max(self.b, self.workers - len(self.pending)))
        new = [{"seq": self.seq + k, "genome": x.to_dict(), "generation": g, "mu": float(m)}
               for k, (x, m) in enumerate(zip(picks, seen["mu"]))]
        self.seq += len(new)
        self.pending += new
        if new:
            self._tell(f"generation {g}: co-evolution hands out {len(new)} picks ({len(self.pending)} in flight "
                       f"on {self.workers} workers)")
        self.labeller.submit([(p["seq"], genome_from_dict(p["genome"])) for p in new])
        event = self._collect(g, slot, Path(run_dir), self.workers)
        event.update(picked=[x.id for x in picks], exploit=seen["exploit"], explore=seen["explore"])
        return self._log(event, seen["sigma"], run_dir)

    def _collect(self, g: int, slot: SurrogateSlot, run_dir: Path, below: int) -> dict[str, Any]:
        got = self.labeller.collect({p["seq"] for p in self.pending}, below)
        folded = [p for p in self.pending if p["seq"] in got]
        self.pending = [p for p in self.pending if p["seq"] not in got]
        labels = [got[p["seq"]] for p in folded]
        for lab in labels:
            self._tell(f"generation {g}: co-evolution trained {lab.genome_id[:8]}: loss {lab.label:.3f}")
        event = self._fold(g, slot, run_dir, labels, np.array([p["mu"] for p in folded]))
        event["labels"] = [json_num(lab.label) for lab in labels]
        event["folded"] = [lab.genome_id for lab in labels]
        return event

    def _log(self, event: dict[str, Any], sigma: Any, run_dir: Path) -> dict[str, Any]:
        """The synchronous event's keys in its order, then what only an asynchronous event has."""
        keys = ("generation", "buffer_size", "mae_before", "mae_after", "surrogate_version", "refit", "picked",
                "exploit", "explore", "labels", "dropped")
        out = {k: event[k] for k in keys if k in event}
        out.update(sigma=[float(v) for v in sigma], folded=event["folded"], in_flight=len(self.pending))
        return self._log_event(out, run_dir)

    def finish(self, g: int, slot: SurrogateSlot, run_dir: Path) -> dict[str, Any] | None:
        """The search is over: wait for every pick still training, fold it in and refit once more."""
        if not self.pending:
            return None
        self._tell(f"generation {g}: co-evolution waits for the {len(self.pending)} picks still training")
        event = self._collect(g, slot, Path(run_dir), 1)
        event.update(picked=[], exploit=[], explore=[])
        return self._log(event, [], run_dir)

    def close(self, wait: bool = True) -> None:
        """`wait`: the trainings in flight end first (a stop); else (Ctrl-C, an error) they die with the process,
        their claims lapse after `lease_s` and a resume trains them."""
        if self._lab is not None:
            self._lab.close(wait)
            self._lab = None

    # ------------------------------------------------------------ resume
    def state(self) -> dict[str, Any]:
        return {**super().state(), "pending": list(self.pending), "seq": self.seq}

    def restore(self, st: dict[str, Any], slot: SurrogateSlot, run_dir: Path | None = None) -> None:
        """As CoEvolution's, then the picks in flight at the checkpoint are handed out again: the run's label
        store returns those that finished since, the rest train now."""
        super().restore(st, slot, run_dir)
        self.pending = [dict(p, genome=dict(p["genome"]), seq=int(p["seq"])) for p in st.get("pending") or []]
        self.seq = int(st.get("seq", 0))
        self._unsent = list(self.pending)  # sent when the run starts (`start`), not by a resume that is refused

    def start(self) -> None:
        """The run starts: the picks a resume found in flight train again (or come back from the store) now."""
        unsent, self._unsent = self._unsent, []
        self.labeller.submit([(p["seq"], genome_from_dict(p["genome"])) for p in unsent])
