"""Dispatch: one interface, `train(genomes) -> list[Label]`, that co-evolution and `forge-label` call.

Three implementations, chosen by `dispatch=` (conf/dispatch/):
- `local`: one process per genome, at most `workers` (default: the cores) at a time, each on its own GPU;
- `ray`: `ray.remote` tasks with `num_gpus`/`num_cpus` from config (optional extra; `dispatch_ray`);
- `submitit`: Slurm job arrays, or submitit's local executor (optional extra; `dispatch_submitit`).
All three stay importable from here (`forge.labelling.dispatch.RayTrainer`, as conf/dispatch names them).

Failure policy (all three, `forge.labelling.base`): an exception inside training yields a `failed`
label carrying the error; a worker that disappears (kill -9, OOM, node loss) is retried up to
`retries` times (logged, and counted in the store's `attempts`), then is `failed`; every genome has a
limit (`timeout_s`, counted from its start: a Slurm job waiting in the queue is not running), after which
its task is killed and `failed`. A NaN loss is `diverged`, a result. With a `store`, each genome is
claimed when its task is sent, and only as many are sent as can start (so other labellers on the store
share the rest); outcomes are written as they arrive, results are never trained again and failures
are retried by the next run (`retry`). Labels come back in the order of the input genomes.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from forge.genomes.genome import Genome
from forge.genomes.labels import Label
from forge.labelling.base import DispatchError, Trainer, _Base, _from_json, train_one
from forge.labelling.dispatch_common import check_workers as _check_workers, retried as _retried
from forge.labelling.dispatch_ray import RayTrainer
from forge.labelling.dispatch_submitit import SubmititTrainer, Training

__all__ = ["DispatchError", "Trainer", "train_one", "LocalTrainer", "RayTrainer", "SubmititTrainer", "Training",
           "make_trainer", "place"]


# ------------------------------------------------------------------------------ local
def _die_with_parent(ppid: int) -> None:
    """Linux: the kernel SIGKILLs this worker when its labeller dies (PR_SET_PDEATHSIG), so a killed
    labeller leaves no orphan training on; its claims lapse and the next run trains those genomes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: no parent-death signal
        return
    if os.getppid() != ppid and not _alive(ppid):  # the labeller died before prctl took effect
        os._exit(1)  # (under forkserver the parent is the server, which exits when the labeller dies)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's: a reused pid
        return True
    return True


def _gpus() -> list[str]:
    """The GPUs this node gives its workers: CUDA_VISIBLE_DEVICES' list when set, else CUDA's device count (torch
    only where already imported: counting does not start CUDA, so forked workers stay safe); none without CUDA."""
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if seen is not None:
        return [d.strip() for d in seen.split(",") if d.strip()]
    torch = __import__("sys").modules.get("torch")
    try:
        return [str(i) for i in range(torch.cuda.device_count())] if torch is not None else []
    except Exception:  # a broken CUDA install: the workers find out for themselves
        return []


def _child(conn, genome_dict: dict, spec: dict, ppid: int, device: str | None = None) -> None:
    _die_with_parent(ppid)
    if device is not None:  # a multi-GPU node: this worker's own device, not every worker on the first one
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    try:
        conn.send(train_one(genome_dict, spec))
    finally:
        conn.close()


START_METHODS = ("auto", "fork", "forkserver", "spawn")


def start_method(asked: str) -> str:
    """`auto`: fork (warm children, the parent's imports shared) when this is the process's only thread, else
    forkserver. Forking while another thread runs (an asynchronous co-evolution's other labellers and its search,
    a progress bar's refresh) copies the locks that thread holds, such as stderr's, into a child that can never
    take them: the training would hang until its timeout."""
    if asked != "auto":
        return asked
    return "fork" if threading.active_count() == 1 else "forkserver"


PRELOAD = ("lightning.pytorch", "forge.lm.model", "forge.labelling.base")  # what a training imports first


def _preload(corpus_cfg: Mapping[str, Any]) -> None:
    """Import torch/Lightning and read the corpus once in the parent, so forked children start warm."""
    try:
        import lightning.pytorch  # noqa: F401

        import forge.lm.model  # noqa: F401
        from forge.labelling.corpus import build_corpus

        build_corpus(dict(corpus_cfg))
    except Exception:  # a broken corpus is reported per genome by the child, as an inf label
        pass


