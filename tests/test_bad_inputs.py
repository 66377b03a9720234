"""Every forge-* command on bad input: exit 2, one line on stderr, no traceback, nothing changed on disk.

Each case runs the real console entry point (read from pyproject's [project.scripts]) as a subprocess in a
folder of its own, against a shared "world" of run directories and files. The runs' files are hashed
before and after: a refused command must leave them byte-identical (mtimes too) and create nothing in
its working folder. CLI start-up costs seconds on a busy box, so the cases run in parallel; the default
run keeps a representative fast subset, the whole table is `slow`.
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pytest

from forge.config import data_dir
from forge.labels import Label, write_labels

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


@dataclass(frozen=True)
class Case:
    id: str
    app: str
    args: tuple[str, ...]
    says: str  # a fragment the one error line must contain (the key or file it names)


def _cases(w: str) -> list[Case]:
    """The table; `w` is the world folder (its files are made by `world` below)."""
    return [
        # forge-surrogate, every mode
        Case("surrogate-unknown-mode", "forge-surrogate", ("mode=fit",), "mode='fit' is unknown; allowed: train"),
        Case("surrogate-missing-file", "forge-surrogate", ("mode=eval", f"data={w}/nope.jsonl"), "nope.jsonl"),
        Case("surrogate-all-nan-csv", "forge-surrogate", (f"data={w}/allnan.csv", "space=iha-tiny"), "allnan.csv"),
        Case("surrogate-missing-column", "forge-surrogate", ("mode=eval", f"data={w}/nocol.csv"), "nocol.csv"),
        Case("surrogate-torn-jsonl", "forge-surrogate", ("mode=eval", "ckpt=forgeformer-iha-tiny", f"data={w}/torn.jsonl"),
             "torn.jsonl:3"),
        Case("surrogate-truncated-ckpt", "forge-surrogate", ("mode=eval", f"ckpt={w}/trunc.json", f"data={w}/labels.jsonl"),
             "trunc"),
        Case("surrogate-wrong-space-ckpt", "forge-surrogate",
             ("mode=finetune", "ckpt=forgeformer-iha-tiny", f"new={w}/paper.jsonl", f"data={w}/paper.jsonl",
              f"out={w}/ft"), "iha-tiny"),
        Case("surrogate-finetune-needs-new", "forge-surrogate", ("mode=finetune", f"data={w}/labels.jsonl"), "new="),
        Case("surrogate-binary-data", "forge-surrogate", ("mode=eval", f"data={w}/binary.jsonl"), "binary.jsonl"),
        Case("surrogate-unwritable-out", "forge-surrogate",
             (f"data={w}/labels.jsonl", "space=iha-tiny", f"out={w}/afile/ckpt"), "afile"),
        Case("surrogate-seed-abc", "forge-surrogate", ("seed=abc",), "seed"),
        # genomes read from a binary / non-UTF-8 file
        Case("arch-binary-genome", "forge-arch", (f"arch={w}/binary.yaml",), "binary.yaml"),
        Case("arch-latin1-genome", "forge-arch", (f"arch={w}/latin1.yaml",), "latin1.yaml"),
        Case("hw-binary-genome", "forge-hw", (f"arch={w}/binary.yaml",), "binary.yaml"),
        Case("search-binary-sampling", "forge-search", ("search.sampling=" + f"{w}/binary.yaml", f"hydra.run.dir={w}/new"),
             "binary.yaml"),
        Case("label-binary-genomes", "forge-label", (f"genomes={w}/binary.jsonl", f"store={w}/s.db"), "binary.jsonl"),
        # integers that do not parse, values out of range, unknown choices
        Case("search-seed-abc", "forge-search", ("seed=abc",), "seed"),
        Case("search-mutation-rate", "forge-search", ("search.mutation.rate=1.5",), "search.mutation.rate"),
        Case("search-hv-ref", "forge-search", ("hv.ref=-1",), "hv.ref"),
        Case("search-pop-size-str", "forge-search", ("search.pop_size=many",), "search.pop_size"),
        Case("search-unknown-group", "forge-search", ("search=nope",), "search/nope"),
        Case("arch-seed-key", "forge-arch", ("quiet=maybe",), "quiet"),
        Case("space-unknown", "forge-space", ("space=nope",), "space/nope"),
        Case("hw-unknown-backend", "forge-hw", ("backend=nope",), "backend/nope"),
        Case("hw-seed-abc", "forge-hw", ("top_ops=abc",), "top_ops"),
        Case("serve-unknown-command", "forge-serve", ("command=nope",), "command"),
        Case("label-seed-abc", "forge-label", ("seed=abc",), "seed"),
        Case("label-n-abc", "forge-label", ("n=abc",), "n="),
        # a finished run is not overwritten, a resume with another config is refused
        Case("search-rundir-finished", "forge-search", (f"hydra.run.dir={w}/done", "seed=5"), "already holds a search"),
        Case("search-resume-other-seed", "forge-search", (f"resume={w}/done", "seed=5"), "seed"),
        Case("search-resume-not-a-run", "forge-search", (f"resume={w}/labels.jsonl",), "no search state"),
        # unfinished runs are refused by the consumers
        Case("export-stopped-run", "forge-export", (f"run={w}/stopped", f"out={w}/exp"), "generation 1 of 3"),
        Case("export-bad-select", "forge-export", (f"run={w}/done", "select=best", f"out={w}/exp"), "select='best'"),
        Case("export-unwritable-out", "forge-export", (f"run={w}/done", f"out={w}/afile/x"), "afile"),
        Case("report-stopped-run", "forge-report", (f"runs={w}/stopped", f"out={w}/rep"), "stopped at generation 1"),
        Case("report-top-abc", "forge-report", (f"runs={w}/done", "top=abc"), "top"),
        Case("verify-k-abc", "forge-verify", (f"run={w}/done", "k=abc"), "k="),
        # labelling side (forge/labelling)
        Case("label-workers-0", "forge-label", ("dispatch.workers=0", f"store={w}/s.db"), "dispatch.workers"),
        Case("label-string-label", "forge-label", (f"genomes={w}/strlabel.jsonl", f"store={w}/s.db"), "strlabel.jsonl"),
        Case("label-bad-store-url", "forge-label", ("store=nosuchdb+x://host/db",), "store"),
        Case("label-store-not-a-db", "forge-label", (f"store={w}/labels.jsonl",), "labels.jsonl"),
    ]


FAST = ("arch-binary-genome", "space-unknown", "arch-seed-key")  # light start-up: no torch, no pymoo


def _make_runs(w: Path) -> None:
    """A finished and a stopped search (fakes injected, so no start-up cost in the subprocesses' worlds)."""
    from tests.search.test_resume import _components
    from tests.search.conftest import tiny_cfg
    from search.cli import run

    cfg = tiny_cfg(out_dir=str(w / "done"), progress=False)
    cfg["search"]["generations"] = 3
    run(cfg, _components())
    run(dict(cfg, out_dir=str(w / "stopped"), stop_after=1), _components())
    for d in ("done", "stopped"):  # what Hydra leaves in a run directory
        (w / d / ".hydra").mkdir()
        (w / d / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
        (w / d / "cli.log").write_text("")


def _make_files(w: Path) -> None:
    from tests.surrogate.conftest import synth_labels

    write_labels(w / "labels.jsonl", synth_labels(40))
    lines = (w / "labels.jsonl").read_text().splitlines()
    (w / "torn.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2] + "\n")
    row = json.loads(lines[0])
    (w / "strlabel.jsonl").write_text(json.dumps({**row, "label": str(row["label"])}) + "\n")
    src = data_dir() / "surrogate"
    shutil.copy(src / "forgeformer-iha-tiny.json", w / "trunc.json")
    (w / "trunc.safetensors").write_bytes((src / "forgeformer-iha-tiny.safetensors").read_bytes()[:1000])
    (w / "binary.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    (w / "binary.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    (w / "latin1.yaml").write_bytes("name: caf\xe9\nd_model: 64\n".encode("latin-1"))
    (w / "afile").write_text("a file, not a folder\n")
    from forge.space import load_space
    import numpy as np

    paper = load_space("iha-paper").sample(12, np.random.default_rng(0))
    write_labels(w / "paper.jsonl", [Label(g, 3.5 + 0.01 * i, {"protocol": "synthetic"}) for i, g in enumerate(paper)])
    text = _llmforge_csv(w)
    (w / "allnan.csv").write_text(text.replace(",3.5,", ",nan,"))
    rows = list(csv.reader(io.StringIO(text)))
    drop = rows[0].index("global_n_embd")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([c for i, c in enumerate(r) if i != drop] for r in rows)
    (w / "nocol.csv").write_text(buf.getvalue())


def _llmforge_csv(w: Path) -> str:
    """A two-row LLMForge-format CSV (val_loss 3.5) of iha-tiny genomes."""
    import numpy as np
    from forge.space import load_space

    gs = load_space("iha-tiny").sample(2, np.random.default_rng(1))
    n = max(len(g.layers) for g in gs)
    head = ["#idx", "global_n_embd", "global_block_size", "global_layer_mask", "val_loss", "params"]
    for i in range(n):
        head += [f"layer{i}_{k}" for k in ("n_head", "n_kv_group", "n_qk_head_dim", "n_v_head_dim", "mlp_size",
                                            "attention_variant")]
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(head)
    for j, g in enumerate(gs):
        cells = [str(j), str(g.d_model), str(g.block_size), str([lay.active for lay in g.layers]), "3.5", "1000"]
        for lay in g.layers:
            cells += [str(lay.n_h), str(lay.n_kv), str(lay.d_qk), str(lay.d_v), str(lay.d_mlp),
                      "infinite" if lay.attn else "identity"]
        out.writerow(cells)
    return buf.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("world")
    _make_runs(w)
    _make_files(w)
    return w


def _state(w: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(w)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(w.rglob("*")) if p.is_file()}


def _invoke(case: Case, cwd: Path) -> subprocess.CompletedProcess:
    mod, fn = SCRIPTS[case.app].split(":")
    code = f"import sys; sys.argv[0] = {case.app!r}; from {mod} import {fn}; {fn}()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORGE_DEBUG": ""}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-c", code, *case.args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _run_all(world: Path, cases: list[Case], tmp: Path) -> dict[str, tuple[subprocess.CompletedProcess, list[str]]]:
    """Run the cases in parallel; return each one's process and what it left in its own working folder."""
    folders = {c.id: tmp / c.id for c in cases}
    for f in folders.values():
        f.mkdir()
    with ThreadPoolExecutor(max_workers=int(os.environ.get("FORGE_TEST_WORKERS", "3"))) as ex:
        procs = dict(zip([c.id for c in cases], ex.map(lambda c: _invoke(c, folders[c.id]), cases)))
    return {k: (p, sorted(str(x.relative_to(folders[k])) for x in folders[k].rglob("*"))) for k, p in procs.items()}


def _check(case: Case, proc: subprocess.CompletedProcess, left: list[str]) -> None:
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, f"{case.id}: rc {proc.returncode}; stderr:\n{proc.stderr[-3000:]}"
    assert len(err) == 1 and "Traceback" not in proc.stderr, f"{case.id}: stderr is not one line:\n{proc.stderr[-3000:]}"
    assert err[0].startswith(f"{case.app}: error: ") and case.says in err[0], f"{case.id}: {err[0]}"
    assert left == [], f"{case.id}: left {left} in its working folder"


def _table(world: Path, ids: tuple[str, ...] | None, tmp: Path) -> dict:
    cases = [c for c in _cases(str(world)) if ids is None or c.id in ids]
    before = _state(world)
    results = _run_all(world, cases, tmp)
    after = _state(world)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return {"cases": cases, "results": results, "changed": changed}


def test_fast_subset_exits_2_with_one_line(world, tmp_path):
    t = _table(world, FAST, tmp_path)
    assert t["changed"] == []
    for c in t["cases"]:
        _check(c, *t["results"][c.id])


@pytest.fixture(scope="module")
def table(world, tmp_path_factory):
    return _table(world, None, tmp_path_factory.mktemp("cwd"))


@pytest.mark.slow
def test_no_bad_input_changes_a_file_of_an_existing_run(table):
    assert table["changed"] == []


@pytest.mark.slow
@pytest.mark.parametrize("case_id", [c.id for c in _cases("W")])
def test_bad_input_exits_2_with_one_line(table, case_id):
    case = next(c for c in table["cases"] if c.id == case_id)
    _check(case, *table["results"][case_id])


def test_user_errors_one_line_exit_2_and_bugs_keep_their_traceback(capsys, monkeypatch):
    from forge.app import user_errors
    from forge.errors import UserError

    monkeypatch.delenv("FORGE_DEBUG", raising=False)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # what the outermost user_errors sets; restored after the test
    with pytest.raises(SystemExit) as e, user_errors("forge-x"):
        raise UserError("seed='abc' is not an integer;\n allowed: an integer")
    assert e.value.code == 2
    assert capsys.readouterr().err == "forge-x: error: seed='abc' is not an integer;; allowed: an integer\n"
    with pytest.raises(SystemExit) as e, user_errors("forge-x"):
        raise FileNotFoundError(2, "No such file or directory", "/nope/file.yaml")
    assert e.value.code == 2 and capsys.readouterr().err == "forge-x: error: /nope/file.yaml: No such file or directory\n"
    with pytest.raises(SystemExit) as e, user_errors("forge-x"):
        raise KeyboardInterrupt
    assert e.value.code == 130
    with pytest.raises(SystemExit) as e, user_errors("forge-x"):  # a bug is not bad input: exit 1, traceback
        1 / 0
    err = capsys.readouterr().err
    assert e.value.code == 1 and "Traceback" in err and "ZeroDivisionError" in err
    assert err.strip().splitlines()[-1].startswith("forge-x: internal error: this is a bug in Forge")
    with pytest.raises(SystemExit) as e, user_errors("forge-x"):  # nor is numpy's ValueError (only Forge's family)
        raise ValueError("cannot reshape array of size 0 into shape (0,newaxis)")
    assert e.value.code == 1 and "Traceback" in capsys.readouterr().err
    monkeypatch.setenv("FORGE_DEBUG", "1")
    with pytest.raises(UserError), user_errors("forge-x"):
        raise UserError("kept for debugging")


def test_override_types_follow_the_shipped_defaults():
    from hydra import compose, initialize_config_module

    from forge.config import check_override_types
    from forge.errors import UserError

    def check(*overrides):
        with initialize_config_module(config_module="forge_conf", version_base="1.3"):
            cfg = compose("forge-search", overrides=list(overrides), return_hydra_config=True)
        cfg.hydra.job.config_name = "forge-search"
        check_override_types(cfg.hydra)

    check("seed=3", "hv.ref=1", "search.mutation.rate=0.5", "search=random", "protocol.tokens=1e6", "+extra=x",
          "space.d_model=[512,768]", "space.mlp=[gelu,swiglu]")  # a grid for a searchable global gene (forge.genes)
    for bad, says in (("seed=abc", "seed='abc' is not an integer"), ("search.pop_size=1.5", "search.pop_size"),
                      ("hv.ref=far", "hv.ref='far' is not a number"), ("progress=maybe", "progress='maybe' is not a boolean"),
                      ("seed=[1,2]", "seed=.* is not an integer"), ("space.d_model=[512,wide]", "is not an integer"),
                      ("space.vocab_size=[256,512]", "space.vocab_size=.* is not an integer")):
        with pytest.raises(UserError, match=says):
            check(bad)


def test_run_dir_guard_restores_hydra_files_and_removes_a_fresh_folder(tmp_path):
    from forge.app import RunDirGuard

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    (run / "summary.json").write_text("{}")
    before = _state(run)
    g = RunDirGuard.from_argv(["seed=5", f"hydra.run.dir={run}"])
    (run / ".hydra" / "overrides.yaml").write_text("- seed=5\n")  # what Hydra does before the job runs
    (run / ".hydra" / "config.yaml").write_text("seed: 5\n")
    (run / "cli.log").write_text("")
    g.undo()
    assert _state(run) == before
    fresh = tmp_path / "fresh"
    g = RunDirGuard.from_argv([f"hydra.run.dir={fresh}"])
    (fresh / ".hydra").mkdir(parents=True)
    (fresh / "config.yaml").write_text("x")
    g.undo()
    assert not fresh.exists() and run.is_dir()


def test_run_dir_guard_never_deletes_work_written_before_the_error(tmp_path):
    """A fresh named run folder is removed only while it holds setup files; once a checkpoint exists, an error
    raised later takes back Hydra's files and leaves the computed state."""
    from forge.app import RunDirGuard

    run = tmp_path / "named"
    g = RunDirGuard.from_argv([f"hydra.run.dir={run}"])
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
    (run / "config.yaml").write_text("seed: 0\n")
    (run / ".checkpoint.json").write_text("{}")
    g.undo()
    assert (run / ".checkpoint.json").is_file() and (run / "config.yaml").is_file()
    assert not (run / ".hydra" / "config.yaml").exists()


# ------------------------------------------------------------------------------------------------------------
# Issue 25 §2-3, by category: each category is one parametrized test over several variants per CLI, run in
# process (the real console entry, sys.argv set) so a variant costs a Hydra compose, not an interpreter start.
# `unchanged` asserts the refused command left every file byte- and mtime-identical and added nothing.


@contextmanager
def unchanged(*folders: Path) -> Iterator[None]:
    """Every file under `folders` is byte- and mtime-identical afterwards; no file or folder added or removed."""
    def tree(f: Path) -> dict[str, tuple[bytes, int] | str]:
        return {**{str(p.relative_to(f)): "dir" for p in f.rglob("*") if p.is_dir()}, **_state(f)}

    before = {f: tree(f) for f in folders}
    yield
    for f in folders:
        after = tree(f)
        changed = sorted(k for k in set(before[f]) | set(after) if before[f].get(k) != after.get(k))
        assert changed == [], f"{f}: changed {changed}"


@dataclass(frozen=True)
class Variant:
    id: str
    app: str
    args: tuple[str, ...]  # "{r}" = the variant's own copy of a finished run, "{w}" = the world, "{c}" = its cwd
    says: str
    prepare: Callable[[Path], None] | None = None  # corrupts the run copy


def cli(app: str, args: Sequence[str], cwd: Path, monkeypatch, capsys) -> tuple[int, str]:
    """Run a console entry point in process; (exit code, stderr)."""
    import importlib

    mod, fn = SCRIPTS[app].split(":")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [app, *args])
    monkeypatch.delenv("FORGE_DEBUG", raising=False)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    capsys.readouterr()
    try:
        getattr(importlib.import_module(mod), fn)()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, capsys.readouterr().err


def refused(v: Variant, world: Path, tmp: Path, monkeypatch, capsys) -> str:
    """Run a variant on a fresh copy of the finished run: exit 2, one line naming the problem, nothing changed."""
    run, cwd = tmp / "run copy", tmp / "cwd"
    shutil.copytree(world / "done", run)
    cwd.mkdir()
    if v.prepare:
        v.prepare(run)
    args = [a.format(r=run, w=world, c=cwd) for a in v.args]
    with unchanged(run, world):
        code, err = cli(v.app, args, cwd, monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2, f"{v.id}: rc {code}\n{err[-3000:]}"
    assert len(lines) == 1 and lines[0].startswith(f"{v.app}: error: ") and v.says in lines[0], f"{v.id}: {err[-3000:]}"
    assert sorted(cwd.rglob("*")) == [], f"{v.id}: left {sorted(cwd.rglob('*'))}"
    return lines[0]


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda r: (r / rel).write_text(text)


def _ckpt_dir(r: Path) -> None:
    (r / "state" / "checkpoint.json").unlink()
    (r / "state" / "checkpoint.json").mkdir()


def _ckpt_garbage_pop(r: Path) -> None:
    st = json.loads((r / "state" / "checkpoint.json").read_text())
    (r / "state" / "checkpoint.json").write_text(json.dumps({**st, "pop": {"X": "not an array"}}))


CORRUPT_STATE = [
    Variant("search-ckpt-empty", "forge-search", ("resume={r}",), "corrupt checkpoint", _write("state/checkpoint.json", "")),
    Variant("search-ckpt-list", "forge-search", ("resume={r}",), "a JSON list", _write("state/checkpoint.json", "[1, 2]")),
    Variant("search-ckpt-missing-keys", "forge-search", ("resume={r}",), "missing or mistyped",
            _write("state/checkpoint.json", '{"generation": 3, "config": {}}')),
    Variant("search-ckpt-directory", "forge-search", ("resume={r}",), "not a file", _ckpt_dir),
    Variant("search-ckpt-deleted", "forge-search", ("resume={r}",), "is missing but history.jsonl records 4",
            lambda r: (r / "state" / "checkpoint.json").unlink()),
    Variant("search-ckpt-garbage-pop", "forge-search", ("resume={r}",), "cannot restore it", _ckpt_garbage_pop),
    Variant("export-summary-list", "forge-export", ("run={r}", "out={c}/exp"), "summary.json", _write("summary.json", "[]")),
    Variant("verify-summary-string", "forge-verify", ("run={r}", "k=1"), "summary.json", _write("summary.json", '"done"')),
    Variant("export-summary-dir", "forge-export", ("run={r}", "out={c}/exp"), "summary.json",
            lambda r: ((r / "summary.json").unlink(), (r / "summary.json").mkdir())),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", CORRUPT_STATE, ids=lambda v: v.id)
def test_corrupt_run_state_is_refused_and_changes_nothing(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


def _sqlite(sql: str) -> Callable[[Path], None]:
    def make(r: Path) -> None:
        import sqlite3

        con = sqlite3.connect(r / "store.db")
        con.executescript(sql)
        con.commit()
        con.close()
    return make


def _bad_weights(suffix: str, data: bytes) -> Callable[[Path], None]:
    def make(r: Path) -> None:
        (r / "weights").mkdir()
        for row in (json.loads(x) for x in (r / "pareto.jsonl").read_text().splitlines()):
            (r / "weights" / f"{row['id']}{suffix}").write_bytes(data)
    return make


CORRUPT_STORES = [
    Variant("label-sqlite-other-tables", "forge-label", ("store={r}/store.db", "n=1"), "not a Forge label store",
            _sqlite("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');")),
    Variant("label-sqlite-wrong-columns", "forge-label", ("store={r}/store.db", "n=1"), "lacks column",
            _sqlite("CREATE TABLE forge_labels_v2 (genome_id TEXT, label REAL);")),
    Variant("label-status-wrong-schema", "forge-label", ("action=status", "store={r}/store.db"), "not a Forge label store",
            _sqlite("CREATE TABLE t (x INTEGER);")),
    Variant("export-corrupt-pt", "forge-export", ("run={r}", "weights={r}/weights", "out={c}/exp"),
            "not a readable weights file", _bad_weights(".pt", b"PK\x03\x04 not a torch file" * 4)),
    Variant("export-corrupt-safetensors", "forge-export", ("run={r}", "weights={r}/weights", "out={c}/exp"),
            "not a readable weights file", _bad_weights(".safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", CORRUPT_STORES, ids=lambda v: v.id)
def test_corrupt_stores_and_weights_are_refused(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


def _dup_yaml(r: Path) -> None:
    (r / "dup.yaml").write_text((data_dir() / "archs" / "gpt2.yaml").read_text() + "\nd_model: 512\n")


CONFIG_MISTAKES = [
    Variant("arch-duplicate-key", "forge-arch", ("arch={r}/dup.yaml",), "given twice", _dup_yaml),
    Variant("label-duplicate-key", "forge-label", ("genomes={r}/dup.yaml", "store={r}/s.db"), "given twice", _dup_yaml),
    Variant("search-duplicate-key", "forge-search", ("search.sampling={r}/dup.yaml", "hydra.run.dir={c}/new"),
            "given twice", _dup_yaml),
    Variant("label-empty-genomes", "forge-label", ("genomes={r}/empty.jsonl", "store={r}/s.db"), "holds no genome",
            _write("empty.jsonl", "")),
    Variant("label-blank-genomes", "forge-label", ("genomes={r}/blank.jsonl", "store={r}/s.db"), "holds no genome",
            _write("blank.jsonl", "\n\n")),
    Variant("report-top-0", "forge-report", ("runs={r}", "top=0", "out={c}/rep"), "top=0"),
    Variant("search-seed-negative", "forge-search", ("seed=-1",), "seed=-1"),
    Variant("search-pop-1e9", "forge-search", ("search.pop_size=1000000000",), "search.pop_size=1000000000"),
    Variant("search-offspring-1e9", "forge-search", ("search.offspring=1000000000",), "what fits in"),
    Variant("label-n-1e9", "forge-label", ("n=1000000000", "store={r}/s.db"), "n=1000000000"),
    Variant("label-seed-negative", "forge-label", ("seed=-1", "store={r}/s.db"), "seed=-1"),
    Variant("hw-calibrate-n-0", "forge-hw", ("mode=calibrate", "calibrate.n=0"), "calibrate.n=0"),
    Variant("surrogate-seed-negative", "forge-surrogate", ("seed=-1",), "seed=-1"),
    Variant("verify-k-0", "forge-verify", ("run={r}", "k=0"), "k=0"),
    Variant("serve-seed-negative", "forge-serve", ("seed=-5",), "seed=-5"),
]


@pytest.mark.slow
@pytest.mark.parametrize("v", CONFIG_MISTAKES, ids=lambda v: v.id)
def test_config_mistakes_and_ranges_are_refused(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize("v", [v for v in CONFIG_MISTAKES if v.id in ("arch-duplicate-key", "search-seed-negative")],
                         ids=lambda v: v.id)
def test_config_mistakes_fast_subset(v, world, tmp_path, monkeypatch, capsys):
    refused(v, world, tmp_path, monkeypatch, capsys)


def test_range_messages_name_the_key_and_the_memory_bound():
    from forge.errors import RangeError
    from forge.limits import check_range, genome_limit

    check_range("forge-search", "search.pop_size", genome_limit())
    for app, key, value in (("forge-search", "seed", -1), ("forge-label", "n", 0), ("forge-hw", "calibrate.n", 0),
                            ("forge-search", "search.pop_size", genome_limit() + 1), ("forge-report", "top", 0)):
        with pytest.raises(RangeError, match=f"^{key}={value!r} is out of range; allowed: an integer"):
            check_range(app, key, value)


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
    from forge.app import user_errors
    from search.cli import run
    from tests.search.conftest import tiny_cfg
    from tests.search.test_resume import _components

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
    from forge.app import user_errors
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
    from forge.app import user_errors
    from search.archive import ParetoArchive
    from search.cli import run
    from tests.search.conftest import tiny_cfg
    from tests.search.test_resume import _components

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
    from tests.search.test_resume import _components

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
    deadline, count = time.monotonic() + 240, 0
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
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143, err[-3000:]
    con = sqlite3.connect(db)
    running = con.execute("SELECT count(*) FROM forge_labels_v2 WHERE status='running'").fetchone()[0]
    con.close()
    s = json.loads((out / "label_summary.json").read_text())
    assert running == 0 and s["status"] == "interrupted" and s["interrupted_by"] == "SIGTERM"
