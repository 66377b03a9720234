"""Dispatch: one interface, `train(genomes) -> list[Label]`, that co-evolution and `forge-label` call.

Three implementations, chosen by `dispatch=` (conf/dispatch/):
- `local`: one process per genome, at most `workers` (default: the cores) at a time;
- `ray`: `ray.remote` tasks with `num_gpus`/`num_cpus` from config (optional extra);
- `submitit`: Slurm jobs, or submitit's local executor (optional extra).

Failure policy (all three, `forge.labelling.base`): an exception inside training yields a `failed`
label carrying the error; a worker that disappears (kill -9, OOM, node loss) is retried up to
`retries` times, then is `failed`; every wait has a timeout (`timeout_s` per genome), after which the
task is killed and `failed`. A NaN loss is `diverged`, a result. With a `store`, each genome is claimed
before training, outcomes are written as they arrive, results are never trained again and failures
are retried by the next run (`retry`). Labels come back in the order of the input genomes.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from forge.genomes.genome import Genome
from forge.genomes.labels import Label
from forge.labelling.base import DispatchError, Trainer, _Base, _from_json, train_one

__all__ = ["DispatchError", "Trainer", "train_one", "LocalTrainer", "RayTrainer", "SubmititTrainer", "make_trainer"]


# ------------------------------------------------------------------------------ local
def _die_with_parent(ppid: int) -> None:
    """Linux: the kernel SIGKILLs this worker when its labeller dies (PR_SET_PDEATHSIG), so a killed
    labeller leaves no orphan training on; its claims lapse and the next run trains those genomes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: no parent-death signal
        return
    if os.getppid() != ppid:  # the parent died before prctl took effect
        os._exit(1)


def _child(conn, genome_dict: dict, spec: dict, ppid: int) -> None:
    _die_with_parent(ppid)
    try:
        conn.send(train_one(genome_dict, spec))
    finally:
        conn.close()


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
    start_method: str = "fork"
    poll_s: float = 0.5
    preload: bool = True  # fork: import torch/Lightning and read the corpus once in the parent (warm children)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise DispatchError(f"dispatch.workers = {self.workers!r} is invalid; allowed: a positive int, "
                                "or null for one per core")

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        ctx = mp.get_context(self.start_method)
        if self.start_method == "fork" and self.preload:
            _preload(self.corpus)
        n_workers = self.workers or os.cpu_count() or 1
        queue, running, attempts = list(todo), {}, {g.id: 0 for g in todo}
        try:
            while queue or running:
                while queue and len(running) < n_workers:
                    g = queue.pop(0)
                    if attempts[g.id] == 0 and not self._take(g):
                        continue  # stored already, or another labeller holds it
                    attempts[g.id] += 1
                    rx, tx = ctx.Pipe(duplex=False)
                    p = ctx.Process(target=_child, args=(tx, g.to_dict(), self.spec, os.getpid()), daemon=True)
                    p.start()
                    tx.close()
                    running[g.id] = (p, rx, g, time.monotonic())
                if running:
                    mp.connection.wait([r[1] for r in running.values()] + [r[0].sentinel for r in running.values()],
                                       timeout=self.poll_s)
                for gid in list(running):
                    self._check(running, gid, queue, attempts, emit)
                self._heartbeat()
        finally:
            for p, rx, _, _ in running.values():
                p.kill()
                rx.close()

    def _check(self, running: dict, gid: str, queue: list, attempts: dict, emit: Callable) -> None:
        p, rx, g, t0 = running[gid]
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
            queue.append(g)  # lost worker: retry
        else:
            emit(self._failed(g, f"worker lost (exit code {p.exitcode}) on all {attempts[gid]} attempts"))
        p.join(timeout=5)
        rx.close()
        del running[gid]


