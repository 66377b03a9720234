"""What a checkpoint covers of each append-only log: rows, bytes and a SHA-256 of those bytes.

The runner fsyncs its logs every few seconds, not per generation, so after a power loss a checkpoint may name
rows that never reached the disk. Each checkpoint records, per log, `{"rows", "bytes", "sha256"}` of the prefix
it covers; `state/checkpoint.durable.json` is a snapshot of it (a hard link) taken only once every log it
covers was fsynced. A resume checks the newest checkpoint's prefixes; when one is short or different it continues
from the durable snapshot (a resumed run writes what an uninterrupted one would, so this rebuilds the lost
generations exactly), and when that too does not match it refuses in one line, naming the log (and its first torn
line). Hashing is incremental: each generation reads only the bytes appended since the last one (still in the page
cache). A newest checkpoint that is itself damaged (its seal, `search.state.unsealed`, finds a flip or a cut) is
replaced by the durable copy the same way; the loss cache, a pure cache, is rebuilt from archive.jsonl rather than
refused; a resume keeps of each log exactly the part its checkpoint covers.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from search.state import ResumeError, kept_jsonl
from forge.disk import run_folder

DURABLE = run_folder.DURABLE
LOSS_CACHE = run_folder.LOSS_CACHE
CACHES = (LOSS_CACHE,)  # pure caches: one that does not match the ledger is rebuilt, not a reason to refuse
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


def mismatch(run_dir: Path, logs: Mapping[str, Any], skip: Iterable[str] = ()) -> str | None:
    """None when every log (but those in `skip`) holds the prefix the checkpoint covers; else what differs, for a
    one-line message."""
    for name, want in sorted(logs.items()):
        if name in skip:
            continue
        if not isinstance(want, Mapping) or not all(isinstance(want.get(k), t) for k, t in
                                                   (("rows", int), ("bytes", int), ("sha256", str))):
            return f"its record of {name} is corrupt"
        rows, size, digest = prefix_stats(Path(run_dir) / name, want["bytes"])
        if size < want["bytes"]:
            return (f"{name} holds {rows} of the {want['rows']} rows ({size} of {want['bytes']} bytes) the checkpoint "
                    f"covers{torn_row(Path(run_dir) / name, size)}")
        if digest != want["sha256"]:
            return (f"{name} differs from what the checkpoint covers in its first {want['rows']} rows"
                    f"{torn_row(Path(run_dir) / name, want['bytes'])}")
    return None


def torn_row(path: Path, size: int) -> str:
    """'; its line N is torn ...' for the first line of the first `size` bytes that is not a whole JSON row
    (a cut or a zeroed page inside the log), else ''."""
    from forge.disk.io import loads

    with path.open("rb") as f:
        data = f.read(size)
    for n, line in enumerate(data.split(b"\n"), start=1):
        try:
            if line.strip() and not isinstance(loads(line), dict):
                raise ValueError
        except ValueError:  # JSONDecodeError and UnicodeDecodeError too
            return f"; its line {n} is torn (not a whole JSON row)"
    return ""


def check_logs(run_dir: Path, state: Mapping[str, Any], durable: Mapping[str, Any] | None,
               note: bool = False) -> Mapping[str, Any]:
    """The checkpoint to resume from: `state` when the logs hold what it covers, else the durable copy when they
    hold what that covers (the loss cache aside, when only it differs: see `rebuilt_cache`); else ResumeError in one
    line. A checkpoint without a `logs` record (an older Forge) is checked against its own count of evaluations."""
    logs = state.get("logs")
    if not isinstance(logs, Mapping):
        why = short_archive(run_dir, state)  # no ledger (an older Forge, or a damaged key): the row count
        if why is None:
            return state
        raise ResumeError(f"resume={run_dir}: {why} and the checkpoint has no record of its logs; nothing was "
                          "changed; allowed: restore the run folder from a copy, or start a new run")
    why = mismatch(run_dir, logs)
    if why is None:
        return state
    has_durable = durable is not None and isinstance(durable.get("logs"), Mapping)
    for skip in ((), CACHES):  # an exact rebuild first; else one whose caches are rebuilt (see rebuilt_cache)
        if skip and mismatch(run_dir, logs, skip) is None:
            return state
        if has_durable and mismatch(run_dir, durable["logs"], skip) is None:
            if note:
                print(f"resume={run_dir}: {why}; continuing from generation {durable['generation']}, the last "
                      "checkpoint whose logs reached the disk (the lost generations are recomputed exactly)",
                      file=sys.stderr)
            return durable
    why = mismatch(run_dir, logs, CACHES)
    raise ResumeError(f"resume={run_dir}: {why} (a crash or power loss cut or changed it); nothing was changed; "
                      "allowed: restore the run folder from a copy, or start a new run with the same config and seed "
                      "(it writes the same files)")


def snapshot_durable(run_dir: Path) -> None:
    """DURABLE := the checkpoint just made durable, as a hard link to its file (no bytes written, no fsync: the
    checkpoint is replaced by rename, so the link keeps this version); a copy where links are not supported."""
    from forge.disk.io import atomic_write_bytes
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
    """The checkpoint a resume continues from (see `check_logs`): read-only, so a refusal changes nothing. A newest
    checkpoint that is zeroed, cut or flipped is replaced by the durable copy, when that one is whole."""
    from search.state import CHECKPOINT, load_checkpoint

    durable = None
    if (Path(run_dir) / DURABLE).is_file():
        try:
            durable = load_checkpoint(run_dir, DURABLE)
        except ResumeError:  # a torn durable copy: only the newest checkpoint can be used
            durable = None
    newest = Path(run_dir) / CHECKPOINT  # a folder there is refused by search.run_files, before this
    why = "missing"  # never deleted by Forge (it is replaced by rename): lost with a disk or by hand
    try:
        state = load_checkpoint(run_dir) if newest.exists() or durable is None else None
    except ResumeError as e:
        if durable is None:
            raise
        state, why = None, "damaged (" + str(e).split(": ", 1)[-1].split(";")[0] + ")"
    if state is None:
        if note:
            print(f"resume={run_dir}: {CHECKPOINT} is {why}; continuing from {DURABLE}, generation "
                  f"{durable['generation']} (the generations after it are recomputed exactly)", file=sys.stderr)
        state, durable = durable, None
    return check_logs(run_dir, state, durable, note)


def has_checkpoint(run_dir: Path) -> bool:
    """Whether the run holds a checkpoint to continue from: the newest, or (that one missing) the durable copy."""
    from search.state import CHECKPOINT

    return (Path(run_dir) / CHECKPOINT).exists() or (Path(run_dir) / DURABLE).is_file()


def short_archive(run_dir: Path, state: Mapping[str, Any]) -> str | None:
    """For a checkpoint without a ledger: whether archive.jsonl holds a row for each of its `n_evaluated`
    evaluations (a log cut behind it would resume silently short)."""
    path = Path(run_dir) / run_folder.ARCHIVE
    text = kept_jsonl(path, int(state["generation"]))  # a corrupt line inside the log: refused, named
    rows = (text if text is not None else path.read_text() if path.is_file() else "").count("\n")
    if rows == int(state["n_evaluated"]):
        return None
    return f"archive.jsonl holds {rows} of the {state['n_evaluated']} rows the checkpoint counts"


def covered_text(run_dir: Path, name: str, logs: Any) -> str | None:
    """The part of a log `logs` (a checkpoint's ledger) covers, when the log holds it intact; else None. What a
    resume keeps of it: the rows after it are newer than the checkpoint, however damaged."""
    want = logs.get(name) if isinstance(logs, Mapping) else None
    if want is None or mismatch(run_dir, {name: want}) is not None:
        return None
    with (Path(run_dir) / name).open("rb") as f:
        return f.read(want["bytes"]).decode()


def rebuilt_cache(run_dir: Path, state: Mapping[str, Any], note: bool = False) -> str | None:
    """The loss cache a resume keeps: what `state` covers of it, else (a pure cache: damage to it is no reason to
    refuse) rebuilt from archive.jsonl, said in one line (a loss the rebuild lacks is predicted again). None for
    a checkpoint without a ledger whose cache reads whole."""
    from forge.disk.io import json_line, loads

    path, gen, logs = Path(run_dir) / LOSS_CACHE, int(state["generation"]), state.get("logs")
    if isinstance(logs, Mapping) and LOSS_CACHE in logs:
        kept = covered_text(run_dir, LOSS_CACHE, logs)
        if kept is not None:
            return kept
        why = mismatch(run_dir, {LOSS_CACHE: logs[LOSS_CACHE]})
    else:
        try:
            kept_jsonl(path, gen)
            return None
        except ResumeError as e:
            why = str(e).split(": ", 1)[-1].split(";")[0]
    archive = covered_text(run_dir, run_folder.ARCHIVE, logs) or kept_jsonl(Path(run_dir) / run_folder.ARCHIVE, gen)
    if archive is None:
        archive = (Path(run_dir) / run_folder.ARCHIVE).read_text() if (Path(run_dir) / run_folder.ARCHIVE).is_file() else ""
    rows: dict[tuple, str] = {}
    try:
        for r in map(loads, archive.splitlines()):
            m, key = r["metrics"], (int(r["surrogate_version"]), str(r["id"]))
            rows.setdefault(key, json_line({"generation": r["generation"], "id": key[1], "v": key[0],
                                            "y": [m["val_loss"], m["mu"], m["sigma"]]}))
    except (KeyError, TypeError, ValueError) as e:  # archive.jsonl is data too
        raise ResumeError(f"resume={run_dir}: {LOSS_CACHE} is damaged ({why}) and archive.jsonl cannot rebuild it "
                          f"({type(e).__name__}); allowed: restore the run folder from a copy") from None
    if note:
        print(f"resume={run_dir}: {LOSS_CACHE} is damaged ({why}); it is a cache: rebuilt from archive.jsonl "
              f"({len(rows)} losses), any other is predicted again", file=sys.stderr)
    return "".join(line + "\n" for line in rows.values())


def truncate_logs(run_dir: Path, gen: int, names: Iterable[str], table_log: Any, logs: Any = None,
                  kept: Mapping[str, str] | None = None, history: Any = None) -> None:
    """Drop log lines newer than generation `gen` (and history.csv's rows), every log checked before any is
    rewritten: a refused resume changes no file, and a log with nothing to drop keeps its bytes and time stamp.
    A log the checkpoint's ledger `logs` covers keeps exactly the part covered; `kept`: logs' texts already
    decided (a rebuilt loss cache); `history`: the checkpoint's history rows, which rebuild a damaged history.csv."""
    from forge.disk.io import atomic_write_text

    texts = {name: covered_text(run_dir, name, logs) for name in names}
    texts.update(kept or {})
    for name, text in texts.items():
        path = Path(run_dir) / name
        if text is None:
            texts[name] = kept_jsonl(path, gen)
        elif path.is_file() and path.read_bytes() == text.encode():
            texts[name] = None
    try:
        table_log.truncate(gen, history)
    except (KeyError, ValueError, TypeError) as e:  # history.csv is data: a corrupt one is named
        raise ResumeError(f"{table_log.path}: corrupt ({type(e).__name__}); allowed: the history.csv forge-search "
                          "wrote (or delete it: the generations after the checkpoint are appended)") from None
    for name, text in texts.items():
        if text is not None:
            atomic_write_text(Path(run_dir) / name, text)
