"""Issue 50 §1: one writer per run folder (forge.disk.lock). A second process is refused in one line naming the
holder; the lock is the kernel's, so a killed holder leaves none behind; one process may take it again."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from forge.disk.lock import NOTE, RunFolderBusy, held, run_lock

ROOT = Path(__file__).resolve().parents[3]
HOLD = ("import sys; from forge.disk.lock import run_lock\n"
        "with run_lock(sys.argv[1], 'forge-search resume=' + sys.argv[1]):\n"
        "    print('held', flush=True); sys.stdin.read()\n")


def hold(folder: Path) -> subprocess.Popen:
    """Another process holding `folder`'s lock until its stdin closes (or it is killed)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holder_leaves_no_lock(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    holder = hold(run)
    try:
        with pytest.raises(RunFolderBusy) as e:
            with run_lock(run):
                pass
        line = str(e.value)
        assert "\n" not in line and f"pid {holder.pid} on {socket.gethostname()}" in line
        assert f"forge-search resume={run}" in line and "one writer per run folder" in line
    finally:
        holder.send_signal(signal.SIGKILL)  # killed: no cleanup of its own runs
        holder.wait()
    assert (run / NOTE).is_file()  # its stale note stays, but the kernel dropped the lock with the process
    with run_lock(run, "mine"):
        assert held(run) and f'"pid": {os.getpid()}' in (run / NOTE).read_text()
    assert not (run / NOTE).exists() and not held(run)


def test_one_process_takes_its_own_lock_again_and_a_folder_made_for_nothing_is_removed(tmp_path):
    run = tmp_path / "new"
    with run_lock(run):
        with run_lock(run):  # the console entry's lock, then the search's run() on the same folder
            assert held(run)
        assert held(run)
    assert not run.exists()  # made by the lock, nothing written: gone again
    with run_lock(run):
        (run / "summary.json").write_text("{}")
    assert sorted(p.name for p in run.iterdir()) == ["summary.json"]  # the note is gone, the work stays
