"""Independent, seeded jobs in spawned processes with one torch thread each.

Why: one small job (a 200 k-parameter encoder, one `compare` split) is bound by per-op overhead and cannot
keep two cores busy, but two independent jobs can. Each worker runs torch with one thread, so a job's
result equals running it in this process under `torch.set_num_threads(1)`: its seed decides the result,
not the worker count. Spawned (not forked) workers start with a clean torch thread pool.
"""
from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence

import torch

from forge.errors import UserError

log = logging.getLogger(__name__)


def map_spawned(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int,
                done: Callable[[int], None] | None = None) -> list[Any]:
    """[fn(*job) for job in jobs], in order, on `workers` spawned processes (fn must be importable); `done(i)` is
    called as job i finishes, in the order jobs finish (a progress display).

    workers = 1 runs here with the caller's torch threads. If the processes cannot start (a script
    without an `if __name__ == "__main__":` guard, a sandbox without fork/exec), the jobs run here with
    one torch thread: slower, same results. A job's own exception is re-raised as it is."""
    if workers < 1:
        raise UserError(f"workers = {workers}; allowed: an integer >= 1")
    if workers == 1 or len(jobs) <= 1:
        return _in_order(fn, jobs, done)
    ctx = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx, initializer=torch.set_num_threads,
                                 initargs=(1,)) as pool:
            futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
            results: dict[int, Any] = {}
            for f in as_completed(futures):
                results[futures[f]] = f.result()
                if done is not None:
                    done(futures[f])
            return [results[i] for i in range(len(jobs))]
    except BrokenProcessPool as err:
        log.warning("worker processes failed (%s); running %d jobs in this process with one torch thread",
                    err, len(jobs))
        return _one_thread(fn, jobs, done)


def _in_order(fn: Callable[..., Any], jobs: Sequence[tuple], done: Callable[[int], None] | None) -> list[Any]:
    out = []
    for i, job in enumerate(jobs):
        out.append(fn(*job))
        if done is not None:
            done(i)
    return out


def _one_thread(fn: Callable[..., Any], jobs: Sequence[tuple], done: Callable[[int], None] | None = None) -> list[Any]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _in_order(fn, jobs, done)
    finally:
        torch.set_num_threads(threads)
