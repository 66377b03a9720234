"""Process inspection from /proc (Linux), for the kill tests and bench/bench_kill_label.py."""
from __future__ import annotations

from pathlib import Path


def _stat(pid: int | str) -> tuple[str, int]:
    """(state, parent pid) of a process; the command name may hold spaces, so split after its ')'."""
    state, ppid = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[:2]
    return state, int(ppid)


def children(pid: int) -> list[int]:
    """Live (non-zombie) processes whose parent is `pid`."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                state, ppid = _stat(d.name)
            except (OSError, ValueError):
                continue
            if ppid == pid and state != "Z":
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    """Running or sleeping (a zombie waiting to be reaped counts as dead)."""
    try:
        return _stat(pid)[0] != "Z"
    except (OSError, ValueError):
        return False
