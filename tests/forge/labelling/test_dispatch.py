"""Dispatch: local pool (order, store resume, failure → inf, lost worker retried, timeouts), Ray with a
local instance, submitit with its local executor."""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time

import pytest

from forge.labelling.dispatch import DispatchError, LocalTrainer, make_trainer, train_one
from forge.genomes.labels import Label
from forge.labelling.store import LabelStore
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, ray_init, ray_local, tiny_genomes

FAST = {**TINY_PROTOCOL, "tokens": 4 * 32 * 2, "val_tokens": 128}


def _local(**kw) -> LocalTrainer:
    return LocalTrainer(protocol=FAST, corpus=TINY_CORPUS, workers=2, poll_s=0.1, **kw)


def test_local_trains_in_order_and_resumes_from_store(tmp_path):
    gs = tiny_genomes(3)
    seen: list[Label] = []
    store = LabelStore(tmp_path / "d.db")
    labs = _local(store=store, on_label=seen.append).train([gs[2], gs[0], gs[1], gs[0]])
    assert [lab.genome_id for lab in labs] == [gs[2].id, gs[0].id, gs[1].id, gs[0].id]
    assert all(lab.finite for lab in labs) and len(seen) == 3 and len(store) == 3
    again: list[Label] = []
    labs2 = _local(store=store, on_label=again.append).train(gs)
    assert again == [] and [lab.label for lab in labs2] == [store.get(g.id).label for g in gs]


def test_failing_worker_gives_inf_label_with_error_and_batch_survives():
    gs = tiny_genomes(2)
    labs = _local(fault={"kind": "raise", "ids": [gs[0].id]}).train(gs)
    assert labs[0].label == math.inf and "injected failure" in labs[0].reason and "RuntimeError" in labs[0].reason
    assert labs[1].finite


def test_lost_worker_is_retried_then_given_up(tmp_path):
    gs = tiny_genomes(2)
    once = _local(retries=1, fault={"kind": "die_once", "ids": [gs[0].id], "dir": str(tmp_path)}).train(gs)
    assert all(lab.finite for lab in once)  # died once, retried, succeeded
    always = _local(retries=1, fault={"kind": "die", "ids": [gs[1].id], "dir": str(tmp_path)}).train(gs)
    assert always[0].finite and always[1].label == math.inf
    assert "worker lost" in always[1].reason and "2 attempts" in always[1].reason


def test_hanging_worker_times_out():
    g = tiny_genomes(1)[0]
    t0 = time.monotonic()
    labs = _local(timeout_s=2, fault={"kind": "hang", "ids": [g.id]}).train([g])
    assert labs[0].label == math.inf and "timeout" in labs[0].reason
    assert time.monotonic() - t0 < 3600  # the hang sleeps 3600 s: any sooner means killed, not waited for


def test_train_one_turns_bad_config_into_an_inf_label():
    g = tiny_genomes(1)[0]
    lab = Label.from_json(train_one(g.to_dict(), {"protocol": {**FAST, "precision": "fp3"}, "corpus": TINY_CORPUS}))
    assert lab.label == math.inf and "precision" in lab.reason


def test_make_trainer_rejects_unknown_and_bad_options():
    with pytest.raises(DispatchError, match="allowed: local, ray, submitit"):
        make_trainer("mpi", FAST, TINY_CORPUS)
    with pytest.raises(DispatchError, match="dispatch=local"):
        make_trainer("local", FAST, TINY_CORPUS, colour="red")
    with pytest.raises(DispatchError, match="timeout_s"):
        make_trainer("local", FAST, TINY_CORPUS, timeout_s=0)
    with pytest.raises(DispatchError, match="start_method = 'threads' is unknown; allowed: auto, fork, forkserver"):
        make_trainer("local", FAST, TINY_CORPUS, start_method="threads")


def test_auto_start_method_forks_only_where_no_other_thread_runs():
    """A fork beside a running thread copies the locks it holds into a child that can never take them."""
    import threading

    from forge.labelling.dispatch import start_method

    assert start_method("auto") == "fork" and start_method("spawn") == "spawn"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert start_method("auto") == "forkserver" and start_method("fork") == "fork"
    finally:
        stop.set()
        other.join()


def test_forkserver_children_train_the_labels_forked_ones_do():
    """Under forkserver a worker's parent is the server, not the labeller: it must not take that for the
    labeller's death (it did: every genome was lost, then failed)."""
    gs = tiny_genomes(2)
    forked = _local(start_method="fork").train(gs)
    served = _local(start_method="forkserver").train(gs)
    assert all(lab.finite for lab in served), [lab.reason for lab in served]
    assert [lab.label for lab in served] == [lab.label for lab in forked]


def test_the_tests_ray_start_retries_only_rays_startup_timeout():
    """Ray waits a fixed 30 s for its raylet, which a loaded machine can exceed: the tests' start (ray_init) tries
    again after that one error, and lets any other error, and a third timeout, through."""
    class FakeRay:
        def __init__(self, errors):
            self.errors, self.inits, self.shutdowns = list(errors), 0, 0

        def init(self, **kw):
            self.inits += 1
            if self.errors:
                raise self.errors.pop(0)

        def shutdown(self):
            self.shutdowns += 1

    late = Exception("The current node timed out during startup. This could happen because ...")
    ray = FakeRay([late])
    ray_init(ray, num_cpus=2)
    assert (ray.inits, ray.shutdowns) == (2, 1)
    with pytest.raises(Exception, match="timed out during startup"):
        ray_init(FakeRay([late, late, late]))
    with pytest.raises(ValueError, match="bad"):
        ray_init(FakeRay([ValueError("bad")]))


