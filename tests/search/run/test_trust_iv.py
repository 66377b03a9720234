"""Issue 50 on a real run folder (fakes only): one writer per run (§1), a full disk under verify and export (§4),
a deep JSON row (§3), forge-report's received strings and links (§6), the durable copy and history.csv (§6)."""
from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import pytest

from forge.disk.lock import NOTE, RunFolderBusy
from forge.shell.app import user_errors
from search.cli import run as run_search
from tests.bad_input_kit import cli, unchanged
from tests.forge.disk.test_lock import hold
from tests.search.conftest import tiny_cfg
from tests.search.run.test_resume import FILES, _components
from tests.search.verify.test_verify import _parts, fake_run  # noqa: F401  (fake_run: a fixture)


@pytest.fixture
def stopped(tmp_path) -> tuple[Path, Path, dict]:
    """(the uninterrupted run, the same run stopped after generation 1, its config)."""
    cfg = tiny_cfg(out_dir=str(tmp_path / "full"), progress=False)
    run_search(cfg, _components())
    cfg = {**cfg, "out_dir": str(tmp_path / "part")}
    run_search({**cfg, "stop_after": 1}, _components())
    return tmp_path / "full", tmp_path / "part", cfg


def _rows(run: Path) -> dict[str, int]:
    return {f: (run / f).read_text().count("\n") for f in FILES}


# ------------------------------------------------------------------ §1 one writer per run folder
def test_a_second_resume_is_refused_and_changes_nothing_and_a_killed_holder_frees_the_run(
        stopped, tmp_path, monkeypatch, capsys):
    full, part, cfg = stopped
    holder = hold(part)  # the first `forge-search resume=` (another terminal, a requeued job)
    try:
        with unchanged(part):
            with pytest.raises(RunFolderBusy, match=f"pid {holder.pid} on .*one writer per run folder"):
                run_search({**cfg, "resume": str(part), "stop_after": None}, _components())
            (tmp_path / "cwd").mkdir()
            code, err = cli("forge-search", [f"resume={part}", "progress=false"], tmp_path / "cwd", monkeypatch,
                            capsys)  # the console entry: refused before Hydra writes its log there
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and f"pid {holder.pid}" in lines[0], err
        assert lines[0].startswith("forge-search: error: ") and "is being written by" in lines[0]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    done = run_search({**cfg, "resume": str(part), "stop_after": None}, _components())  # the lock died with its holder
    assert done["status"] == "complete" and _rows(part) == _rows(full)  # no row written twice
    assert not (part / NOTE).exists()


def test_a_new_search_into_a_folder_another_command_holds_is_refused(tmp_path, monkeypatch, capsys):
    d = tmp_path / "shared"
    holder = hold(d)  # a sweep or a second terminal naming the same hydra.run.dir
    try:
        (tmp_path / "cwd").mkdir()
        with unchanged(d):
            code, err = cli("forge-search", [f"hydra.run.dir={d}", "space=iha-tiny", "progress=false"],
                            tmp_path / "cwd", monkeypatch, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and f"pid {holder.pid}" in err, err
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in d.iterdir()) == [NOTE]  # only the holder's (stale) note: nothing of the second


# ------------------------------------------------------------------ §4 a full disk under verify and export
def _full_disk_worker(monkeypatch) -> None:
    """The labelling worker's training fails writing its weights on a full disk (as on a real one)."""
    import forge.labelling.corpus as corpus
    import forge.labelling.train as train

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", "/full/verify/weights/x.safetensors")

    monkeypatch.setattr(train, "train_genome", no_space)
    monkeypatch.setattr(train.Protocol, "from_config", staticmethod(lambda c: None))
    monkeypatch.setattr(corpus, "build_corpus", lambda c: None)


class WorkerTrainer:
    """Trains through the real worker entry (forge.labelling.base.train_one)."""

    on_label = None

    def train(self, genomes):
        from forge.genomes.labels import Label
        from forge.labelling.base import train_one

        return [Label.from_json(train_one(g.to_dict(), {"protocol": {}, "corpus": {}})) for g in genomes]


def test_a_full_disk_under_verify_is_one_line_exit_2_not_a_loss(fake_run, tiny_space, tmp_path, monkeypatch,
                                                                 capsys):
    from search.verify import run as run_verify

    _full_disk_worker(monkeypatch)
    parts = {**_parts(tiny_space, tmp_path / "l.db"), "trainer": WorkerTrainer()}
    with pytest.raises(SystemExit) as e, user_errors("forge-verify"):
        run_verify({"run": str(fake_run), "k": 2, "control": 0}, parts)
    line = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(line) == 1 and "no space left on /full/verify/weights/x.safetensors" in line[0]
    assert not (fake_run / "verify" / "verify.json").exists()


