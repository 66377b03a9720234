"""Cluster dispatch (issue 54): a Slurm job's limit counts running time, not queueing (a stub queue whose jobs
stay PENDING); only what can start is claimed, so a second labeller on the store trains the rest; a lost job
is resubmitted visibly (a log line, `attempts` in the store)."""
from __future__ import annotations

import contextlib
import logging
import math

import pytest

from forge.genomes.labels import Label
from forge.labelling.dispatch import SubmititTrainer
from forge.labelling.store import LabelStore
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, ray_init, tiny_genomes

FAST = {**TINY_PROTOCOL, "tokens": 4 * 32 * 2, "val_tokens": 128}


class _StubJob:
    """A job as submitit shows it: PENDING for `pending` polls, RUNNING for `running` polls (forever when None),
    then done; `lost` jobs end without a result (the node died)."""

    def __init__(self, queue: "_StubQueue", fn, args, plan: dict) -> None:
        self.queue, self.fn, self.args = queue, fn, args
        self.job_id = str(len(queue.jobs) + 1)
        self.pending, self.running, self.lost = plan.get("pending", 0), plan.get("running", 1), plan.get("lost", False)
        self.polls, self.cancelled, self.timeout = 0, False, plan.get("timeout", False)

    @property
    def state(self) -> str:
        if self.cancelled:
            return "CANCELLED"
        if self.timeout and self.running is not None and self.polls > self.pending + self.running:
            return "TIMEOUT"  # Slurm ended it at its time limit
        return "PENDING" if self.polls <= self.pending else "RUNNING"

    def done(self) -> bool:
        self.polls += 1
        return not self.cancelled and self.running is not None and self.polls > self.pending + self.running

    def result(self) -> str:
        if self.timeout:
            raise RuntimeError(f"job {self.job_id} (TIMEOUT) has not produced any output")
        if self.lost:
            raise RuntimeError(f"job {self.job_id} has not produced any output (node lost)")
        return self.fn(*self.args)

    def cancel(self, check: bool = True) -> None:
        self.cancelled = True


class _StubQueue:
    """A Slurm queue: each submission takes the next plan for its genome (by id), else runs at once."""

    cluster = "slurm"

    def __init__(self, plans: dict[str, list[dict]]) -> None:
        self.plans, self.jobs = plans, []
        self.pending_at_submit: list[int] = []  # our jobs waiting in the queue when each new one was submitted
        self.arrays: list[int] = []  # the size of each job array (`executor.batch()`) submitted

    @contextlib.contextmanager
    def batch(self):
        before = len(self.jobs)
        yield
        self.arrays.append(len(self.jobs) - before)

    def submit(self, fn, genome_dict, *args):
        from forge.genomes.genome import genome_from_dict

        gid = genome_from_dict(genome_dict).id
        self.pending_at_submit.append(sum(j.state == "PENDING" for j in self.jobs))
        plan = self.plans.get(gid, [{}])
        job = _StubJob(self, fn, (genome_dict, *args), plan.pop(0) if len(plan) > 1 else plan[0])
        self.jobs.append(job)
        return job


class _Stubbed(SubmititTrainer):
    queue: _StubQueue | None = None

    def _executor(self):
        return self.queue


def _stubbed(queue: _StubQueue, **kw) -> SubmititTrainer:
    kw.setdefault("folder", f"{kw.pop('tmp')}/%j")
    kw.setdefault("protocol", FAST)
    t = _Stubbed(corpus=TINY_CORPUS, poll_s=0.05, grace_s=0.0, **kw)
    t.queue = queue
    return t


def test_a_job_pending_past_its_limit_is_not_timed_out_but_a_running_one_is(tmp_path):
    waits, hangs = tiny_genomes(2)
    # `waits` sits in the queue ~4 s (80 polls) with a 2 s limit, then runs briefly; `hangs` runs forever
    queue = _StubQueue({waits.id: [{"pending": 80, "running": 1}], hangs.id: [{"pending": 0, "running": None}]})
    labs = _stubbed(queue, tmp=tmp_path, timeout_s=2, workers=2).train([waits, hangs])
    assert labs[0].finite, labs[0].reason
    assert labs[1].label == math.inf and "timeout" in labs[1].reason and "running time" in labs[1].reason
    assert queue.jobs[1].cancelled and not queue.jobs[0].cancelled