@dataclass
class LocalTrainer(_Base):
    """A process per genome, `workers` at a time (default: the cores); kill on timeout, retry lost ones."""

    workers: int | None = None
    start_method: str = "auto"  # auto: fork when the labeller is its process's only thread, else forkserver
    poll_s: float = 0.5
    preload: bool = True  # fork: import torch/Lightning and read the corpus once in the parent (warm children);
    #                       forkserver: import them once in the server
    first_slot: int = 0  # where this trainer's slots start on the node's GPUs (an asynchronous co-evolution's
    #                      labeller threads each train through their own copy: one GPU each, not all on the first)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_workers(self.workers, "one per core")
        if self.start_method not in START_METHODS:
            raise DispatchError(f"dispatch.start_method = {self.start_method!r} is unknown; allowed: "
                                f"{', '.join(START_METHODS)}")

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        method = start_method(self.start_method)
        ctx = mp.get_context(method)
        if method == "fork" and self.preload:
            _preload(self.corpus)
        elif method == "forkserver" and self.preload:  # the server imports them once, not each child
            ctx.set_forkserver_preload(list(PRELOAD))
        n_workers = self.workers or os.cpu_count() or 1
        gpus = _gpus()
        queue, running, attempts = list(todo), {}, {g.id: 0 for g in todo}
        try:
            while queue or running:
                while queue and len(running) < n_workers:
                    g = queue.pop(0)
                    if attempts[g.id] == 0 and not self._take(g):
                        continue  # stored already, or another labeller holds it
                    attempts[g.id] += 1
                    busy = {r[4] for r in running.values()}
                    slot = min(i for i in range(n_workers) if i not in busy)
                    device = gpus[(self.first_slot + slot) % len(gpus)] if len(gpus) > 1 else None
                    rx, tx = ctx.Pipe(duplex=False)
                    p = ctx.Process(target=_child, args=(tx, g.to_dict(), self.spec, os.getpid(), device),
                                    daemon=True)
                    p.start()
                    tx.close()
                    running[g.id] = (p, rx, g, time.monotonic(), slot)
                if running:
                    mp.connection.wait([r[1] for r in running.values()] + [r[0].sentinel for r in running.values()],
                                       timeout=self.poll_s)
                for gid in list(running):
                    self._check(running, gid, queue, attempts, emit)
                self._heartbeat()
        finally:
            for p, rx, *_ in running.values():
                p.kill()
                rx.close()

    def _check(self, running: dict, gid: str, queue: list, attempts: dict, emit: Callable) -> None:
        p, rx, g, t0, _ = running[gid]
        msg = None
        if rx.poll():
            try:
                msg = rx.recv()
            except (EOFError, OSError):
                msg = None
        if msg is not None:
            emit(_from_json(msg))
        elif p.is_alive() and time.monotonic() - t0 <= self.timeout_s:
            return  # still working
        elif p.is_alive():
            p.kill()
            emit(self._failed(g, f"timeout: no result after {self.timeout_s:g} s (killed)"))
        elif attempts[gid] <= self.retries:
            _retried(self, g, f"worker lost (exit code {p.exitcode})", attempts[gid])
            queue.append(g)
        else:
            emit(self._failed(g, f"worker lost (exit code {p.exitcode}) on all {attempts[gid]} attempts"))
        p.join(timeout=5)
        rx.close()
        del running[gid]


def place(trainer: Any, root: str | Path | None) -> Any:
    """Put what a trainer writes beside it (submitit's job folder) under `root`, unless it was given one."""
    if root is not None and callable(getattr(trainer, "place_under", None)):
        trainer.place_under(root)
    return trainer


DISPATCHERS = {"local": LocalTrainer, "ray": RayTrainer, "submitit": SubmititTrainer}


def make_trainer(kind: str, protocol: Mapping[str, Any], corpus: Mapping[str, Any], **options: Any) -> _Base:
    """Build a trainer by name (conf/dispatch/<kind>.yaml supplies `options`)."""
    if kind not in DISPATCHERS:
        raise DispatchError(f"dispatch = {kind!r} is unknown; allowed: {', '.join(DISPATCHERS)}")
    try:
        return DISPATCHERS[kind](protocol=dict(protocol), corpus=dict(corpus), **options)
    except TypeError as e:
        raise DispatchError(f"dispatch={kind}: {e}") from None

