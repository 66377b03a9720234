"""Asynchronous co-evolution (issue 54, search.coevolve.mode=async): the synchronous run at one worker, no barrier
on an event's slowest pick, and a stopped run resumed without losing or repeating a training."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from forge.genomes.labels import Label
from forge.labelling.base import _Base
from search.coevolution import CoEvolution
from search.coevolution_async import AsyncCoEvolution, workers_of
from search.components import build_coevolution
from search.errors import SearchConfigError
from search.settings import settle_config
from search.state import read_jsonl
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeTrainer, fake_finetune, fake_loss

SAME = ("pareto.jsonl", "archive.jsonl", "history.jsonl", "labels.jsonl")


def _co(cls, trainer, **kw):
    return cls(2, trainer, fake_finetune, "base", None, batch=4, n_mc=3, seed=0, **kw)


def test_async_at_one_worker_is_the_synchronous_run(make_search, tmp_path):
    cfg = tiny_cfg(seed=1, search={"generations": 6})
    make_search(tmp_path / "sync", cfg, coevolution=_co(CoEvolution, FakeTrainer())).run()
    make_search(tmp_path / "async", cfg, coevolution=_co(AsyncCoEvolution, FakeTrainer(), workers=1)).run()
    for f in SAME:
        assert (tmp_path / "sync" / f).read_text() == (tmp_path / "async" / f).read_text(), f
    sync, asy = (read_jsonl(tmp_path / d / "coevolution.jsonl") for d in ("sync", "async"))
    assert [{k: v for k, v in e.items() if k not in ("folded", "in_flight")} for e in asy] == sync
    assert all(e["in_flight"] == 0 and e["folded"] == e["picked"] for e in asy)


@dataclass
class StoreTrainer(_Base):
    """A Forge dispatcher without torch: the label store's claims and reuse, `trained` lists every real training.
    `hold(genome_id)` blocks a training until it returns (the test decides when a straggler may finish)."""

    workers: int = 2
    trained: list[str] = field(default_factory=list)
    hold: Callable[[str], None] = lambda gid: None
    log: str | None = None  # every training also appended here (a log that outlives a killed process)

    def fingerprint(self) -> str:
        self._fp = "fake-protocol"
        return self._fp

    def _run(self, todo, emit) -> None:
        for g in todo:
            if self._take(g):
                self.hold(g.id)
                self.trained.append(g.id)
                if self.log:
                    with open(self.log, "a") as f:
                        f.write(g.id + "\n")
                emit(Label(g, float(fake_loss([g], 0.1)[0]), {"protocol": "fake"}))


def _with_a_straggler(co: AsyncCoEvolution) -> None:
    """The first genome handed out trains until the first event has been logged: the event cannot wait for it."""
    logged, first = threading.Event(), []
    lab, log = co.labeller, co._log_event

    def submit(items):
        if items and not first:
            first.append(items[0][1].id)
        submit_all(items)

    def hold(gid: str) -> None:
        if gid == first[0]:
            assert logged.wait(30), "the event waited for its slowest pick"

    def spy(event, run_dir):
        out = log(event, run_dir)
        logged.set()
        return out
    submit_all, lab.submit, co._log_event, co.trainer.hold = lab.submit, submit, spy, hold


def _trainer(tmp_path) -> StoreTrainer:
    return StoreTrainer(protocol={"name": "fake"}, corpus={}, store=str(tmp_path / "labels.db"))


def test_an_event_waits_only_for_a_free_worker(make_search, tmp_path):
    trainer = _trainer(tmp_path)
    co = _co(AsyncCoEvolution, trainer)
    assert co.workers == 2  # W = the dispatcher's workers
    _with_a_straggler(co)
    make_search(tmp_path / "run", tiny_cfg(search={"generations": 4}), coevolution=co).run()
    events = read_jsonl(tmp_path / "run" / "coevolution.jsonl")
    n = len(events[0]["picked"])
    assert n >= 2 and len(events[0]["folded"]) == n - 1 and events[0]["in_flight"] == 1
    straggler = events[0]["picked"][0]
    assert straggler not in events[0]["folded"] and any(straggler in e["folded"] for e in events[1:])
    picked = [i for e in events for i in e["picked"]]
    labels = [r["genome_id"] for r in read_jsonl(tmp_path / "run" / "labels.jsonl")]
    assert sorted(labels) == sorted(picked) == sorted(trainer.trained) and len(set(picked)) == len(picked)
    assert events[-1]["in_flight"] == 0  # the run ends with every pick folded in


def test_a_stopped_async_run_resumes_without_losing_or_repeating_a_training(make_search, tmp_path):
    """Stopped with a pick in flight (its training ends after the checkpoint): the resume hands it out again, the
    label store gives its result back untrained, and every pick is trained and folded in exactly once."""
    trainer = _trainer(tmp_path)
    cfg = tiny_cfg(search={"generations": 6})
    co = _co(AsyncCoEvolution, trainer)
    _with_a_straggler(co)
    assert make_search(tmp_path / "run", cfg, coevolution=co).run(stop_after=2)["status"] == "stopped"
    ckpt = json.loads((tmp_path / "run" / "state" / "checkpoint.json").read_text())
    in_flight = [p["genome"] for p in ckpt["coevolution"]["pending"]]
    n = len(read_jsonl(tmp_path / "run" / "coevolution.jsonl")[0]["picked"])
    assert len(in_flight) == 1 and len(trainer.trained) == n  # the straggler trained, not yet folded in
    resumed = _co(AsyncCoEvolution, StoreTrainer(protocol={"name": "fake"}, corpus={}, store=trainer.store,
                                                  trained=trainer.trained))
    s = make_search(tmp_path / "run", cfg, coevolution=resumed)
    s.load()
    assert s.run()["status"] == "complete"
    events = read_jsonl(tmp_path / "run" / "coevolution.jsonl")
    picked = [i for e in events for i in e["picked"]]
    labels = [r["genome_id"] for r in read_jsonl(tmp_path / "run" / "labels.jsonl")]
    assert len(set(trainer.trained)) == len(trainer.trained)  # nothing trained twice
    assert sorted(labels) == sorted(picked) == sorted(trainer.trained)  # nothing handed out and lost


def test_mode_is_checked_and_w_comes_from_the_dispatcher(tmp_path, tiny_space):
    from forge import plugins

    cfg = tiny_cfg(evaluator={"kind": "surrogate", "predictor": "x"})
    cfg["search"]["coevolve"] = {"every": 2, "trainer": {"_target_": "tests.search.fakes.FakeTrainer"},
                                 "finetune": "tests.search.fakes.fake_finetune", "mode": "async"}
    cfg["plugins"] = {"finetune": ["tests.search.fakes.fake_finetune"]}
    plugins.trust(cfg)
    co = build_coevolution(settle_config(cfg), tiny_space, tmp_path)
    assert isinstance(co, AsyncCoEvolution) and co.workers == 1  # a trainer that names no workers: one
    cfg["search"]["coevolve"]["mode"] = "eager"
    with pytest.raises(SearchConfigError, match="mode = 'eager'; allowed: sync | async"):
        build_coevolution(settle_config(cfg), tiny_space, tmp_path)
    with pytest.raises(SearchConfigError, match="mode=async does not run the stopping rule"):
        _co(AsyncCoEvolution, FakeTrainer(), stop=object())
    assert workers_of(StoreTrainer(protocol={}, corpus={}, workers=3)) == 3


KILLED = """
import os, sys, time
sys.path.insert(0, {root!r})
from backends.interface import Workload
from forge.spaces.space import load_space
from search.cli import run
from search.coevolution_async import AsyncCoEvolution
from search.evaluators import LossEvaluator
from tests.search.conftest import tiny_cfg
from tests.search.fakes import FakeBackend, FakePredictor, fake_finetune
from tests.search.run.test_coevolution_async import StoreTrainer

