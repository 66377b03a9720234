"""Real processes: a SIGKILLed labeller takes its training workers with it and its claims lapse; two
labellers on one store never train the same genome; `forge-label status` counts per protocol."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from forge.genomes.labels import Label
from forge.labelling.store import LabelStore
from tests.forge.labelling._proc_helpers import alive, children
from tests.forge.labelling._store_helpers import fake_labels
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes

FAST = {**TINY_PROTOCOL, "tokens": 4 * 32 * 2, "val_tokens": 128}
LABEL = [sys.executable, "-m", "forge.labelling.cli"]
ENV = {**os.environ, "PYTHONPATH": os.getcwd()}

_HANG = """
import sys
from forge.labelling.dispatch import LocalTrainer
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes
gs = tiny_genomes(2)
store = sys.argv[1] if sys.argv[1] != "-" else None
LocalTrainer(protocol=TINY_PROTOCOL, corpus=TINY_CORPUS, store=store, workers=2, poll_s=0.1, lease_s=2,
             preload=store is not None, fault={"kind": "hang", "ids": [g.id for g in gs]}).train(gs)
"""


def _kill_labeller(tmp_path: Path, store: str) -> None:
    """Start a labeller whose 2 workers hang, SIGKILL it alone (not its group): no worker may outlive it."""
    script = tmp_path / "hang.py"
    script.write_text(_HANG)
    p = subprocess.Popen([sys.executable, str(script), store], env=ENV)
    deadline, kids = time.monotonic() + 120, []
    while time.monotonic() < deadline and len(kids) < 2:
        time.sleep(0.05)
        kids = children(p.pid)
    assert len(kids) == 2, "both training workers should be running"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(k) for k in kids):
        time.sleep(0.05)
    assert not any(alive(k) for k in kids), "a training worker outlived its labeller"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkilled_labeller_takes_its_workers_along(tmp_path):
    _kill_labeller(tmp_path, "-")  # no store, no preload: a few seconds


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkilled_labeller_leaves_claims_that_lapse(tmp_path):
    db = tmp_path / "k.db"
    _kill_labeller(tmp_path, str(db))
    counts = LabelStore(db).counts()
    assert [c["running"] + c["lapsed"] for c in counts] == [2]  # claimed, never stored as results
    time.sleep(2.2)
    assert [c["lapsed"] for c in LabelStore(db).counts()] == [2]  # nobody renews them: the next run takes them


def _overrides(store: Path, **kw) -> list[str]:
    o = [f"store={store}", "json=true", "dispatch.workers=1", "+dispatch.poll_s=0.1", "dispatch.lease_s=5",
         f"corpus.max_bytes={TINY_CORPUS['max_bytes']}", f"corpus.val_fraction={TINY_CORPUS['val_fraction']}"]
    return o + [f"protocol.{k}={v}" for k, v in FAST.items()] + [f"{k}={v}" for k, v in kw.items()]


@pytest.mark.slow
def test_two_labellers_on_one_store_never_train_the_same_genome(tmp_path):
    gfile, db = tmp_path / "g.jsonl", tmp_path / "two.db"
    gs = tiny_genomes(6)
    gfile.write_text("".join(json.dumps(g.to_dict()) + "\n" for g in gs))
    procs = [subprocess.Popen(LABEL + _overrides(db, genomes=gfile, **{"hydra.run.dir": tmp_path / f"h{i}"}),
                              env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for i in (0, 1)]
    summaries = [json.loads(p.communicate(timeout=500)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    store = LabelStore(db)
    # what the store guarantees: every genome trained once between them (how they shared it is the scheduler's)
    assert sum(s["trained"] for s in summaries) == 6 and all(s["requested"] == 6 for s in summaries)
    labs = list(store.labels())
    assert sorted(lab.genome_id for lab in labs) == sorted(g.id for g in gs)
    assert all(lab.status == "done" and lab.attempts == 1 for lab in labs)  # each trained exactly once


def _cfg(overrides: list[str]):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name="forge-label", overrides=overrides)


def test_status_counts_per_protocol_and_lists_failures(tmp_path, capsys, monkeypatch):
    from forge.labelling.cli import main, run

    store = LabelStore(tmp_path / "s.db")
    a, b, c = fake_labels(3)
    store.put(a, "P")
    store.put(Label(b.genome, math.inf, {"protocol": "cpu-proxy"}, "timeout: no result after 2 s", status="failed"), "P")
    store.put(Label(c.genome, math.inf, {}, "non-finite training loss (nan)", status="diverged"), "Q")
    out = run(_cfg([f"store={tmp_path / 's.db'}", "action=status"] + _overrides(tmp_path / "s.db")[4:]))
    rows = {r["protocol"]: r for r in out["protocols"]}
    assert (rows["P"]["done"], rows["P"]["failed"], rows["Q"]["diverged"]) == (1, 1, 1)
    assert rows["P"]["last_failures"][0]["reason"].startswith("timeout") and not rows["Q"]["configured"]
    err = capsys.readouterr().err
    assert "timeout: no result" in err and "trained again by the next forge-label run" in err
    assert f"label store {(tmp_path / 's.db').resolve()}" in " ".join(err.split())  # a path, not a repr (the title may wrap)
    from forge.labelling.store_db import StoreError

    with pytest.raises(StoreError, match="no such label store"):  # a typo never creates an empty store
        run(_cfg([f"store={tmp_path / 'typo.db'}", "action=status"]))
    assert not (tmp_path / "typo.db").exists()
    seen = []
    monkeypatch.setattr("forge.labelling.cli._hydra_main", lambda: seen.append(list(sys.argv)))
    monkeypatch.setattr(sys, "argv", ["forge-label", "status", "store=x.db"])
    main()
    assert seen == [["forge-label", "action=status", "store=x.db"]]
