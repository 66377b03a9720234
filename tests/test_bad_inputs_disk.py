"""Bad conditions rather than bad arguments: a full disk (one line, nothing lost, resumable), a bug that is not a
user error, infeasible constraints as a result, quoted resume paths with spaces, forge-label under SIGTERM."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.bad_input_kit import cli


# ------------------------------------------------------------------ a full disk: one line, nothing lost, resumable
_FSYNC = os.fsync


class _FullDisk:
    """os.fsync raising ENOSPC from its `after`-th call on, `times` times (the atomic writer and the log appends)."""

    def __init__(self, after: int = 0, times: int = 10**9):
        self.calls, self.after, self.times = 0, after, times

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls > self.after and self.times > 0:
            self.times -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        _FSYNC(fd)


def _one_line_enospc(app: str, err: str, names: str) -> None:
    """The error is one line (the last; forge-label's progress lines come before it), with no traceback."""
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and line.startswith(f"{app}: error: ") and "No space left on device" in line, err
    assert names in line and "free some disk space" in line


def test_full_disk_in_forge_space_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(os, "fsync", _FullDisk())
    code, err = cli("forge-space", [f"hydra.run.dir={tmp_path}/out"], tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line_enospc("forge-space", err, "summary.json")
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.parametrize("fail_at", [5, 11])  # the 6th / 12th fsync: generation 0's / generation 1's checkpoint
def test_full_disk_during_a_search_loses_nothing_and_resumes(tmp_path, monkeypatch, capsys, fail_at):
    from forge.shell.app import user_errors
    from search.cli import run
    from tests.search.conftest import tiny_cfg
    from tests.search.run.test_resume import _components

    full = run(tiny_cfg(out_dir=str(tmp_path / "full"), progress=False), _components())
    cfg = tiny_cfg(out_dir=str(tmp_path / "run"), progress=False)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.setattr(os, "fsync", _FullDisk(after=fail_at))
    with pytest.raises(SystemExit) as e, user_errors("forge-search"):
        run(cfg, _components())
    monkeypatch.setattr(os, "fsync", _FullDisk(times=0))  # space freed
    assert e.value.code == 2
    _one_line_enospc("forge-search", capsys.readouterr().err, str(tmp_path / "run"))
    done = run({**cfg, "resume": str(tmp_path / "run")}, _components())
    assert done["status"] == "complete" and done["hypervolume"] == full["hypervolume"]
    for name in ("pareto.jsonl", "archive.jsonl", "history.jsonl"):
        strip = lambda t: [{k: v for k, v in json.loads(x).items() if "wall" not in k} for x in t.splitlines()]  # noqa: E731
        assert strip((tmp_path / "run" / name).read_text()) == strip((tmp_path / "full" / name).read_text()), name


@pytest.mark.slow
def test_full_disk_at_the_end_of_a_label_run_keeps_the_labels(tmp_path, monkeypatch, capsys):
    from forge.shell.app import user_errors
    from forge.labelling.cli import run
    from tests.forge.labelling.test_cli import _cfg, _genome_file, _overrides

    gfile, db = _genome_file(tmp_path, 2), tmp_path / "l.db"
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.setattr(os, "fsync", _FullDisk())  # SQLite syncs by itself; the summary write fails
    with pytest.raises(SystemExit) as e, user_errors("forge-label"):
        run(_cfg(_overrides(db, genomes=gfile, out_dir=tmp_path / "o", **{"dispatch.workers": 1})))
    monkeypatch.setattr(os, "fsync", _FullDisk(times=0))
    assert e.value.code == 2
    _one_line_enospc("forge-label", capsys.readouterr().err, "label_summary.json")
    again = run(_cfg(_overrides(db, genomes=gfile, out_dir=tmp_path / "o")))
    assert (again["skipped_done"], again["trained"]) == (2, 0)


# ------------------------------------------------------------------ bugs are not user errors
def test_an_internal_value_error_in_a_search_is_a_bug(tmp_path, monkeypatch, capsys):
    """exit 1, the traceback, a line saying how to report it, and summary.json `failed` with the reason."""
    from forge.shell.app import user_errors
    from search.archive import ParetoArchive
    from search.cli import run
    from tests.search.conftest import tiny_cfg
    from tests.search.run.test_resume import _components

    calls = {"n": 0}
    real = ParetoArchive.update

    def update(self, entries, F):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("operands could not be broadcast together")
        return real(self, entries, F)

    monkeypatch.setattr(ParetoArchive, "update", update)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.delenv("FORGE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as e, user_errors("forge-search"):
        run(tiny_cfg(out_dir=str(tmp_path / "run"), progress=False), _components())
    err = capsys.readouterr().err
    assert e.value.code == 1 and "Traceback" in err and "operands could not be broadcast" in err
    assert err.strip().splitlines()[-1].startswith("forge-search: internal error: this is a bug in Forge")
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status"] == "failed" and s["reason"] == "ValueError: operands could not be broadcast together"
    assert s["generations_done"] == 1  # the checkpoint of generation 1 stays: resumable once fixed


# ------------------------------------------------------------------ infeasible constraints are a result
def test_no_feasible_genome_ends_with_the_least_violating_table(tmp_path):
    from rich.console import Console

    from search.cli import run
    from search.console import show_end
    from tests.search.conftest import tiny_cfg
    from tests.search.run.test_resume import _components

    cfg = tiny_cfg(out_dir=str(tmp_path / "run"), progress=False, constraints=["val_loss < 3.8", "ttft_ms <= 0"])
    cfg["search"]["generations"] = 2
    s = run(cfg, _components())
    assert s["status"] == "complete" and s["archive_size"] == 0 and s["hypervolume"] == 0.0
    worst = s["least_violating"]
    assert 1 <= len(worst) <= 5 and [w["violation"] for w in worst] == sorted(w["violation"] for w in worst)
    assert all("ttft_ms <= 0" in w["violated"] and w["violated"]["ttft_ms <= 0"] > 0 for w in worst)
    console = Console(record=True, width=160)
    show_end(s, {}, as_json=False, console=console)
    text = console.export_text()
    assert "No genome met the constraints (val_loss < 3.8, ttft_ms <= 0)" in text and worst[0]["id"][:8] in text
    assert "forge-export" not in text


@pytest.mark.slow
def test_readme_gemmini_budget_command_finishes(tmp_path, monkeypatch, capsys):
    """The README tour's budget search (small population): a front or the no-feasible-genome table, exit 0."""
    args = ["backend=gemmini", 'constraints=["val_loss < 3.8","ttft_ms <= 100"]', "search.pop_size=8",
            "search.offspring=8", "search.generations=1", f"hydra.run.dir={tmp_path}/run", "progress=false"]
    code, _ = cli("forge-search", args, tmp_path, monkeypatch, capsys)
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 0 and s["status"] == "complete"
    assert s["archive_size"] > 0 or s["least_violating"]


# ------------------------------------------------------------------ resume= with spaces, forge-label SIGTERM
def test_quoted_resume_path_with_spaces_runs_in_that_folder():
    from search.cli import resume_argv

    d = Path(__file__).parent  # any existing folder; spaces and quotes go through Hydra's quoted string
    assert resume_argv([f"resume='{d}'"])[-2:] == [f"hydra.run.dir='{d}'", "hydra.output_subdir=null"]


@pytest.mark.slow
def test_quoted_resume_with_spaces_leaves_no_stray_folder(tmp_path, monkeypatch, capsys):
    run, cwd = tmp_path / "my runs" / "a b", tmp_path / "cwd"
    cwd.mkdir()
    tiny = ["space=iha-tiny", "evaluator.predictor=forgeformer-iha-tiny", "search.pop_size=4", "search.offspring=4",
            "search.generations=2", "progress=false"]
    code, err = cli("forge-search", [*tiny, "stop_after=1", f"hydra.run.dir='{run}'"], cwd, monkeypatch, capsys)
    assert code == 0 and json.loads((run / "summary.json").read_text())["status"] == "stopped", err[-3000:]
    code, err = cli("forge-search", [f"resume='{run}'", "progress=false"], cwd, monkeypatch, capsys)
    assert code == 0, err[-3000:]
    assert json.loads((run / "summary.json").read_text())["status"] == "complete"
    assert sorted(cwd.rglob("*")) == []  # no outputs/search/<stamp>


@pytest.mark.slow
def test_forge_label_sigterm_releases_claims_and_writes_the_summary(tmp_path):
    import sqlite3
    import time

    from tests.forge.labelling.test_cli import LABEL, _genome_file, _overrides

    gfile, db, out = _genome_file(tmp_path, 20), tmp_path / "t.db", tmp_path / "h"
    args = LABEL + _overrides(db, genomes=gfile, **{"dispatch.workers": 1, "hydra.run.dir": out})
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, count = time.monotonic() + 900, 0  # bounds a broken run; a loaded machine is slow
    while time.monotonic() < deadline and count < 1:
        time.sleep(0.2)
        if db.exists():
            con = sqlite3.connect(db, timeout=30)
            try:
                count = con.execute("SELECT count(*) FROM forge_labels_v2 WHERE status='done'").fetchone()[0]
            except sqlite3.OperationalError:
                count = 0
            con.close()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 143, err[-3000:]
    con = sqlite3.connect(db)
    running = con.execute("SELECT count(*) FROM forge_labels_v2 WHERE status='running'").fetchone()[0]
    con.close()
    s = json.loads((out / "label_summary.json").read_text())
    assert running == 0 and s["status"] == "interrupted" and s["interrupted_by"] == "SIGTERM"
    assert "forge-label: stopped by SIGTERM after" in err  # a line on stderr, as forge-search says it (issue 42 §5)