def test_a_full_disk_when_verify_writes_its_report_leaves_nothing_half_written(fake_run, tiny_space, tmp_path,
                                                                               monkeypatch, capsys):
    from search.verify import run as run_verify
    from tests.test_bad_inputs_disk import _FullDisk

    monkeypatch.setattr(os, "fsync", _FullDisk())
    with pytest.raises(SystemExit) as e, user_errors("forge-verify"):
        run_verify({"run": str(fake_run), "k": 2, "control": 0}, _parts(tiny_space, tmp_path / "l.db"))
    line = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(line) == 1 and "no space left on " in line[0] and "verify" in line[0]
    assert sorted(p.name for p in (fake_run / "verify").iterdir()) == []  # no figure, no verify.json, no temp


@pytest.mark.parametrize("error", ["oserror", "safetensors"])
def test_a_full_disk_under_export_is_one_line_and_out_is_untouched(fake_run, tmp_path, monkeypatch, capsys, error):
    import safetensors
    import safetensors.torch

    def no_space(*a, **k):
        if error == "oserror":
            raise OSError(errno.ENOSPC, "No space left on device")  # a write() names no file
        raise safetensors.SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                                          "message: \"No space left on device\" })")

    monkeypatch.setattr(safetensors.torch, "save_model", no_space)
    out = tmp_path / "exported"
    code, err = cli("forge-export", [f"run={fake_run}", f"out={out}", "select=knee"], tmp_path, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"no space left on {out}" in lines[0], err
    assert not out.exists() and not list(tmp_path.glob(".exported.*"))


def test_a_row_nested_100000_deep_is_a_corrupt_line_not_a_recursion_error(fake_run, tmp_path, monkeypatch, capsys):
    row = json.loads((fake_run / "pareto.jsonl").read_text().splitlines()[0])
    deep = json.dumps({**row, "extra": None}).replace("null", "[" * 100_000 + "]" * 100_000)
    (fake_run / "pareto.jsonl").write_text(deep + "\n")
    code, err = cli("forge-export", [f"run={fake_run}", f"out={tmp_path / 'x'}"], tmp_path, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "pareto.jsonl" in lines[0] and "Traceback" not in err, err


# ------------------------------------------------------------------ §6 forge-report, the durable copy, history.csv
def test_forge_report_prints_received_names_inert_and_refuses_a_summary_link(fake_run, tmp_path):
    from search.report import human, make_report
    from forge.errors import ForgeError

    s = json.loads((fake_run / "summary.json").read_text())
    s["algorithm"] = "nsga\x1b]0;owned\x07\x1b[2J"  # retitle the terminal, clear the screen
    (fake_run / "summary.json").write_text(json.dumps(s))
    text = "\n".join(human(make_report([fake_run], tmp_path / "rep")))
    assert "\x1b" not in text and "\x07" not in text and "nsga\\x1b]0;owned\\x07\\x1b[2J" in text
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps(s))
    (fake_run / "summary.json").unlink()
    (fake_run / "summary.json").symlink_to(outside)
    with pytest.raises(ForgeError, match="summary.json: a link inside the run folder"):
        make_report([fake_run], tmp_path / "rep2")


def test_the_durable_copy_is_used_when_the_newest_checkpoint_is_missing(stopped, capsys):
    from search.state import CHECKPOINT

    full, part, cfg = stopped
    (part / CHECKPOINT).unlink()
    done = run_search({**cfg, "resume": str(part), "stop_after": None}, _components())
    assert done["status"] == "complete" and "checkpoint.json is missing; continuing from" in capsys.readouterr().err
    for f in FILES:
        assert (part / f).read_text() == (full / f).read_text(), f
    (part / CHECKPOINT).unlink()
    (part / CHECKPOINT).mkdir()  # a folder: refused in one line (the next checkpoint could not replace it)
    from search.state import ResumeError

    with pytest.raises(ResumeError, match="checkpoint.json is a folder, not a file; allowed: the regular file"):
        run_search({**cfg, "resume": str(part), "stop_after": None}, _components())


def test_a_damaged_history_csv_is_rebuilt_from_the_checkpoint(stopped, capsys):
    import csv
    import io

    full, part, cfg = stopped
    (part / "history.csv").write_bytes(b"generation,hv\nnot a number,\xff\n")
    done = run_search({**cfg, "resume": str(part), "stop_after": None}, _components())
    assert done["status"] == "complete" and "history.csv is damaged" in capsys.readouterr().err
    rows = list(csv.DictReader(io.StringIO((part / "history.csv").read_text())))
    want = list(csv.DictReader(io.StringIO((full / "history.csv").read_text())))
    assert [r["generation"] for r in rows] == [r["generation"] for r in want]
    assert [r["hv"] for r in rows] == [r["hv"] for r in want]