def test_submitit_claims_only_what_starts_and_a_second_labeller_trains_the_rest(tmp_path):
    gs = tiny_genomes(3)
    store = LabelStore(tmp_path / "s.db")
    queue = _StubQueue({g.id: [{"pending": 3, "running": 1}] for g in gs})
    other: dict[str, object] = {}

    def second_labeller(lab: Label) -> None:  # another labeller on the store, while the first is still busy
        if not other:
            token = store.claim(gs[2], trainer.fingerprint(), lease_s=60)
            other["token"] = token
            if isinstance(token, str):
                store.finish(Label(gs[2], 4.5, {"by": "second"}), trainer.fingerprint(), token)

    trainer = _stubbed(queue, tmp=tmp_path, store=store, timeout_s=60, on_label=second_labeller)
    labs = trainer.train(gs)
    assert isinstance(other["token"], str)  # the genome the first had not started was free to claim
    assert [j.args[0] for j in queue.jobs] == [gs[0].to_dict(), gs[1].to_dict()]  # gs[2] trained once, by the second
    assert labs[2].label == 4.5 and labs[0].finite and labs[1].finite
    assert max(queue.pending_at_submit) == 0  # nothing more was sent while one of ours waited in the queue


def test_a_lost_job_is_resubmitted_logged_and_counted(tmp_path, caplog):
    g = tiny_genomes(1)[0]
    store = LabelStore(tmp_path / "a.db")
    queue = _StubQueue({g.id: [{"lost": True}, {}]})
    with caplog.at_level(logging.WARNING, logger="forge.labelling.dispatch"):
        labs = _stubbed(queue, tmp=tmp_path, store=store, timeout_s=60, retries=1).train([g])
    assert labs[0].finite and len(queue.jobs) == 2
    assert any("node lost" in r.getMessage() and "attempt 2 of 2" in r.getMessage() for r in caplog.records)
    assert store.counts()[0]["attempts"] == 2  # one claim, one resubmission


def test_a_rerun_stores_what_a_killed_labellers_jobs_finished(tmp_path):
    """Labeller 1 claimed both genomes and submitted their jobs, then was killed (its claims lapse); one job
    finished meanwhile and left its label beside submitit's folders. The rerun stores that one, trains the other."""
    from forge.labelling.dispatch_submitit import _train_and_keep

    finished, missing = tiny_genomes(2)
    store = LabelStore(tmp_path / "k.db")
    killed = _stubbed(_StubQueue({}), tmp=tmp_path, store=store)
    for g in (finished, missing):
        assert isinstance(store.claim(g, killed.fingerprint(), lease_s=0.01), str)  # lapses at once
    _train_and_keep(finished.to_dict(), killed.spec, str(killed._kept(finished)))  # the orphan job finishing
    queue = _StubQueue({})
    labs = _stubbed(queue, tmp=tmp_path, store=store, timeout_s=60).train([finished, missing])
    assert [j.args[0] for j in queue.jobs] == [missing.to_dict()]  # only the missing one was trained
    assert labs[0].finite and labs[1].finite and len(store) == 2
    kept = Label.from_json(killed._kept(finished).read_text())
    assert store.get(finished.id).label == kept.label


@pytest.mark.parametrize("workers", [0, True, 1.5])
def test_submitit_rejects_bad_workers(workers):
    from forge.labelling.dispatch import DispatchError

    with pytest.raises(DispatchError, match="dispatch.workers"):
        SubmititTrainer(protocol=FAST, corpus=TINY_CORPUS, workers=workers)


# ------------------------------------------------------------------------------------------------ Ray
@pytest.fixture(scope="module")
def ray_two_cpus():
    """A local Ray instance of 2 CPUs in its own temp dir (short: Ray's socket paths are length-limited)."""
    import os
    import shutil
    import tempfile

    ray = pytest.importorskip("ray", reason="ray is an optional extra (pip install -e '.[ray]' in the Forge clone)")
    tmp = tempfile.mkdtemp(prefix="ray54-", dir="/tmp")
    ray_init(ray, num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=tmp,
             runtime_env={"env_vars": {"PYTHONPATH": os.getcwd()}})
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def _ray(**kw):
    from forge.labelling.dispatch import make_trainer

    return make_trainer("ray", FAST, TINY_CORPUS, num_gpus=0, num_cpus=2, **kw)  # 2 CPUs each: one at a time


