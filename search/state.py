"""Search state for resume: one atomic JSON checkpoint per generation, plus append-only JSONL logs.

`state/checkpoint.json` holds everything the next generation depends on: the survived population
(X, F, G, CV, rank, crowding), pymoo's random-generator state, the Pareto archive, the loss cache
(so MC-dropout σ is not redrawn), the surrogate version and label buffer, counters and timers, and
the resolved config. It is replaced atomically after the generation's logs are flushed, so a kill at
any point leaves a consistent checkpoint; on resume, log lines newer than it are dropped
(`truncate_jsonl`), so resumed and uninterrupted runs write the same files. A killed process loses
nothing the OS already holds, so the runner fsyncs (archive.jsonl, then the checkpoint) only every
`DURABLE_EVERY_S` seconds and when the loop ends: a power cut can cost the last few seconds of search.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator


from forge.disk.io import atomic_write_bytes, atomic_write_text, json_default, json_line, loads
from search.errors import ResumeError
from search.run_files import read_summary
from forge.disk import run_folder

CHECKPOINT = run_folder.CHECKPOINT
CONFIG, HYDRA_CONFIG = run_folder.CONFIG, run_folder.HYDRA_CONFIG
# Keys that may differ between a run and its resume: they steer the process, not the search.
RUNTIME_KEYS = ("resume", "out_dir", "stop_after", "progress", "threads", "quiet", "json", "plugins")


def save_checkpoint(run_dir: Path, state: dict[str, Any], encoded: dict[str, list[str]] | None = None,
                    durable: bool = True) -> None:
    """Compact JSON (no indent: the C encoder, under half the bytes); loading reads old indented ones too.

    `encoded`: list-valued keys whose items arrive already JSON-encoded (the runner encodes each immutable
    record once, not once per generation). `durable=False` replaces the file atomically without fsync (see
    `sync_files`). The file ends with a seal, a SHA-256 of the rest (`unsealed`), so a flipped bit that still
    parses as JSON is found, not resumed from."""
    text = compact_json(state)
    if encoded:
        tail = ",".join(f"{json.dumps(k)}:[{','.join(items)}]" for k, items in encoded.items())
        text = text[:-1] + ("," if state else "") + tail + "}"
    data = text.encode()
    seal = f'{"," if len(data) > 2 else ""}"checksum":"sha256:{hashlib.sha256(data).hexdigest()}"}}\n'.encode()
    atomic_write_bytes(Path(run_dir) / CHECKPOINT, data[:-1] + seal, durable)


def sync_files(paths: Iterable[Path]) -> None:
    """fsync files written without it (those that exist), in order: the runner makes its logs and checkpoint
    durable every few seconds and at the end, not at every generation."""
    import os

    for path in paths:
        if Path(path).is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            except OSError as e:  # a full disk: name the file (a user error, not a bug), as forge.disk.io's writes do
                if e.filename is None:
                    raise type(e)(e.errno, e.strerror or str(e), str(path)) from e
                raise
            finally:
                os.close(fd)


def compact_json(obj: Any) -> str:
    """The checkpoint's encoding: sorted keys, no whitespace, numpy scalars and arrays as plain JSON."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=json_default)


# what every checkpoint holds, and the JSON type of each: a file that lacks one is not ours (or is corrupt)
CHECKPOINT_KEYS = {"generation": int, "config": dict, "n_iter": int, "rng": dict, "pop": dict, "pop_records": list,
                   "archive": list, "history": list, "n_evaluated": int, "timers": dict, "wall_s": (int, float)}


_SEAL = re.compile(rb',?"checksum":"sha256:([0-9a-f]{64})"\}\n?$')


def unsealed(data: bytes) -> bytes:
    """The checkpoint's JSON without its seal, checked: a bit flip or a cut anywhere is found here, not resumed
    from. A checkpoint without the seal (an older Forge, or one rewritten by a tool) is read as it is."""
    off = max(len(data) - 100, 0)
    m = _SEAL.search(data, off)
    if m is None:
        return data
    body = data[:m.start()] + b"}"
    if hashlib.sha256(body).hexdigest().encode() != m.group(1):
        raise ValueError("its checksum does not match its bytes")
    return body