# -------------------------------------------------------------------------------- ray
@dataclass
class RayTrainer(_Base):
    """`ray.remote` tasks; `address="auto"` joins a cluster, null starts a local one."""

    address: str | None = None
    num_gpus: float = 0.0
    num_cpus: float = 1.0
    init_kwargs: dict[str, Any] = field(default_factory=dict)

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        try:
            import ray
            from ray.exceptions import GetTimeoutError, RayError
        except ImportError:
            raise DispatchError("dispatch=ray needs the optional package ray: pip install -e '.[ray]' in the Forge "
                                "clone") from None
        if not ray.is_initialized():
            # null means a local instance of our own: Ray's own None would join any cluster another process
            # started on this machine (its /tmp/ray/ray_current_cluster), which is not the one asked for
            ray.init(address=self.address or "local", ignore_reinit_error=True, log_to_driver=False,
                     **dict(self.init_kwargs))
        remote = ray.remote(num_gpus=self.num_gpus, num_cpus=self.num_cpus, max_retries=self.retries)(train_one)
        refs = {remote.remote(g.to_dict(), self.spec): g for g in todo if self._take(g)}
        deadline = time.monotonic() + self.timeout_s * max(1, len(todo))
        while refs:
            self._heartbeat()
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=max(0.1, min(10.0, deadline - time.monotonic())))
            for ref in ready:
                g = refs.pop(ref)
                try:
                    emit(_from_json(ray.get(ref, timeout=60)))
                except (RayError, GetTimeoutError) as e:  # lost worker after max_retries, or task error
                    emit(self._failed(g, f"ray task failed after {self.retries} retries: {type(e).__name__}: {e}"[:2000]))
            if time.monotonic() > deadline:
                for ref, g in refs.items():
                    ray.cancel(ref, force=True)
                    emit(self._failed(g, f"timeout: no result within {self.timeout_s:g} s per genome (cancelled)"))
                refs.clear()


# ----------------------------------------------------------------------------- submitit
@dataclass
class SubmititTrainer(_Base):
    """Slurm jobs through submitit (`cluster: slurm`), or its `local`/`debug` executors for testing."""

    folder: str = "submitit_logs/%j"
    cluster: str | None = None  # None = auto (slurm when sbatch exists, else local)
    parameters: dict[str, Any] = field(default_factory=dict)
    poll_s: float = 2.0

    def _executor(self):
        try:
            import submitit
        except ImportError:
            raise DispatchError("dispatch=submitit needs the optional package submitit: "
                                "pip install -e '.[slurm]' in the Forge clone") from None
        ex = submitit.AutoExecutor(folder=self.folder, cluster=self.cluster)
        ex.update_parameters(timeout_min=max(1, int(self.timeout_s // 60) + 1), **dict(self.parameters))
        return ex

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        ex = self._executor()
        jobs = {g.id: (ex.submit(train_one, g.to_dict(), self.spec), g, 1, time.monotonic())
                for g in todo if self._take(g)}
        while jobs:
            time.sleep(self.poll_s)
            self._heartbeat()
            for gid in list(jobs):
                job, g, attempt, t0 = jobs[gid]
                if not job.done():
                    if time.monotonic() - t0 > self.timeout_s + 60:
                        job.cancel(check=False)
                        emit(self._failed(g, f"timeout: job {job.job_id} gave no result after {self.timeout_s:g} s"))
                        del jobs[gid]
                    continue
                del jobs[gid]
                try:
                    emit(_from_json(job.result()))
                except Exception as e:  # the job died without a result: lost worker
                    if attempt <= self.retries:
                        jobs[gid] = (ex.submit(train_one, g.to_dict(), self.spec), g, attempt + 1, time.monotonic())
                    else:
                        emit(self._failed(g, f"job lost on all {attempt} attempts: {type(e).__name__}: {e}"[:2000]))


DISPATCHERS = {"local": LocalTrainer, "ray": RayTrainer, "submitit": SubmititTrainer}


def make_trainer(kind: str, protocol: Mapping[str, Any], corpus: Mapping[str, Any], **options: Any) -> _Base:
    """Build a trainer by name (conf/dispatch/<kind>.yaml supplies `options`)."""
    if kind not in DISPATCHERS:
        raise DispatchError(f"dispatch = {kind!r} is unknown; allowed: {', '.join(DISPATCHERS)}")
    try:
        return DISPATCHERS[kind](protocol=dict(protocol), corpus=dict(corpus), **options)
    except TypeError as e:
        raise DispatchError(f"dispatch={kind}: {e}") from None

