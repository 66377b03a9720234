"""What a checkpoint covers of each append-only log: rows, bytes and a SHA-256 of those bytes.

The runner fsyncs its logs every few seconds, not per generation, so after a power loss a checkpoint may name
rows that never reached the disk. Each checkpoint records, per log, `{"rows", "bytes", "sha256"}` of the prefix
it covers; `state/checkpoint.durable.json` is a snapshot of it (a hard link) taken only once every log it
covers was fsynced. A resume checks the newest checkpoint's prefixes; when one is short or different it continues
from the durable snapshot (a resumed run writes what an uninterrupted one would, so this rebuilds the lost
generations exactly), and when that too does not match it refuses in one line, naming the log. Hashing is incremental: each generation
reads only the bytes appended since the last one (still in the page cache).
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from search.state import ResumeError, kept_jsonl

DURABLE = "state/checkpoint.durable.json"
_CHUNK = 1 << 20


class LogLedger:
    """Running (rows, bytes, sha256) of each log in `names`, under `run_dir`."""

    def __init__(self, run_dir: Path, names: Iterable[str]):
        self.run_dir, self.names = Path(run_dir), tuple(names)
        self._state: dict[str, tuple[int, int, Any]] = {n: (0, 0, hashlib.sha256()) for n in self.names}

    def update(self) -> dict[str, dict[str, Any]]:
        """Read what each log gained since the last call; the entries a checkpoint records."""
        out = {}
        for name in self.names:
            rows, size, h = self._state[name]
            path = self.run_dir / name
            if path.is_file() and path.stat().st_size > size:
                with path.open("rb") as f:
                    f.seek(size)
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        rows += chunk.count(b"\n")
                        size += len(chunk)
                self._state[name] = (rows, size, h)
            if size:
                out[name] = {"rows": rows, "bytes": size, "sha256": h.hexdigest()}
        return out

    def reset(self) -> None:
        """Forget everything read (the logs were truncated or rewritten): the next update reads them anew."""
        self._state = {n: (0, 0, hashlib.sha256()) for n in self.names}


def prefix_stats(path: Path, size: int) -> tuple[int, int, str]:
    """(rows, bytes, sha256) of the first `size` bytes of `path` (fewer when the file is shorter)."""
    h, rows, n = hashlib.sha256(), 0, 0
    if path.is_file():
        with path.open("rb") as f:
            while n < size and (chunk := f.read(min(_CHUNK, size - n))):
                h.update(chunk)
                rows += chunk.count(b"\n")
                n += len(chunk)
    return rows, n, h.hexdigest()


def mismatch(run_dir: Path, logs: Mapping[str, Any]) -> str | None:
    """None when every log holds the prefix the checkpoint covers; else what differs, for a one-line message."""
    for name, want in sorted(logs.items()):
        if not isinstance(want, Mapping) or not all(isinstance(want.get(k), t) for k, t in
                                                   (("rows", int), ("bytes", int), ("sha256", str))):
            return f"its record of {name} is corrupt"
        rows, size, digest = prefix_stats(Path(run_dir) / name, want["bytes"])
        if size < want["bytes"]:
            return (f"{name} holds {rows} of the {want['rows']} rows ({size} of {want['bytes']} bytes) the checkpoint "
                    "covers")
        if digest != want["sha256"]:
            return f"{name} differs from what the checkpoint covers in its first {want['rows']} rows"
    return None


def check_logs(run_dir: Path, state: Mapping[str, Any], durable: Mapping[str, Any] | None,
               note: bool = False) -> Mapping[str, Any]:
    """The checkpoint to resume from: `state` when the logs hold what it covers, else the durable copy when they
    hold what that covers; else ResumeError in one line. A checkpoint without a `logs` record (written before
    the ledger existed) is taken as is."""
    logs = state.get("logs")
    if not isinstance(logs, Mapping):
        return state
    why = mismatch(run_dir, logs)
    if why is None:
        return state
    if durable is not None and isinstance(durable.get("logs"), Mapping) and mismatch(run_dir, durable["logs"]) is None:
        if note:
            print(f"resume={run_dir}: {why}; continuing from generation {durable['generation']}, the last checkpoint "
                  "whose logs reached the disk (the lost generations are recomputed exactly)", file=sys.stderr)
        return durable
    raise ResumeError(f"resume={run_dir}: {why} (a crash or power loss cut or changed it); nothing was changed; "
                      "allowed: restore the run folder from a copy, or start a new run with the same config and seed "
                      "(it writes the same files)")


def snapshot_durable(run_dir: Path) -> None:
    """DURABLE := the checkpoint just made durable, as a hard link to its file (no bytes written, no fsync: the
    checkpoint is replaced by rename, so the link keeps this version); a copy where links are not supported."""
    from forge.io import atomic_write_bytes
    from search.state import CHECKPOINT

    src, dst = Path(run_dir) / CHECKPOINT, Path(run_dir) / DURABLE
    tmp = dst.with_name(f".{dst.name}.link.tmp")
    try:
        tmp.unlink(missing_ok=True)
        os.link(src, tmp)
        os.replace(tmp, dst)
    except OSError:
        tmp.unlink(missing_ok=True)
        atomic_write_bytes(dst, src.read_bytes())


def resume_state(run_dir: Path, note: bool = False) -> Mapping[str, Any]:
    """The checkpoint a resume continues from (see `check_logs`): read-only, so a refusal changes nothing."""
    from search.state import load_checkpoint

    durable = None
    if (Path(run_dir) / DURABLE).is_file():
        try:
            durable = load_checkpoint(run_dir, DURABLE)
        except ResumeError:  # a torn durable copy: only the newest checkpoint can be used
            durable = None
    return check_logs(run_dir, load_checkpoint(run_dir), durable, note)  # a corrupt newest one is refused


def truncate_logs(run_dir: Path, gen: int, names: Iterable[str], table_log: Any) -> None:
    """Drop log lines newer than generation `gen` (and history.csv's rows), every log checked before any is
    rewritten: a refused resume changes no file, and a log with nothing to drop keeps its bytes and time stamp."""
    from forge.io import atomic_write_text

    texts = {name: kept_jsonl(Path(run_dir) / name, gen) for name in names}
    try:
        table_log.truncate(gen)
    except (KeyError, ValueError, TypeError) as e:  # history.csv is data: a corrupt one is named
        raise ResumeError(f"{table_log.path}: corrupt ({type(e).__name__}); allowed: the history.csv forge-search "
                          "wrote (or delete it: the generations after the checkpoint are appended)") from None
    for name, text in texts.items():
        if text is not None:
            atomic_write_text(Path(run_dir) / name, text)
