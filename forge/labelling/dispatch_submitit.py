"""`dispatch=submitit`: Slurm jobs through submitit (optional extra `slurm`), or its local/debug executors.

A job's limit counts its running time, not its time in the queue; the genomes that can start go as one job
array; the job's callable is checkpointable (a preempted job is requeued and keeps a training it finished),
and each job leaves its label beside submitit's folders, so a rerun after a killed labeller stores it."""
from __future__ import annotations

import logging
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from forge.disk import run_folder
from forge.genomes.genome import Genome, genome_from_dict
from forge.genomes.labels import Label
from forge.labelling.base import DispatchError, _Base, _from_json, train_one
from forge.labelling.dispatch_common import check_workers as _check_workers, retried as _retried
from forge.labelling.store import RESULTS

log = logging.getLogger("forge.labelling.dispatch")


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

    def place_under(self, root: str | Path) -> None:
        """Put submitit's job folder under `root` (the run's or labelling's output folder) when it is relative."""
        if self.root is None:
            self.root = str(root)

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

    def _beside(self) -> Path:
        """The folder beside submitit's job folders (`where` up to its `%j`): on the filesystem the jobs share."""
        return Path(str(self.where).split("%j")[0] or ".")

    def _kept(self, g: Genome) -> Path:
        """Where g's job leaves its label, beside submitit's job folders (a name built from ids, not read)."""
        return self._beside() / "labels" / f"{g.id}-{self.fingerprint()}.json"

    def job_args(self, g: Genome) -> tuple[dict, dict, str]:
        """What g's job is called with: its genome, the spec and where it keeps its label. Its trainings leave
        their rung checkpoints beside the job folders (unless `ckpt_dir` is set), so a job Slurm requeues after a
        preemption continues from its last rung instead of from step 0."""
        keep = str(self._kept(g))  # the fingerprint first: the spec carries it (the checkpoints' names)
        spec = self.spec
        spec["ckpt_dir"] = spec.get("ckpt_dir") or str(self._beside() / run_folder.CHECKPOINTS_DIR)
        return g.to_dict(), spec, keep

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
        job = ex.submit(Training(_limit_min(self.timeout_s) * 60), *self.job_args(g))
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
