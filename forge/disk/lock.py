"""One writer per run folder: an exclusive lock on the folder, taken before a command's first write into it.

Two `forge-search resume=<run>` started together (two terminals, a requeued cluster job, a sweep reusing a folder)
would both append every row from the first resumed generation on, twice, with nothing to warn. So every command
that writes a run folder holds `run_lock(folder)` while it runs: an advisory `flock` on the folder itself (no
lock file to go stale: the kernel drops the lock when the holder exits or is killed, and the folder is locked
even where it is read-only). Who holds it (pid, host, command) is written beside it, in `.forge.lock`, only
for the refusal's one line, and removed when the holder lets go; a killed holder's stale note is overwritten by
the next holder and never read while nobody holds the lock. The lock is re-entrant within one process (the
console entry locks the run folder named on its command line, the search's `run()` the same folder again).

    with run_lock(run_dir, "forge-search resume=..."):
        ...   # the only writer
"""
from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from forge.errors import UserError
from forge.disk import run_folder

NOTE = run_folder.LOCK  # who holds the lock: read only for the refusal's message
_HELD: dict[tuple[int, int], list[int]] = {}  # (st_dev, st_ino) of a folder this process locks -> [fd, depth]


class RunFolderBusy(UserError):
    """Another process is writing the run folder."""


def _command() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"


@contextmanager
def run_lock(folder: str | Path, command: str | None = None) -> Iterator[Path]:
    """Hold the exclusive lock of `folder` (created if absent) while inside; refused in one line naming the
    holder when another process holds it. Where the file system has no locks (ENOLCK), runs unlocked."""
    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first: what this call creates
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    if key in _HELD:  # this process holds it already (an outer command, its run())
        os.close(fd)
        _HELD[key][1] += 1
        try:
            yield folder
        finally:
            _HELD[key][1] -= 1
        return
    if not _acquire(fd, folder):
        os.close(fd)
        _unmake(made)
        raise RunFolderBusy(busy_line(folder))
    _HELD[key] = [fd, 1]
    _write_note(folder, command)
    try:
        yield folder
    finally:
        _HELD.pop(key, None)
        _remove_note(folder)
        _unmake(made)  # made for this command and nothing written (a refused one): gone again, as it was
        os.close(fd)  # the lock goes with the last descriptor of this open file (a forked worker may hold one)


def _unmake(made: list[Path]) -> None:
    """Remove the folders this lock created (deepest first) while they are empty: `outputs/search/<stamp>` of a
    refused command leaves no `outputs/` behind."""
    for p in made:
        try:
            p.rmdir()
        except OSError:  # something was written there, or another command made it meanwhile: kept
            return


def _acquire(fd: int, folder: Path) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):  # a file system without locks
            return True
        raise


def held(folder: str | Path) -> bool:
    """Whether this process holds the lock of `folder`."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in _HELD


def busy_line(folder: Path) -> str:
    who = _read_note(folder)
    holder = (f"pid {who.get('pid')} on {who.get('host')}, started {who.get('since')}: {who.get('command')}"
              if who else "another process, which has not said who it is yet")
    from forge.disk.inert import inert

    return (f"{folder} is being written by {inert(holder)}; one writer per run folder: allowed: wait until that "
            "command ends (the lock is released when it exits or is killed), or write another folder")


def _write_note(folder: Path, command: str | None) -> None:
    from forge.disk.io import atomic_write_text

    note = {"pid": os.getpid(), "host": socket.gethostname(), "command": command or _command(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        atomic_write_text(folder / NOTE, json.dumps(note) + "\n", durable=False)
    except OSError:  # a read-only run folder (verify with out= elsewhere): locked all the same, only unnamed
        pass


def _read_note(folder: Path) -> dict:
    """The holder's note: a regular file of at most 4 KiB (never through a link, never a FIFO), else {}."""
    try:
        fd = os.open(folder / NOTE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        note = json.loads(os.read(fd, 4096).decode("utf-8", "replace"))
        return note if isinstance(note, dict) else {}
    except ValueError:
        return {}
    finally:
        os.close(fd)


def _remove_note(folder: Path) -> None:
    try:
        if _read_note(folder).get("pid") == os.getpid():
            (folder / NOTE).unlink()
    except OSError:
        pass