@pytest.mark.slow  # ~60 s: the limit must exceed a cold Ray worker's start on a loaded machine
@pytest.mark.xdist_group("ray")
def test_ray_limit_is_per_genome_from_its_start(ray_two_cpus, tmp_path):
    """One task at a time: the hung genome is cancelled at its own limit and the one queued behind it then
    trains (a batch deadline, timeout × N, cancelled the never-started genome with the hung one)."""
    hung, queued = tiny_genomes(2)
    labs = _ray(timeout_s=40, retries=0, fault={"kind": "hang", "ids": [hung.id]}).train([hung, queued])
    assert labs[0].label == math.inf and "timeout" in labs[0].reason
    assert labs[1].finite, labs[1].reason


@pytest.mark.xdist_group("ray")
def test_ray_claims_only_what_runs_and_counts_a_lost_worker(ray_two_cpus, tmp_path, caplog):
    gs = tiny_genomes(3)
    store = LabelStore(tmp_path / "r.db")
    other: dict[str, object] = {}

    def second_labeller(lab: Label) -> None:
        if not other:
            other["running"] = store.counts()[0]["running"]
            token = other["token"] = store.claim(gs[2], trainer.fingerprint(), lease_s=60)
            if isinstance(token, str):
                store.finish(Label(gs[2], 4.5, {"by": "second"}), trainer.fingerprint(), token)

    trainer = _ray(store=store, timeout_s=300, retries=1, on_label=second_labeller,
                   fault={"kind": "die_once", "ids": [gs[0].id], "dir": str(tmp_path)})
    with caplog.at_level(logging.WARNING, logger="forge.labelling.dispatch"):
        labs = trainer.train(gs)
    assert isinstance(other["token"], str) and other["running"] == 0  # the genome not yet sent was free
    assert labs[0].finite and labs[1].finite and labs[2].label == 4.5
    assert any("ray task lost" in r.getMessage() and "attempt 2 of 2" in r.getMessage() for r in caplog.records)
    rows = {lab.genome_id: lab for lab in store.labels()}
    assert store.counts()[0]["attempts"] == 4  # gs[0]: claim + retry; gs[1]: claim; gs[2]: the second labeller's
    assert rows[gs[0].id].finite


def test_joining_a_ray_cluster_sends_no_object_store_size():
    from forge.runtime.config import ray_cluster

    joined = ray_cluster(["-m", "hydra/launcher=ray", "+hydra.launcher.ray.init.address=auto"])
    assert joined[-1] == "+hydra.launcher.ray.init.object_store_memory=null"
    assert ray_cluster(["hydra/launcher=ray"]) == ["hydra/launcher=ray"]  # a local cluster keeps the launcher's
    own = ["+hydra.launcher.ray.init.address=auto", "+hydra.launcher.ray.init.object_store_memory=1000000000"]
    assert ray_cluster(own) == own


def test_a_key_of_another_dispatcher_is_answered_with_the_choice_that_has_it():
    """`dispatch.address=auto` beside the default dispatch=local: Hydra refuses it, and its advice (`+`) would set
    it on the local trainer; the answer names dispatch=ray, and that command composes."""
    from hydra import compose, initialize_config_module

    from forge.shell.app import _hint

    text = _hint("Could not override 'dispatch.address'.; To append to your config use +dispatch.address=auto",
                 "forge-label")
    assert "dispatch=ray dispatch.address=auto" in text and "would change nothing" not in text
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        cfg = compose(config_name="forge-label", overrides=["dispatch=ray", "dispatch.address=auto"])
    assert cfg.dispatch.address == "auto" and cfg.dispatch._target_.endswith("RayTrainer")


def test_a_client_clock_running_ahead_takes_over_no_live_claim(tmp_path, monkeypatch):
    """Leases are set and compared on the database's clock: a node whose clock runs an hour ahead of the
    labeller holding a claim does not see that claim as lapsed."""
    import time

    from forge.labelling import store as store_mod

    g = tiny_genomes(1)[0]
    store = LabelStore(tmp_path / "c.db")
    assert isinstance(store.claim(g, "fp", lease_s=60), str)
    real = time.time
    monkeypatch.setattr(store_mod.time, "time", lambda: real() + 3600)
    assert store.claim(g, "fp", lease_s=60) is None  # still held: the other's clock does not decide
    assert store.counts()[0]["running"] == 1 and store.counts()[0]["lapsed"] == 0


