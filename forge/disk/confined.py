"""Writes that stay inside a run folder: a link planted there never sends a write (or a log line) outside it.

A run folder is data someone may hand over: `archive.jsonl`, `state/loss_cache.jsonl`, `cli.log` or `verify`
replaced by a symbolic link would make a resume append to (or forge-verify write into) any file the link names.
So a command that writes into an existing run folder first refuses every link inside it, in one line
(`refuse_links`), every append opens its file without following a link (`open_append`: O_NOFOLLOW, and a FIFO
or device is refused instead of blocking), and a derived output folder must resolve inside its run (`inside`).
Atomic writes (forge.disk.io) replace a link at their own name rather than follow it.

    refuse_links(run_dir)                        # before a resume or verify reads or writes anything
    with open_append(run_dir / "archive.jsonl") as f: ...
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

from forge.errors import UserError

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class LinkError(UserError):
    """A link (or a path) inside a run folder that would send a write outside it."""


def refused(link: Path, folder: Path) -> LinkError:
    return LinkError(f"{link}: a link inside the run folder {folder} is refused (Forge never writes through one: "
                     "it would write outside the run); allowed: the plain file or folder Forge wrote there (replace "
                     "the link with a copy of what it points to)")


def refuse_links(folder: str | Path) -> None:
    """Refuse, in one line naming it, the first symbolic link anywhere inside `folder` (links are not followed),
    and the first FIFO, socket or device (opening one blocks forever, or reads something else)."""
    folder = Path(folder)
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted([*dirs, *files]):
            mode = os.lstat(os.path.join(top, name)).st_mode
            if stat.S_ISLNK(mode):
                raise refused(Path(top) / name, folder)
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise not_regular(Path(top) / name)


def not_regular(path: Path) -> UserError:
    return UserError(f"{path}: not a regular file (a FIFO, socket or device) inside the run folder is refused "
                     "(opening it would block or read something else); allowed: the plain file Forge wrote there "
                     "(remove it)")


def inside(folder: str | Path, path: str | Path, what: str = "output") -> Path:
    """`path` when it resolves inside `folder` (links included); else one line naming both."""
    path = Path(path)
    real, root = os.path.realpath(path), os.path.realpath(folder)
    if os.path.commonpath([real, root]) != root:
        raise LinkError(f"{what} {path} resolves to {real}, outside the run folder {folder}; allowed: a path "
                        "inside it (remove the link that leads out)")
    return path


def open_append(path: str | Path) -> IO[str]:
    """`path` opened to append text, created if absent, never through a link at its name; a FIFO, socket or
    device there is refused in one line (opening one would block, or write somewhere else)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, _APPEND, 0o666)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW on a link
            raise refused(path, path.parent) from None
        if e.errno == errno.ENXIO:  # a FIFO with no reader (O_NONBLOCK)
            raise UserError(f"{path}: not a regular file (a FIFO); allowed: the file Forge wrote") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a regular file (a FIFO, socket or device); allowed: the file Forge wrote")
    if st.st_nlink > 1:  # a hard link: an append would also change the file's other name, maybe outside the run
        os.close(fd)
        raise LinkError(f"{path}: a hard link ({st.st_nlink} names for one file) inside the run folder is refused "
                        "(appending to it would change its other name too, maybe outside the run); allowed: a file "
                        f"of its own (cp --remove-destination {path} {path}.copy && mv {path}.copy {path})")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8")
