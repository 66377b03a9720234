"""Issue 52 §3: a training killed after a rung checkpoint resumes at its last rung on the next try, never trains
a finished rung again, and ends with the label bytes of an uninterrupted run. Killed for real: SIGKILL of the
training worker (the dispatcher's retry resumes it) and SIGKILL of the labeller process (its claim lapses, the
next run resumes it). Also: the submitit dispatcher (its local executor) honours a stop. The worker kill is the
default suite's (a few seconds); the labeller kill and submitit's are `slow` (a Python start each)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forge.labelling.corpus import build_corpus
from forge.labelling.curves import checkpoint_path
from forge.labelling.dispatch import LocalTrainer, make_trainer
from forge.labelling.store import LabelStore
from forge.labelling.train import Protocol, train_genome
from tests.forge.labelling._proc_helpers import alive, children
from tests.forge.labelling._train_helpers import TINY_CORPUS, tiny_genome, tiny_genomes
from tests.forge.labelling.test_curves import CURVED  # 27 steps: rungs at 1, 3, 9, 27
from tests.forge.labelling.test_stop_dispatch import RUNGED, _spec

TPS = CURVED["batch"] * CURVED["seq_len"]
ENV = {**os.environ, "PYTHONPATH": os.getcwd()}


@pytest.fixture(scope="module")
def straight():
    """The uninterrupted label of the test genome (in this process, one thread, as the workers train)."""
    return train_genome(tiny_genome(), Protocol.from_config(CURVED), build_corpus(TINY_CORPUS))


def _at_rung_2(monkeypatch, act) -> None:
    """Make every training run `act()` at rung 2, after that rung's checkpoint is written (as a kill would find it)."""
    import forge.labelling.curves as curves

    real = curves.make_callback

    def wrapped(evaluate, rungs, ckpt, decide, tps):
        def hook(r, curve):
            if r == 1:
                act()
            return decide(r, curve) if decide is not None else None
        return real(evaluate, rungs, ckpt, hook, tps)

    monkeypatch.setattr(curves, "make_callback", wrapped)


def _same_as_straight(lab, straight) -> None:
    assert lab.status == "done" and lab.provenance["resumed_from_step"] == 3  # rung 2 is step 3
    assert lab.provenance["tokens_trained"] == (27 - 3) * TPS  # steps 1-3 were not trained again
    assert [c["step"] for c in lab.provenance["curve"]] == [1, 3, 9, 27]  # each rung read once
    assert lab.label.hex() == straight.label.hex()  # the same bytes
    assert lab.provenance["curve"] == straight.provenance["curve"]


def test_sigkilled_worker_resumes_at_its_last_rung(tmp_path, monkeypatch, straight):
    marker = tmp_path / "killed"

    def kill_once():
        if not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies as under kill -9 / OOM: no cleanup runs

    _at_rung_2(monkeypatch, kill_once)
    store = LabelStore(tmp_path / "s.db")
    t = LocalTrainer(protocol=CURVED, corpus=TINY_CORPUS, workers=1, poll_s=0.05, retries=1, store=store,
                     ckpt_dir=str(tmp_path / "ck"))
    [lab] = t.train([tiny_genome()])
    assert marker.exists()  # the first worker was killed at rung 2
    _same_as_straight(lab, straight)
    assert store.get(lab.genome_id, t.fingerprint()).attempts == 2  # the killed try and the resumed one
    assert not checkpoint_path(tmp_path / "ck", lab.genome_id, t.fingerprint()).exists()  # finished: nothing left


_HOLD = """
import sys, time
from pathlib import Path
import forge.labelling.curves as curves
from forge.labelling.dispatch import LocalTrainer
from tests.forge.labelling._train_helpers import TINY_CORPUS, tiny_genome
from tests.forge.labelling.test_curves import CURVED
real = curves.make_callback
def wrapped(evaluate, rungs, ckpt, decide, tps):
    def hold(r, curve):
        if r == 1:  # rung 2's checkpoint is on disk: say so, then wait to be killed
            Path(sys.argv[2]).touch()
            time.sleep(3600)
    return real(evaluate, rungs, ckpt, hold, tps)
curves.make_callback = wrapped
LocalTrainer(protocol=CURVED, corpus=TINY_CORPUS, store=sys.argv[1], workers=1, poll_s=0.1, lease_s=1,
             ckpt_dir=sys.argv[3]).train([tiny_genome()])
"""


@pytest.mark.slow  # a labeller subprocess (~12 CPU-s): the resume itself is covered cheaply by the test above
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkilled_labeller_resumes_at_its_last_rung_on_rerun(tmp_path, straight):
    script, flag, db, ck = tmp_path / "hold.py", tmp_path / "at-rung-2", tmp_path / "k.db", tmp_path / "ck"
    script.write_text(_HOLD)
    p = subprocess.Popen([sys.executable, str(script), str(db), str(flag), str(ck)], env=ENV)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not flag.exists() and p.poll() is None:
        time.sleep(0.05)
    assert flag.exists(), "the training should have reached rung 2"
    kids = children(p.pid)
    os.kill(p.pid, signal.SIGKILL)  # the labeller alone; its worker dies with it (PR_SET_PDEATHSIG)
    p.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(k) for k in kids):
        time.sleep(0.05)
    assert kids and not any(alive(k) for k in kids)
    assert [c["running"] + c["lapsed"] for c in LabelStore(db).counts()] == [1]  # claimed, no result stored
    time.sleep(1.2)  # its lease (1 s) lapses: nobody renews it
    t = LocalTrainer(protocol=CURVED, corpus=TINY_CORPUS, store=str(db), workers=1, poll_s=0.05, ckpt_dir=str(ck))
    [lab] = t.train([tiny_genome()])
    _same_as_straight(lab, straight)


@pytest.mark.slow  # two submitit jobs, each a fresh Python importing torch (~17 CPU-s); the stop reaches its workers
# through the same `_Base.spec` and `train_one` as the local dispatcher's (test_stop_dispatch.py, default suite)
def test_submitit_local_executor_honours_a_stop(tmp_path):
    """A stopped training ends its job (the worker is free for the next genome: one worker, both trained) and is
    stored as `stopped` with its rung checkpoint."""
    pytest.importorskip("submitit", reason="submitit is an optional extra (pip install -e '.[slurm]' in the Forge clone)")
    gs, store = tiny_genomes(2), LabelStore(tmp_path / "s.db")
    t = make_trainer("submitit", RUNGED, TINY_CORPUS, folder=str(tmp_path / "%j"), cluster="local", workers=1,
                     timeout_s=300, retries=0, poll_s=0.2, store=store, ckpt_dir=str(tmp_path / "ck"), stop=_spec(gs))
    labs = t.train(gs)
    assert [lab.status for lab in labs] == ["stopped", "stopped"], [lab.reason for lab in labs]
    assert all(lab.provenance["stopped"]["rung"] == 1 and lab.provenance["tokens_trained"] == TPS for lab in labs)
    fp = t.fingerprint()
    assert [store.get(g.id, fp).status for g in gs] == ["stopped", "stopped"]
    assert all(checkpoint_path(tmp_path / "ck", g.id, fp).is_file() for g in gs)