def load_checkpoint(run_dir: Path, name: str = CHECKPOINT) -> dict[str, Any]:
    """The checkpoint, checked before anything is restored from it (a refused resume must change nothing)."""
    path = Path(run_dir) / name
    if path.exists() and not path.is_file():
        raise ResumeError(f"{path}: not a file; allowed: the checkpoint forge-search wrote")
    if not path.is_file():
        raise ResumeError(f"resume={run_dir}: no search state at {path}; allowed: a forge-search run directory")
    try:
        st = loads(unsealed(path.read_bytes()))
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as e:
        why = type(e).__name__ if isinstance(e, (json.JSONDecodeError, UnicodeDecodeError)) else str(e)
        raise ResumeError(f"{path}: corrupt checkpoint ({why}); allowed: the checkpoint forge-search "
                          "wrote (start a new run if it is lost)") from None
    if not isinstance(st, dict):
        raise ResumeError(f"{path}: corrupt checkpoint (a JSON {type(st).__name__}, not an object); allowed: the "
                          "checkpoint forge-search wrote")
    bad = [k for k, t in CHECKPOINT_KEYS.items() if not isinstance(st.get(k), t) or isinstance(st.get(k), bool)]
    if bad:
        raise ResumeError(f"{path}: corrupt checkpoint (missing or mistyped {', '.join(bad)}); allowed: the "
                          "checkpoint forge-search wrote")
    return st


def check_resumable(run_dir: Path) -> None:
    """The checkpoint, when there is one, is readable; without one (a run killed in generation 0 restarts
    afresh) no generation may have been logged: a deleted checkpoint would silently restart from 0."""
    run_dir = Path(run_dir)
    if (run_dir / CHECKPOINT).exists():
        load_checkpoint(run_dir)
        return
    rows = read_jsonl(run_dir / run_folder.HISTORY, tolerate_torn_tail=True)
    done = [r for r in rows if int(r.get("generation") or 0) >= 1]  # generation 0 may be logged before its checkpoint
    if done:
        raise ResumeError(f"resume={run_dir}: {CHECKPOINT} is missing but history.jsonl records {len(rows)} generation(s); "
                          "allowed: restore the checkpoint, or start a new run (nothing was changed)")


def saved_config(run_dir: Path) -> dict[str, Any]:
    """The config a run was started with: its checkpoint's, else its `config.yaml`, else the one Hydra wrote
    before the job began (`.hydra/config.yaml`): a run killed before its first checkpoint, which a resume then
    starts afresh."""
    run_dir = Path(run_dir)
    if (run_dir / CHECKPOINT).is_file():
        return load_checkpoint(run_dir)["config"]
    for name in (CONFIG, HYDRA_CONFIG):
        if (run_dir / name).exists() or (run_dir / name).is_symlink():  # a FIFO or a folder is named, not skipped
            cfg = _read_config(run_dir / name)
            if isinstance(cfg, dict) and "search" in cfg:
                return {**cfg, "resume": None}
    raise ResumeError(f"resume={run_dir}: no search state (neither {CHECKPOINT} nor {CONFIG}); allowed: a forge-search "
                      "run directory")


def _read_config(path: Path) -> Any:
    """A saved run config as plain data: never resolved (`${oc.env:...}` stays as written, so a resume writes no
    environment value into new files), a !!tag or non-UTF-8 byte refused in one line naming the file."""
    from forge.disk.files import read_yaml_file

    return read_yaml_file(path, "run config")


def holds_search(run_dir: Path) -> bool:
    """Whether a folder already belongs to a search (started, maybe killed before its first checkpoint)."""
    return (Path(run_dir) / CHECKPOINT).is_file() or (Path(run_dir) / CONFIG).is_file()


def run_status(run_dir: Path) -> dict[str, Any]:
    """`status`, `generations_done`, `generations` of a run as its summary.json says (the one field every
    consumer checks); a run with no summary is `running` (or was killed) at its checkpoint's generation."""
    run_dir = Path(run_dir)
    s = read_summary(run_dir)
    out = {"status": s.get("status", "running"), "generations_done": s.get("generations_done", -1),
           "generations": s.get("generations")}
    if out["status"] != "complete" and (run_dir / CHECKPOINT).is_file():
        ck = load_checkpoint(run_dir)
        out["generations_done"] = max(int(out["generations_done"]), int(ck["generation"]))
        if out["generations"] is None:
            out["generations"] = int((ck.get("config") or {}).get("search", {}).get("generations", 40))
    return out


def require_complete(run_dir: Path, allow_partial: bool, what: str) -> dict[str, Any]:
    """Refuse to use an unfinished run (interrupted, stopped, running or killed) unless allow_partial."""
    st = run_status(run_dir)
    if st["status"] != "complete" and not allow_partial:
        from forge.shell.plugin_use import args

        of = f" of {st['generations']}" if st.get("generations") is not None else ""
        finish = " ".join(["forge-search", f"resume={run_dir}", *args(run_dir, code=True)])  # with its plug-ins
        raise ResumeError(f"{what}={run_dir}: the search is {st['status']} at generation {st['generations_done']}{of}, "
                          f"not complete; allowed: finish it ({finish}) or pass allow_partial=true")
    return st


