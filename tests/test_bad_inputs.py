"""Every forge-* command on bad input: exit 2, one line on stderr, no traceback, nothing changed on disk.

Each case runs the real console entry point (read from pyproject's [project.scripts]) as a subprocess in a
folder of its own, against a shared "world" of run directories and files. The runs' files are hashed
before and after: a refused command must leave them byte-identical (mtimes too) and create nothing in
its working folder. CLI start-up costs seconds on a busy box, so the cases run in parallel; the default
run keeps a representative fast subset, the whole table is `slow`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.bad_input_kit import ROOT, SCRIPTS, _state, world  # noqa: F401  (world: a fixture)


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
    from forge.shell.app import user_errors
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
    assert capsys.readouterr().err == "forge-x: interrupted\n"
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

    from forge.runtime.config import check_override_types
    from forge.errors import UserError

    def check(*overrides):
        with initialize_config_module(config_module="forge_conf", version_base="1.3"):
            cfg = compose("forge-search", overrides=list(overrides), return_hydra_config=True)
        cfg.hydra.job.config_name = "forge-search"
        check_override_types(cfg.hydra)

    check("seed=3", "hv.ref=1", "search.mutation.rate=0.5", "search=random", "protocol.tokens=1e6", "+extra=x",
          "space.d_model=[512,768]", "space.mlp=[gelu,swiglu]")  # a grid for a searchable global gene (forge.genomes.genes)
    for bad, says in (("seed=abc", "seed='abc' is not an integer"), ("search.pop_size=1.5", "search.pop_size"),
                      ("hv.ref=far", "hv.ref='far' is not a number"), ("progress=maybe", "progress='maybe' is not a boolean"),
                      ("seed=[1,2]", "seed=.* is not an integer"), ("space.d_model=[512,wide]", "is not an integer"),
                      ("space.vocab_size=[256,512]", "space.vocab_size=.* is not an integer")):
        with pytest.raises(UserError, match=says):
            check(bad)


def test_run_dir_guard_restores_hydra_files_and_removes_a_fresh_folder(tmp_path):
    from forge.shell.run_guard import RunDirGuard

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
    from forge.shell.run_guard import RunDirGuard

    run = tmp_path / "named"
    g = RunDirGuard.from_argv([f"hydra.run.dir={run}"])
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
    (run / "config.yaml").write_text("seed: 0\n")
    (run / ".checkpoint.json").write_text("{}")
    g.undo()
    assert (run / ".checkpoint.json").is_file() and (run / "config.yaml").is_file()
    assert not (run / ".hydra" / "config.yaml").exists()


def test_sigterm_inside_a_command_exits_143_and_says_so(capsys, monkeypatch):
    """SIGTERM where a command turned it into an interrupt (forge-export's staging, say) exits 143, not Ctrl-C's
    130; a Ctrl-C after it, in a later block, is a Ctrl-C again."""
    import os
    import signal
    import time

    from forge.runtime.signals import term_as_interrupt
    from forge.shell.app import user_errors

    monkeypatch.delenv("FORGE_DEBUG", raising=False)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    with pytest.raises(SystemExit) as e, user_errors("forge-x"), term_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here, at the next bytecode after the signal
    assert e.value.code == 143 and capsys.readouterr().err == "forge-x: terminated (SIGTERM)\n"
    with pytest.raises(SystemExit) as e, user_errors("forge-x"), term_as_interrupt():
        raise KeyboardInterrupt
    assert e.value.code == 130 and capsys.readouterr().err == "forge-x: interrupted\n"