@pytest.mark.xdist_group("ray")  # one local Ray cluster at a time under pytest-xdist (--dist loadgroup)
def test_ray_local_instance(tmp_path):
    gs = tiny_genomes(2)
    ray = ray_local()
    own = ray._private.worker.global_worker.node.get_temp_dir_path()
    try:
        assert own.startswith("/tmp/fray-")  # an instance of its own (ray_local), not another process's cluster
        trainer = make_trainer("ray", FAST, TINY_CORPUS, num_gpus=0, timeout_s=300, retries=1,
                               fault={"kind": "raise", "ids": [gs[1].id]}, store=LabelStore(tmp_path / "r.db"))
        labs = trainer.train(gs)
        from tests.forge.labelling.test_stop_dispatch import ray_stop_then_promote

        ray_stop_then_promote(tmp_path)  # issue 52: the stopping rule through Ray (one Ray start for both checks)
    finally:
        ray.shutdown()
        shutil.rmtree(own, ignore_errors=True)
    assert labs[0].finite and labs[1].label == math.inf and "injected failure" in labs[1].reason
    store = LabelStore(tmp_path / "r.db")
    assert len(store) == 1 and store.get(gs[1].id).status == "failed"  # a crash is kept, not as a result


def test_submitit_local_executor(tmp_path):
    pytest.importorskip("submitit", reason="submitit is an optional extra (pip install -e '.[slurm]' in the Forge clone)")
    g = tiny_genomes(1)[0]
    trainer = make_trainer("submitit", FAST, TINY_CORPUS, folder=str(tmp_path / "%j"), cluster="local",
                           timeout_s=300, retries=1, poll_s=0.5, fault={"kind": "die_once", "ids": [g.id],
                                                                        "dir": str(tmp_path)})
    labs = trainer.train([g])
    assert labs[0].finite, labs[0].reason  # the job died once (lost worker) and was resubmitted
    assert os.path.exists(tmp_path / f"died-{g.id}")
    assert not (tmp_path / "%j").exists()  # submitit's literal-%j folder is not left behind (issue 54)


def _device_label(genome_dict: dict, spec: dict) -> str:
    """A stand-in training: the label says which GPU its worker was given."""
    import os
    import time

    from forge.genomes.genome import Genome
    from forge.genomes.labels import Label

    time.sleep(0.2)
    return Label(Genome.from_dict(genome_dict), 1.0, {"device": os.environ.get("CUDA_VISIBLE_DEVICES")}).to_json()


def test_local_workers_on_a_multi_gpu_node_get_a_device_each(monkeypatch):
    """Issue 54 (8): `dispatch=local` on a node with two GPUs (faked) puts its two workers on one each."""
    from forge.labelling import dispatch
    from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert dispatch._gpus() == ["3", "5"]  # the node's own list, when it gives one
    monkeypatch.setattr(dispatch, "_gpus", lambda: ["0", "1"])
    monkeypatch.setattr(dispatch, "train_one", _device_label)
    t = dispatch.LocalTrainer(protocol=TINY_PROTOCOL, corpus=TINY_CORPUS, workers=2, poll_s=0.05, preload=False)
    devices = [lab.provenance["device"] for lab in t.train(tiny_genomes(4))]
    assert devices[:2] == ["0", "1"] and set(devices) == {"0", "1"}
    monkeypatch.setattr(dispatch, "_gpus", lambda: ["0"])  # one GPU (or none): the environment left as it is
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert {lab.provenance["device"] for lab in t.train(tiny_genomes(2))} == {None}


def test_submitit_logs_go_under_the_output_folder(tmp_path):
    """Issue 54 (8): `dispatch=submitit` writes its job folder under the run's (or labelling's) output folder."""
    from pathlib import Path

    from search.components import build_trainer
    from forge.labelling.dispatch import SubmititTrainer, place
    from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL

    cfg = {"dispatch": "submitit", "protocol": TINY_PROTOCOL, "corpus": TINY_CORPUS}
    t = build_trainer(cfg, None, tmp_path / "run" / "labels.db")
    assert t.where == tmp_path / "run" / "submitit_logs" / "%j"
    assert build_trainer(cfg, None, None).where == Path("submitit_logs/%j")  # no folder known: the current one
    own = place(SubmititTrainer(TINY_PROTOCOL, TINY_CORPUS, folder=str(tmp_path / "mine" / "%j")), tmp_path / "o")
    assert own.where == tmp_path / "mine" / "%j"  # an absolute folder is the user's choice


def test_async_coevolution_threads_each_train_on_their_own_gpu(monkeypatch):
    """Issue 54: an asynchronous co-evolution trains through one copy of `dispatch=local` per worker, one genome at
    a time each: worker k's copy starts its slots at the node's k-th GPU (not every one on the first)."""
    import dataclasses

    from forge.labelling import dispatch
    from search.coevolution_async import Labeller
    from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes

    monkeypatch.setattr(dispatch, "_gpus", lambda: ["0", "1"])
    monkeypatch.setattr(dispatch, "train_one", _device_label)
    # fork: the monkeypatched train_one reaches only forked children (`auto` picks forkserver beside the threads)
    t = dispatch.LocalTrainer(protocol=TINY_PROTOCOL, corpus=TINY_CORPUS, workers=2, poll_s=0.05, preload=False,
                              start_method="fork")
    lab = Labeller(t, 2)
    lab.submit(list(enumerate(tiny_genomes(2))))
    assert len(lab.collect({0, 1}, 1)) == 2
    lab.close()
    assert [c.first_slot for c in lab.trainers] == [0, 1]
    second = dataclasses.replace(t, workers=1, first_slot=1)
    assert second.train(tiny_genomes(1))[0].provenance["device"] == "1"
