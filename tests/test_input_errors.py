"""Issue 34 §3: input errors are user errors in every command, by category (one line, exit 2, nothing left).

Categories: run files that are not UTF-8 or hold a YAML language tag; a backend config missing a required
option; a full disk inside Hydra's own config writing; a FIFO or a folder where a file is expected; a non-ASCII
unquoted path; an unwritable output path found before any work; a config group's unknown choice; a failing
resume that would rewrite a file; raw HTML from run data in an exported card; `${oc.env:...}` in a saved config.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
import yaml

from forge.errors import ForgeError
from tests.bad_input_kit import cli
from tests.search.conftest import make_search, tiny_space  # noqa: F401  (fixtures)
from tests.test_security import finished_run  # noqa: F401  (the module-scoped fixture)

FAKES = {"backend": ["tests.search.fakes.FakeBackend"], "surrogate": ["tests.search.fakes.FakePredictor"]}
BAD_FILES = {"non-utf8": b"seed: 0\nname: \xff\xfe\n", "tagged": b"seed: !!python/object/apply:os.system ['true']\n"}


def _one_line(err: str, app: str, *parts: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith(f"{app}: error: "), err
    for p in parts:
        assert p in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("bad", list(BAD_FILES))
def test_a_run_config_that_is_not_utf8_or_tagged_is_refused_by_resume_and_verify(finished_run, tmp_path, bad):
    from search.cli import run as run_search
    from search.verify import run as run_verify

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "config.yaml").write_bytes(BAD_FILES[bad])
    with pytest.raises(ForgeError, match=r"config.yaml.*(not a UTF-8 text run config|corrupt run config)") as e:
        run_verify({"run": str(run), "measure": "none", "plugins": FAKES})
    assert "\n" not in str(e.value)
    for name in ("state/checkpoint.json", "history.jsonl"):  # as a run killed before its first checkpoint:
        (run / name).unlink()  # resume then reads config.yaml
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(ForgeError, match=r"config.yaml.*(not a UTF-8 text run config|corrupt run config)"):
        run_search({"resume": str(run), "progress": False, "plugins": FAKES})
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_a_saved_config_is_never_resolved_into_new_files(tmp_path, monkeypatch):
    from search.state import saved_config

    monkeypatch.setenv("FORGE_TEST_SECRET", "hunter2")
    (tmp_path / "config.yaml").write_text("search: {generations: 1}\nnote: ${oc.env:FORGE_TEST_SECRET}\n")
    assert saved_config(tmp_path)["note"] == "${oc.env:FORGE_TEST_SECRET}"


def test_a_backend_missing_a_required_option_is_one_line_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    code, err = cli("forge-search", ["backend=gemmini", "~backend.template", f"hydra.run.dir={tmp_path}/run"],
                    tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line(err, "forge-search", "SystolicBackend needs option 'template'")
    assert not (tmp_path / "run").exists()


def test_a_full_disk_inside_hydras_config_writing_names_the_folder(tmp_path, monkeypatch, capsys):
    import hydra.core.utils

    def full(cfg, filename, output_dir):
        output_dir.mkdir(parents=True, exist_ok=True)
        raise OSError(errno.ENOSPC, "No space left on device")  # a write() names no file

    monkeypatch.setattr(hydra.core.utils, "_save_config", full)
    code, err = cli("forge-space", [], tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line(err, "forge-space", "/.hydra: No space left on device", "free some disk space")
    assert not (tmp_path / "outputs").exists()  # the stamp folder Hydra made is taken back


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_a_folder_is_named_as_such_not_as_missing(tmp_path, monkeypatch, capsys, kind):
    path = tmp_path / "genome.yaml"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    code, err = cli("forge-hw", [f"arch={path}"], tmp_path, monkeypatch, capsys)  # a FIFO must not block
    assert code == 2
    _one_line(err, "forge-hw", str(path), "not a regular file" if kind == "fifo" else "is a folder")


def test_a_non_ascii_unquoted_path_says_how_to_quote_it(tmp_path, monkeypatch, capsys):
    code, err = cli("forge-search", [f"resume={tmp_path}/é"], tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line(err, "forge-search", "quote a value holding spaces or non-ASCII characters")


def test_a_misspelled_key_names_the_closest_valid_key_not_hydras_plus(tmp_path, monkeypatch, capsys):
    """Issue 44 §5: `+searh.pop_size=4` would add a key nothing reads; the closest valid key is the fix."""
    code, err = cli("forge-search", ["searh.pop_size=4"], tmp_path, monkeypatch, capsys)
    assert code == 2 and "+searh" not in err
    _one_line(err, "forge-search", "searh.pop_size is not a setting", "did you mean search.pop_size=4?")
    code, err = cli("forge-search", ["zzzqqq=1"], tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line(err, "forge-search", "zzzqqq is not a setting", "forge-search --cfg job")


def test_an_unknown_group_choice_lists_the_choices(tmp_path, monkeypatch, capsys):
    code, err = cli("forge-search", ["space=nope"], tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line(err, "forge-search", "Could not find 'space/nope'", "allowed: space=gqa-paper | gqa-tiny")


def test_an_unwritable_label_export_is_refused_before_any_training(tmp_path, monkeypatch, capsys):
    from tests.forge.labelling.test_cli import _genome_file

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    gfile = _genome_file(tmp_path, 1)
    code, err = cli("forge-label", [f"genomes={gfile}", "protocol=cpu-proxy", "corpus=stdlib",
                                    f"store={tmp_path / 'l.db'}", f"export={blocker}/labels.jsonl",
                                    f"hydra.run.dir={tmp_path}/o"], tmp_path, monkeypatch, capsys)
    assert code == 2
    _one_line(err, "forge-label", "export path is not writable")
    assert not (tmp_path / "l.db").exists()  # refused before the store was opened, let alone trained into


@pytest.mark.parametrize("where", ["archive.jsonl"])  # a damaged history.csv, derived from the logs, is rebuilt
def test_a_failing_resume_rewrites_no_file(make_search, tmp_path, where):  # (tests/search/run/test_trust_iv.py)
    from search.state import ResumeError
    from tests.search.conftest import tiny_cfg
    from tests.search.run.test_ledger_fallback import _drop_ledger

    cfg = tiny_cfg(evaluator={"n_mc": 2})
    make_search(tmp_path / "run", cfg).run(stop_after=2)
    path = tmp_path / "run" / where
    lines = path.read_text().splitlines(keepends=True)
    if where.endswith("jsonl"):  # a checkpoint without a ledger (an older Forge): its logs are read row by row
        _drop_ledger(tmp_path / "run")  # (with one, the rows past what it covers are dropped, damaged or not)
        path.write_text("".join([*lines[:-1], "not json\n", lines[-1]]))
    else:
        path.write_text("".join([lines[0], "x,y\n", *lines[1:]]))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(ResumeError, match=rf"{where}.*corrupt"):
        make_search(tmp_path / "run", cfg).load()
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "run").rglob("*") if p.is_file()} == before


def test_the_model_card_escapes_html_from_run_data():
    from forge.genomes.importers import load_genome
    from forge.runtime.config import data_dir
    from search.export_card import model_card

    genome = load_genome(data_dir() / "archs" / "gpt2.yaml")
    evil = "<img src=x onerror=alert(1)>"
    info = {"id": "abc", "run": "r`<b>", "generation": 1, "weights": "random init", "params": 1, "n_layers": 1,
            "objectives": [evil], "metrics": {evil: "<script>x</script>", "mu": 3.0}, "space": evil,
            "loss_interval": {"source": evil}, "design": {"x": "`<i>"}}
    card = model_card(info, genome)
    assert "<img" not in card and "<script>" not in card and "&lt;img src=x onerror=alert(1)&gt;" in card
    assert "`r'<b>`" in card and "| &lt;script&gt;x&lt;/script&gt; |" in card


def test_a_yaml_tag_in_any_genome_file_is_one_line(tmp_path):
    from forge.disk.files import read_yaml_file

    p = tmp_path / "g.yaml"
    p.write_bytes(BAD_FILES["tagged"])
    with pytest.raises(ForgeError, match=r"g.yaml:1: corrupt g\b|g.yaml:1: corrupt genome"):
        read_yaml_file(p, "genome")
    assert yaml  # the safe loader refuses the tag, never constructs it


def test_a_full_disk_under_the_log_file_is_one_line_not_a_logging_traceback(tmp_path, monkeypatch, capsys):
    """cli.log on a full disk: one line naming it, once, and the search still ends (its own files are fine here)."""
    import logging

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(logging.FileHandler, "flush", full, raising=False)
    code, err = cli("forge-search", ["space=iha-tiny", "search.generations=1", "search.pop_size=4", "search.offspring=4",
                                     "quiet=true", f"hydra.run.dir={tmp_path}/run"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "cli.log" in ln]
    assert "Logging error" not in err and "Traceback" not in err, err
    assert len(lines) == 1 and "No space left on device" in lines[0] and lines[0].startswith("forge-search: "), err
    assert (tmp_path / "run" / "summary.json").is_file()


def test_a_log_handler_on_a_closed_stderr_is_dropped_without_raising(monkeypatch):
    """When the failing stream is stderr itself (a closed pipe), the one line cannot be written either: the
    handler is still dropped and the command goes on (no exception escapes into the search loop)."""
    import io
    import logging

    from forge.shell.app import quiet_log_errors

    class Closed(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    handler = logging.StreamHandler(Closed())
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [handler])
    monkeypatch.setattr("sys.stderr", Closed())
    quiet_log_errors("forge-search")
    root.warning("a line no stream can take")  # must not raise
    assert handler not in root.handlers
