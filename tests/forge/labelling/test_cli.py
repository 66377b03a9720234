"""forge-label: run() end to end, resume, genome files, kill -9 mid-run then resume, --help, multirun."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from forge.genomes.genome import GenomeError
from forge.labelling.cli import read_genomes, run
from forge.genomes.labels import read_labels
from forge.labelling.store import LabelStore
from tests.forge.labelling._train_helpers import TINY_CORPUS, TINY_PROTOCOL, tiny_genomes

FAST = {**TINY_PROTOCOL, "tokens": 4 * 32 * 2, "val_tokens": 128}
LABEL = [sys.executable, "-m", "forge.labelling.cli"]


def _overrides(store: Path, **kw) -> list[str]:
    o = [f"store={store}", "dispatch.workers=2", "+dispatch.poll_s=0.1", "dispatch.lease_s=3",  # a resume after a
         f"corpus.max_bytes={TINY_CORPUS['max_bytes']}",  # kill waits out the killed run's claims: keep them short
         f"corpus.val_fraction={TINY_CORPUS['val_fraction']}"]
    o += [f"protocol.{k}={v}" for k, v in FAST.items()]
    return o + [f"{k}={v}" for k, v in kw.items()]


def _cfg(overrides: list[str]):
    with initialize_config_module(config_module="forge_conf", version_base="1.3"):
        return compose(config_name="forge-label", overrides=overrides)


def _genome_file(tmp_path: Path, n: int) -> Path:
    f = tmp_path / "genomes.jsonl"
    f.write_text("".join(json.dumps(g.to_dict()) + "\n" for g in tiny_genomes(n)))
    return f


def test_run_labels_resumes_and_exports(tmp_path):
    gfile, db, out = _genome_file(tmp_path, 3), tmp_path / "l.db", tmp_path / "l.jsonl"
    s = run(_cfg(_overrides(db, genomes=gfile, export=out, out_dir=tmp_path / "o")))
    assert (s["requested"], s["trained"], s["finite"], s["store_size"], s["exported"]) == (3, 3, 3, 3, 3)
    assert s["median_tokens_per_s"] > 0 and (tmp_path / "o" / "label_summary.json").is_file()
    logged = {p.relative_to(tmp_path / "o" / "logs").parts[0] for p in (tmp_path / "o" / "logs").rglob("metrics.csv")}
    assert logged == {g.id for g in tiny_genomes(3)}  # the default CSV logger: one run per genome in the run folder
    labs = list(read_labels(out))
    assert {lab.genome_id for lab in labs} == {g.id for g in tiny_genomes(3)}
    assert all("tokens_per_s" in lab.provenance and "wall_s" in lab.provenance for lab in labs)
    again = run(_cfg(_overrides(db, genomes=gfile)))
    assert (again["trained"], again["skipped_done"], again["store_size"]) == (0, 3, 3)


def test_sampling_uses_the_space_and_seed(tmp_path):
    cfg = _cfg(_overrides(tmp_path / "s.db", n=2, seed=7))
    from forge.labelling.cli import _genomes

    a, b = _genomes(cfg), _genomes(_cfg(_overrides(tmp_path / "s.db", n=2, seed=8)))
    assert [g.id for g in a] == [g.id for g in _genomes(cfg)] and a != b
    assert all(g.d_model == 128 and g.vocab_size == 256 for g in a)


def test_read_genomes_formats_and_errors(tmp_path):
    from forge.runtime.config import data_dir

    assert read_genomes(data_dir() / "archs" / "gpt2.yaml")[0].d_model == 768
    assert len(read_genomes(data_dir() / "archs")) >= 7
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"d_model": 1}\nnot json\n')
    with pytest.raises(GenomeError, match="bad.jsonl:1"):
        read_genomes(bad)
    with pytest.raises(GenomeError, match="not found"):
        read_genomes(tmp_path / "none.jsonl")


def test_kill9_labelling_process_then_resume(tmp_path):
    """kill -9 the whole forge-label process group mid-run; the store keeps every finished label and a
    resumed run trains only the rest."""
    gfile, db = _genome_file(tmp_path, 6), tmp_path / "k.db"
    args = LABEL + _overrides(db, genomes=gfile, **{"dispatch.workers": 1, "hydra.run.dir": tmp_path / "h"})
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, count = time.monotonic() + 900, 0  # bounds a broken run; a loaded machine is slow
    while time.monotonic() < deadline and count < 2:
        time.sleep(0.2)
        if db.exists():
            con = sqlite3.connect(db, timeout=30)
            try:
                count = con.execute("SELECT count(*) FROM forge_labels_v2 WHERE status IN ('done','diverged')").fetchone()[0]
            except sqlite3.OperationalError:
                count = 0
            con.close()
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert 2 <= count < 6, "the run should be killed mid-way"
    before = {lab.genome_id: lab for lab in LabelStore(db).labels()}
    assert len(before) >= 2 and all(lab.finite for lab in before.values())
    s = run(_cfg(_overrides(db, genomes=gfile)))
    assert s["skipped_done"] == len(before) and s["trained"] == 6 - len(before) and s["store_size"] == 6
    after = {lab.genome_id: lab for lab in LabelStore(db).labels()}
    assert all(after[k].label == v.label and after[k].provenance == v.provenance for k, v in before.items())


def test_help_documents_every_option():
    r = subprocess.run(LABEL + ["--help"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0
    for opt in ("n=", "seed=", "genomes=", "store=", "export=", "out_dir=", "space=", "protocol=cpu-proxy|cpu-curve|paper",
                "corpus=stdlib|text|hf", "dispatch=local|ray|submitit", "timeout_s", "retries", "num_gpus", "logger="):
        assert opt in r.stdout, opt
    from forge.labelling.train import Protocol

    for field in Protocol.__dataclass_fields__:
        assert field in r.stdout, f"protocol.{field} undocumented"
    assert "not a stand-in" in r.stdout


def _launcher() -> str:
    try:
        import hydra_plugins.hydra_joblib_launcher  # noqa: F401
    except ImportError:
        return "basic"
    return "joblib"


def test_multirun_writes_one_store(tmp_path):
    """`forge-label -m seed=1,2`: with the joblib launcher (when installed) two processes write one store
    at the same time; else Hydra's basic launcher runs them in turn."""
    launcher = _launcher()
    db = tmp_path / "m.db"
    args = LABEL + ["-m", f"hydra/launcher={launcher}", f"hydra.sweep.dir={tmp_path / 'sweep'}", "n=2", "seed=1,2",
                    "space.L_max=2"] + _overrides(db, **{"dispatch.workers": 1})
    if launcher == "joblib":
        args.append("hydra.launcher.n_jobs=2")
    r = subprocess.run(args, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-2000:]
    labs = list(LabelStore(db).labels())
    summaries = [json.loads(f.read_text()) for f in sorted((tmp_path / "sweep").glob("*/label_summary.json"))]
    assert len(summaries) == 2 and len(labs) == sum(s["trained"] for s in summaries) >= 3


def test_the_store_is_shown_as_typed_relative_to_the_working_folder(tmp_path, monkeypatch):
    """Issue 44 §5: forge-label's last lines name the store relative to where it ran, not by absolute path."""
    from forge.labelling.cli import where
    from forge.labelling.store import LabelStore

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    assert where(LabelStore("sub/l.db")) == "sub/l.db"
    monkeypatch.chdir(tmp_path / "sub")
    assert where(LabelStore(str(tmp_path / "other.db"))) == str((tmp_path / "other.db").resolve())
    assert where(LabelStore("postgresql+psycopg://u:secret@host/db")) == "postgresql+psycopg://u:***@host/db"