def test_a_round_is_one_job_array_and_a_timed_out_job_is_not_resubmitted(tmp_path):
    """Issue 54 (7): the genomes that can start go as one array (`executor.batch()`: one sbatch); a job Slurm
    ends at its time limit is a timeout, not a lost job resubmitted with the same limit."""
    gs = tiny_genomes(3)
    queue = _StubQueue({gs[0].id: [{"running": 2, "timeout": True}]})
    labs = _stubbed(queue, tmp=tmp_path, workers=3).train(gs)
    assert queue.arrays == [3] and len(queue.jobs) == 3  # one array, and nothing resubmitted
    assert labs[0].status == "failed" and "TIMEOUT" in labs[0].reason and labs[1].finite and labs[2].finite


def test_a_preempted_job_is_requeued_and_keeps_what_it_finished(tmp_path, monkeypatch):
    """Issue 54 (7): the job's callable is checkpointable (submitit requeues it on preemption, not at its own
    limit), and a requeued job whose training had finished returns the kept label instead of training again."""
    import time

    from forge.labelling import dispatch_submitit as dispatch

    g = tiny_genomes(1)[0]
    t = _stubbed(_StubQueue({}), tmp=tmp_path)
    job = dispatch.Training(600)
    job.started = time.time() - 60  # preempted a minute in
    again = job.checkpoint(g.to_dict(), t.spec, str(t._kept(g)))
    assert isinstance(again.function, dispatch.Training) and again.args[0] == g.to_dict()
    job.started = time.time() - 590  # submitit's signal before the limit: not requeued with that same limit
    assert job.checkpoint(g.to_dict(), t.spec, str(t._kept(g))) is None
    first = again.function(*again.args)  # trains, and keeps the label beside the job folders
    monkeypatch.setattr(dispatch, "train_one", lambda *a: pytest.fail("a kept training was trained again"))
    assert dispatch.Training(600)(g.to_dict(), t.spec, str(t._kept(g))) == Label.from_json(first).to_json()


def _preempted_after_its_first_rung(args: tuple) -> None:
    """A Slurm job's training (forked) that holds once its first rung checkpoint is on disk, until it is killed."""
    import os
    import time

    from forge.labelling import dispatch_submitit as dispatch

    real = os.replace

    def replace(src, dst):
        real(src, dst)
        if str(dst).endswith(".ckpt"):
            time.sleep(3600)
    os.replace = replace
    dispatch.Training(600)(*args)


def test_a_requeued_job_continues_its_training_from_its_last_checkpoint(tmp_path):
    """Issue 54 (7): a preempted job (killed mid-training) that submitit requeues continues from the rung
    checkpoint its first run left beside the job folders, not from step 0."""
    import multiprocessing as mp
    import time

    from forge.labelling import dispatch_submitit as dispatch
    from forge.labelling.curves import checkpoint_path

    g = tiny_genomes(1)[0]
    t = _stubbed(_StubQueue({}), tmp=tmp_path, protocol={**FAST, "tokens": 4 * 32 * 9, "eta": 3, "rungs": 2})
    args = t.job_args(g)  # what the job is submitted with
    ckpt = checkpoint_path(args[1]["ckpt_dir"], g.id, args[1]["fp"])
    assert ckpt.parent == tmp_path / "checkpoints"
    first = mp.get_context("fork").Process(target=_preempted_after_its_first_rung, args=(args,), daemon=True)
    first.start()
    deadline = time.time() + 120
    while not ckpt.is_file() and first.is_alive() and time.time() < deadline:
        time.sleep(0.02)
    first.kill()  # the preemption: no result, only the checkpoint
    first.join()
    assert ckpt.is_file(), "the first run left no rung checkpoint"
    job = dispatch.Training(600)
    job.started = time.time() - 60
    again = job.checkpoint(*args)  # submitit's requeue
    lab = Label.from_json(again.function(*again.args))
    assert lab.finite and lab.provenance["resumed_from_step"] == 3 and lab.provenance["tokens_trained"] == 6 * 4 * 32
    assert not ckpt.exists()  # finished: nothing left to continue
