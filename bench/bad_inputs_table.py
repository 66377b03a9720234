"""Issue 25 §2-3: the bad-input table of bench/RESULTS.md (category, case, exit code, the one line, files unchanged).

Runs every variant of tests/test_bad_inputs.py's categories in process (the real console entry points) on a
fresh copy of a finished run, as the tests do, and prints a Markdown table:

    PYTHONPATH=. python bench/bad_inputs_table.py > /tmp/bad_inputs.md
"""
from __future__ import annotations

import errno
import importlib
import io
import os
import shutil
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import test_bad_inputs as T  # noqa: E402  (the variants and the world they run against)


def run_cli(app: str, args: list[str], cwd: Path) -> tuple[int, str]:
    mod, fn = T.SCRIPTS[app].split(":")
    here, argv = os.getcwd(), sys.argv
    os.chdir(cwd)
    sys.argv = [app, *args]
    os.environ["HYDRA_FULL_ERROR"] = "1"
    err = io.StringIO()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            getattr(importlib.import_module(mod), fn)()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(here)
        sys.argv = argv
    return code, err.getvalue()


def variant_row(category: str, v: T.Variant, world: Path, tmp: Path) -> str:
    run, cwd = tmp / v.id / "run copy", tmp / v.id / "cwd"
    shutil.copytree(world / "done", run)
    cwd.mkdir()
    if v.prepare:
        v.prepare(run)
    before = T._state(run)
    code, err = run_cli(v.app, [a.format(r=run, w=world, c=cwd) for a in v.args], cwd)
    same = T._state(run) == before and not any(cwd.iterdir())
    lines = err.strip().splitlines()
    line = lines[-1] if lines else ""
    short = line.replace(str(tmp), "…").replace("|", "\\|")
    return f"| {category} | {v.id} | {code} | {len(lines)} | {'yes' if same else 'NO'} | `{short[:170]}` |"


def full_disk_row(tmp: Path) -> str:
    real = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    os.fsync = full
    try:
        code, err = run_cli("forge-space", [f"hydra.run.dir={tmp}/space"], tmp)
    finally:
        os.fsync = real
    line = err.strip().splitlines()[-1].replace(str(tmp), "…")
    return f"| full disk | space-enospc | {code} | {len(err.strip().splitlines())} | yes | `{line[:170]}` |"


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="forge-bad-inputs-"))
    world = tmp / "world"
    world.mkdir()
    T._make_runs(world)
    T._make_files(world)
    print("| category | case | exit | stderr lines | files unchanged | the line |")
    print("| --- | --- | --- | --- | --- | --- |")
    for category, variants in (("corrupt run state", T.CORRUPT_STATE), ("corrupt stores / weights", T.CORRUPT_STORES),
                               ("config mistakes / ranges", T.CONFIG_MISTAKES)):
        for v in variants:
            print(variant_row(category, v, world, tmp), flush=True)
    print(full_disk_row(tmp))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