def hold(gid):  # the first training to start never ends: the process is killed with it in flight
    try:
        os.close(os.open({out!r} + "/held", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    time.sleep(3600)

trainer = StoreTrainer(protocol={{"name": "fake"}}, corpus={{}}, store={out!r} + "/labels.db", lease_s=2.0,
                       log={out!r} + "/trained.log", hold=hold)
co = AsyncCoEvolution(2, trainer, fake_finetune, "base", None, batch=4, n_mc=3, seed=0)
cfg = tiny_cfg(out_dir={out!r}, progress=False, search={{"generations": 6}})
run(cfg, {{"space": load_space("iha-tiny"), "evaluator": LossEvaluator(FakePredictor()), "backend": FakeBackend(),
          "workload": Workload(), "coevolution": co}})
"""


@pytest.mark.slow  # a subprocess; the stopped run above covers the same bookkeeping in-process
def test_a_killed_async_run_resumes_without_losing_or_repeating_a_training(tmp_path):
    """kill -9 with a training in flight: the resume trains it again once its claim lapses (it never finished),
    reuses what finished, and every pick is trained and folded in exactly once."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from backends.interface import Workload
    from forge.spaces.space import load_space
    from search.cli import run
    from search.evaluators import LossEvaluator
    from search.state import load_checkpoint
    from tests.search.fakes import FakeBackend, FakePredictor

    root, out = str(Path(__file__).resolve().parents[3]), tmp_path / "run"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", KILLED.format(root=root, out=str(out))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt, deadline = out / "state" / "checkpoint.json", time.time() + 300
    while time.time() < deadline and not (ckpt.is_file() and load_checkpoint(out)["generation"] >= 4):
        assert proc.poll() is None, "the run ended before it was killed"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert load_checkpoint(out)["coevolution"]["pending"], "killed with nothing in flight"
    trainer = StoreTrainer(protocol={"name": "fake"}, corpus={}, store=str(out / "labels.db"), lease_s=2.0,
                           wait_s=0.2, log=str(out / "trained.log"))
    co = AsyncCoEvolution(2, trainer, fake_finetune, "base", None, batch=4, n_mc=3, seed=0)
    cfg = tiny_cfg(out_dir=str(out), progress=False, search={"generations": 6}, resume=str(out))
    summary = run(cfg, {"space": load_space("iha-tiny"), "evaluator": LossEvaluator(FakePredictor()),
                        "backend": FakeBackend(), "workload": Workload(), "coevolution": co})
    assert summary["status"] == "complete"
    trained = (out / "trained.log").read_text().split()
    events = read_jsonl(out / "coevolution.jsonl")
    picked = [i for e in events for i in e["picked"]]
    labels = [r["genome_id"] for r in read_jsonl(out / "labels.jsonl")]
    assert len(set(trained)) == len(trained)  # nothing trained twice, across the kill
    assert sorted(labels) == sorted(picked) == sorted(trained)  # nothing handed out and lost