def config_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs (runtime keys ignored)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            key = f"{prefix}{k}"
            if not prefix and k in RUNTIME_KEYS:
                continue
            if k not in old or k not in new:
                out.append(key)
            else:
                out += config_diff(old[k], new[k], key + ".")
        return out
    return [] if old == new else [prefix.rstrip(".") or "<root>"]


def check_same_config(saved: dict[str, Any], cfg: dict[str, Any], run_dir: Path) -> None:
    diff = config_diff(saved, cfg)
    if diff:
        raise ResumeError(f"resume={run_dir} refused: the config differs from the run's in {', '.join(diff)}; "
                          "resume with the same overrides (or start a new run)")


def append_jsonl(path: Path, rows: Iterable[dict[str, Any]], sync: bool = True) -> None:
    """Append rows and fsync (the checkpoint written afterwards marks them as committed); `sync=False` for a
    log the checkpoint itself holds (history.jsonl), which a resume rewrites from it."""
    append_lines(path, [json_line(r) for r in rows], sync)


def append_lines(path: Path, lines: Iterable[str], sync: bool = True) -> None:
    """`append_jsonl` for rows already encoded by `json_line` (the runner encodes each record once)."""
    import os

    from forge.disk.confined import open_append

    try:
        with open_append(path) as f:  # never through a link planted in the run folder
            f.write("".join(line + "\n" for line in lines))
            f.flush()
            if sync:
                os.fsync(f.fileno())
    except OSError as e:  # a full disk: name the file; lines past the checkpoint are dropped on resume
        if e.filename is None:
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from e
        raise


def read_jsonl(path: Path, tolerate_torn_tail: bool = False) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a corrupt line is an error naming it, except a torn last line when tolerated
    (a kill in the middle of an append, which resume then drops)."""
    if not Path(path).is_file():
        return []
    from forge.disk.io import read_text

    lines = read_text(path, "log").splitlines()  # not UTF-8: one line naming the file
    out = []
    for n, line in enumerate(lines, start=1):
        if line.strip():
            try:
                out.append(loads(line))
            except json.JSONDecodeError as e:
                if tolerate_torn_tail and n == len(lines):
                    break
                raise ResumeError(f"{path}:{n}: corrupt line ({e})") from None
    return out


def iter_jsonl(path: Path, tolerate_torn_tail: bool = False) -> Iterator[dict[str, Any]]:
    """`read_jsonl`'s rows one at a time, the file read line by line: a reader of a long run's archive.jsonl (a
    row per evaluation) holds one row, never the file (issue 53 §3). The same errors as `read_jsonl`."""
    from forge.errors import UserError

    if not Path(path).is_file():
        return
    torn, at = None, 0
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if torn is not None:
                raise torn
            try:
                line = raw.decode()
            except UnicodeDecodeError as e:
                raise UserError(f"{path}: not a UTF-8 text log (byte 0x{raw[e.start]:02x} at offset {at + e.start}); "
                                "allowed: a UTF-8 text log") from None
            at += len(raw)
            if line.strip():
                try:
                    row = loads(line)
                except json.JSONDecodeError as e:  # tolerated only as the file's last line, as read_jsonl
                    torn = ResumeError(f"{path}:{n}: corrupt line ({e})")
                    if not tolerate_torn_tail:
                        raise torn from None
                    continue
                yield row


def truncate_jsonl(path: Path, last_generation: int) -> None:
    """Drop lines written after the checkpoint (generation > last_generation), atomically."""
    text = kept_jsonl(path, last_generation)
    if text is not None:
        atomic_write_text(path, text)


def kept_jsonl(path: Path, last_generation: int) -> str | None:
    """The log without its lines newer than the checkpoint (and a torn last line), kept byte for byte; None when
    there is no such file or nothing to drop. Read only: a resume checks every log before it rewrites one."""
    from forge.disk.io import read_text

    if not Path(path).is_file():
        return None
    text = read_text(path, "log")
    lines, keep = text.splitlines(keepends=True), []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = loads(line)
            generation = int(row.get("generation", -1))
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
            if n == len(lines) and isinstance(e, json.JSONDecodeError):
                break  # a kill in the middle of an append
            raise ResumeError(f"{path}:{n}: corrupt line ({type(e).__name__}); allowed: the log forge-search "
                              "wrote") from None
        if generation <= last_generation:
            keep.append(line if line.endswith("\n") else line + "\n")
    new = "".join(keep)
    return None if new == text else new


