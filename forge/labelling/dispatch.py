"""Dispatch: one interface, `train(genomes) -> list[Label]`, that co-evolution and `forge-label` call.

Three implementations, chosen by `dispatch=` (conf/dispatch/):
- `local`: one process per genome, at most `workers` (default: the cores) at a time;
- `ray`: `ray.remote` tasks with `num_gpus`/`num_cpus` from config (optional extra);
- `submitit`: Slurm jobs, or submitit's local executor (optional extra).

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

import logging
import multiprocessing as mp
import os
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from forge.genomes.genome import Genome, genome_from_dict
from forge.genomes.labels import Label
from forge.labelling.base import DispatchError, Trainer, _Base, _from_json, train_one
from forge.labelling.store import RESULTS

log = logging.getLogger(__name__)

__all__ = ["DispatchError", "Trainer", "train_one", "LocalTrainer", "RayTrainer", "SubmititTrainer", "make_trainer"]


def _check_workers(workers: Any, default: str) -> None:
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DispatchError(f"dispatch.workers = {workers!r} is invalid; allowed: a positive int, or null for {default}")


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
        _check_workers(self.workers, "one per core")

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        ctx = mp.get_context(self.start_method)
        if self.start_method == "fork" and self.preload:
            _preload(self.corpus)
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
                    device = gpus[slot % len(gpus)] if len(gpus) > 1 else None
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


# -------------------------------------------------------------------------------- ray
@dataclass
class RayTrainer(_Base):
    """`ray.remote` tasks; `address="auto"` joins a cluster, null starts a local one.

    At most `workers` tasks at a time (null: as many as the cluster's CPUs/GPUs fit at `num_cpus`/`num_gpus`
    each), claimed as they are submitted, so a task starts when it is sent and its `timeout_s` counts from
    there; a genome not yet sent is not claimed, and another labeller on the store may take it. A lost
    worker or node is resubmitted here (not inside Ray), so each retry is logged and counted in `attempts`."""

    address: str | None = None
    num_gpus: float = 0.0
    num_cpus: float = 1.0
    workers: int | None = None
    init_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_workers(self.workers, "what the cluster fits")

    def _slots(self, ray) -> int:
        """Tasks the cluster runs at once: its CPUs (and GPUs) over what one task asks for."""
        total = ray.cluster_resources()
        fits = [int(total.get(k, 0) // n + 1e-9) for k, n in (("CPU", self.num_cpus), ("GPU", self.num_gpus)) if n > 0]
        return max(1, min(fits)) if fits else max(1, int(total.get("CPU", 1)))

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        try:
            import ray
        except ImportError:
            raise DispatchError("dispatch=ray needs the optional package ray: pip install -e '.[ray]' in the Forge "
                                "clone") from None
        if not ray.is_initialized():
            # null means a local instance of our own: Ray's own None would join any cluster another process
            # started on this machine (its /tmp/ray/ray_current_cluster), which is not the one asked for
            ray.init(address=self.address or "local", ignore_reinit_error=True, log_to_driver=False,
                     **dict(self.init_kwargs))
        remote = ray.remote(num_gpus=self.num_gpus, num_cpus=self.num_cpus, max_retries=0)(train_one)
        cap = self.workers or self._slots(ray)
        queue, refs = [(g, 1) for g in todo], {}  # ref -> (genome, attempt, start)
        try:
            while queue or refs:
                while queue and len(refs) < cap:
                    g, attempt = queue.pop(0)
                    if attempt > 1 or self._take(g):
                        refs[remote.remote(g.to_dict(), self.spec)] = (g, attempt, time.monotonic())
                if not refs:
                    continue
                self._heartbeat()
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=min(1.0, self.timeout_s))
                for ref in ready:
                    self._collect(ray, ref, refs.pop(ref), queue, emit)
                for ref, (g, _, t0) in list(refs.items()):
                    if time.monotonic() - t0 > self.timeout_s:
                        ray.cancel(ref, force=True)
                        del refs[ref]
                        emit(self._failed(g, f"timeout: no result after {self.timeout_s:g} s (cancelled)"))
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)

    def _collect(self, ray, ref, entry: tuple, queue: list, emit: Callable[[Label], None]) -> None:
        from ray.exceptions import GetTimeoutError, RayError

        g, attempt, _ = entry
        try:
            emit(_from_json(ray.get(ref, timeout=60)))
        except (RayError, GetTimeoutError) as e:  # the worker or its node was lost
            why = f"ray task lost: {type(e).__name__}: {e}"[:2000]
            if attempt <= self.retries:
                _retried(self, g, why, attempt)
                queue.insert(0, (g, attempt + 1))
            else:
                emit(self._failed(g, f"{why} (on all {attempt} attempts)"))


# ----------------------------------------------------------------------------- submitit
# Slurm states of a job that has not started: its time limit does not run yet (sacct's "UNKNOWN" included:
# submitit reports it until the first sacct answer).
QUEUED = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
                    "SUSPENDED", "UNKNOWN", "READY"})


@dataclass
class _Job:
    job: Any
    genome: Genome
    attempt: int
    started: float | None = None  # when it was first seen running: its timeout counts from here, not from the queue


def _limit_min(timeout_s: float) -> int:
    """The Slurm time limit for a genome's `timeout_s`, in whole minutes (at least one more)."""
    return max(1, int(timeout_s // 60) + 1)


@dataclass
class SubmititTrainer(_Base):
    """Slurm jobs through submitit (`cluster: slurm`), or its `local`/`debug` executors for testing.

    `timeout_s` limits a job's running time: a job still PENDING in the queue is not timed out. Jobs are
    submitted (and their genomes claimed) as they can start: `workers` at a time when set; otherwise one
    more batch only while none of ours waits in the queue (doubling with the jobs running; the local
    executor: one per core). A job lost without a result is resubmitted, logged and counted in `attempts`."""

    folder: str = "submitit_logs/%j"
    cluster: str | None = None  # None = auto (slurm when sbatch exists, else local)
    parameters: dict[str, Any] = field(default_factory=dict)
    poll_s: float = 2.0
    workers: int | None = None
    grace_s: float = 60.0  # past timeout_s, the time Slurm has to end the job itself before it is cancelled
    # the run or labelling output folder a relative `folder` lies under (None: the current one); set by `place`,
    # never from a config (a saved run names no folder outside itself this way)
    root: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_workers(self.workers, "as many as the queue starts")

    @property
    def where(self) -> Path:
        """submitit's job folder: a relative `folder` under the output folder (`root`), not the current one."""
        return Path(self.root) / self.folder if self.root and not os.path.isabs(self.folder) else Path(self.folder)

    def _executor(self):
        try:
            import submitit
        except ImportError:
            raise DispatchError("dispatch=submitit needs the optional package submitit: "
                                "pip install -e '.[slurm]' in the Forge clone") from None
        ex = submitit.AutoExecutor(folder=str(self.where), cluster=self.cluster)
        ex.update_parameters(timeout_min=_limit_min(self.timeout_s), **dict(self.parameters))
        return ex

    def _kept(self, g: Genome) -> Path:
        """Where g's job leaves its label, beside submitit's job folders (a name built from ids, not read)."""
        return Path(str(self.where).split("%j")[0] or ".") / "labels" / f"{g.id}-{self.fingerprint()}.json"

    def _orphan(self, g: Genome) -> Label | None:
        """The result a killed labeller's job left for `g` (jobs outlive their labeller): stored, not retrained."""
        path = self._kept(g)
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
                return None
            lab = _from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable or torn: trained again
        return lab if lab.genome_id == g.id and lab.status in RESULTS else None

    def _submit(self, ex, g: Genome, attempt: int) -> _Job:
        job = ex.submit(Training(_limit_min(self.timeout_s) * 60), g.to_dict(), self.spec, str(self._kept(g)))
        return _Job(job, g, attempt)

    def _room(self, ex, jobs: dict[str, _Job]) -> int:
        """How many more jobs to submit now."""
        if self.workers is not None:
            return self.workers - len(jobs)
        if getattr(ex, "cluster", "") in ("local", "debug"):
            return (os.cpu_count() or 1) - len(jobs)
        if any(j.started is None for j in jobs.values()):
            return 0  # one of ours waits in the queue: the cluster is full for us, claim nothing more
        return max(1, len(jobs))

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        ex = self._executor()
        queue, jobs = list(todo), {}
        try:
            while queue or jobs:
                room = self._room(ex, jobs)
                batch = []
                while queue and room > 0:
                    g = queue.pop(0)
                    if not self._take(g):
                        continue
                    kept = self._orphan(g)
                    if kept is not None:
                        log.warning("SubmititTrainer: genome %s: stored the label its earlier job left in %s",
                                    g.id, self._kept(g).parent)
                        emit(kept)
                        continue
                    batch.append(g)
                    room -= 1
                with ex.batch() if len(batch) > 1 and hasattr(ex, "batch") else nullcontext():  # one job array
                    for g in batch:
                        jobs[g.id] = self._submit(ex, g, 1)
                if not jobs:
                    continue
                time.sleep(self.poll_s)
                self._heartbeat()
                for gid in list(jobs):
                    self._poll(ex, jobs, gid, emit)
        except BaseException:
            for j in jobs.values():
                j.job.cancel(check=False)
            raise
        finally:
            _drop_if_empty(self.where)

    def _poll(self, ex, jobs: dict[str, _Job], gid: str, emit: Callable[[Label], None]) -> None:
        j, now = jobs[gid], time.monotonic()
        if not j.job.done():
            if j.job.state in QUEUED:
                j.started = None  # waiting (again, once Slurm requeued it after a preemption): no running time
            elif j.started is None:
                j.started = now
            if j.started is not None and now - j.started > self.timeout_s + self.grace_s:
                j.job.cancel(check=False)
                del jobs[gid]
                emit(self._failed(j.genome, f"timeout: job {j.job.job_id} ran {now - j.started:.0f} s "
                                            f"without a result (limit {self.timeout_s:g} s of running time)"))
            return
        del jobs[gid]
        try:
            emit(_from_json(j.job.result()))
        except Exception as e:  # the job died without a result: lost worker
            why = f"job {j.job.job_id} lost: {type(e).__name__}: {e}"[:2000]
            if j.job.state == "TIMEOUT":  # Slurm ended it at its limit: trained again, it would end there again
                emit(self._failed(j.genome, f"timeout: job {j.job.job_id} reached its limit of {self.timeout_s:g} s "
                                            "of running time (Slurm's TIMEOUT)"))
            elif j.attempt <= self.retries:
                _retried(self, j.genome, why, j.attempt)
                jobs[gid] = self._submit(ex, j.genome, j.attempt + 1)
            else:
                emit(self._failed(j.genome, f"{why} (on all {j.attempt} attempts)"))


def _drop_if_empty(folder: Path) -> None:
    """submitit makes the folder with `%j` in its name literally (for its submission files): gone once empty."""
    try:
        if "%" in folder.name and folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
    except OSError:
        pass


def _train_and_keep(genome_dict: dict, spec: dict, keep: str) -> str:
    """A Slurm job: train, and leave a result in `keep` too, so a rerun after its labeller was killed stores it.
    A result already kept there (the job was preempted after training, then requeued) is returned, not retrained."""
    try:
        done = _from_json(Path(keep).read_text(encoding="utf-8"))
        if done.status in RESULTS and done.genome_id == genome_from_dict(genome_dict).id:
            return done.to_json()
    except (OSError, ValueError, KeyError, TypeError):
        pass
    out = train_one(genome_dict, spec)
    if _from_json(out).status in RESULTS:
        from forge.disk.io import atomic_write_text

        os.makedirs(os.path.dirname(keep), exist_ok=True)
        atomic_write_text(keep, out)
    return out


class Training:
    """The callable a Slurm job runs, checkpointable in submitit's sense (`submitit.helpers.Checkpointable`'s
    protocol: a `checkpoint` method): a preempted job is requeued by Slurm itself, in its place in the job array,
    and continues from what it kept (a finished training's label is not trained again). A job stopped at its own
    time limit is not requeued with that same limit: it is reported as a timeout."""

    MARGIN_S = 300.0  # submitit signals a job 90 s before its limit: a signal earlier than this is a preemption

    def __init__(self, limit_s: float) -> None:
        self.limit_s, self.started = float(limit_s), None

    def __call__(self, genome_dict: dict, spec: dict, keep: str) -> str:
        self.started = time.time()
        return _train_and_keep(genome_dict, spec, keep)

    def checkpoint(self, genome_dict: dict, spec: dict, keep: str):
        """submitit calls this on Slurm's preemption or time-limit signal: requeue unless the limit was reached."""
        if self.started is not None and time.time() - self.started >= self.limit_s - self.MARGIN_S:
            return None  # its own limit: requeued, it would run out again
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(Training(self.limit_s), genome_dict, spec, keep)


def _retried(trainer: _Base, g: Genome, why: str, attempt: int) -> None:
    """A lost worker or job tried again: said in the log, and counted in the store's `attempts`."""
    log.warning("%s: genome %s: %s; trying again (attempt %d of %d)", type(trainer).__name__, g.id,
                why.splitlines()[0][:300], attempt + 1, trainer.retries + 1)
    token = trainer._claims.get(g.id)
    if trainer.store is not None and token is not None:
        trainer.store.count_attempt(g.id, trainer._fp, token)


def place(trainer: Any, root: str | Path | None) -> Any:
    """Put what a trainer writes beside it (submitit's job folder) under `root`, unless it was given one."""
    if isinstance(trainer, SubmititTrainer) and trainer.root is None and root is not None:
        trainer.root = str(root)
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

