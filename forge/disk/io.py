"""Small I/O helpers shared by every package: atomic writes and the shared-data location."""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from forge.disk.bounded import check_yaml_shape, loads  # noqa: F401 (loads: re-exported, the one JSON reader)
from forge.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
_UMASK = os.umask(0)
os.umask(_UMASK)


def usual_mode(path: str | Path) -> None:
    """Give a file (or every file under a folder) the user's usual permissions (0666 less the umask): libraries
    such as safetensors write owner-only (0600) files, which a shared export folder should not hold."""
    path = Path(path)
    for p in [path] if path.is_file() else [q for q in path.rglob("*") if q.is_file()]:
        os.chmod(p, 0o666 & ~_UMASK)


def atomic_write_bytes(path: str | Path, data: bytes, durable: bool = True) -> None:
    """Write to a temp file in the same folder, fsync, then rename: readers see old or new, never half.

    `durable=False` skips the fsync (still atomic for readers and against a killed process): for files
    rewritten every step from state that is itself durable elsewhere (a search's pareto.jsonl)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk, a read-only folder: name the file (a user error, not a bug), keep the old one
        Path(tmp).unlink(missing_ok=True)
        if e.filename is None:
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from e
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_text(path: str | Path, what: str = "file") -> str:
    """A text file's content; a binary or non-UTF-8 file is bad input naming the file, not a UnicodeDecodeError."""
    data = Path(path).read_bytes()
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a UTF-8 text {what} (byte 0x{data[e.start]:02x} at offset {e.start}); "
                        f"allowed: a UTF-8 text {what}") from None


def load_yaml(text: str, where: str | Path) -> Any:
    """YAML from untrusted text (safe loader: data only, never code), refusing a key given twice in one
    mapping (PyYAML silently keeps the last; the first was almost certainly meant to be something else)."""
    import yaml

    class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser where built: ~10x faster
        def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML's signature
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise UserError(f"{where}:{key_node.start_mark.line + 1}: key {key!r} is given twice; "
                                    "allowed: each key once per mapping")
                seen.add(key)
            return super().construct_mapping(node, deep)

    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        check_yaml_shape(node, where)  # before anything is built from it: an alias bomb is a few hundred bytes
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


def atomic_write_text(path: str | Path, text: str, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode(), durable)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=json_default) + "\n")


# ---------------------------------------------------------------- the one JSON number encoding
# Strict JSON has no inf/nan: every writer stores a non-finite float as the string "inf", "-inf" or "nan"
# (`json_num`) and every reader turns those strings back into floats (`as_float`). Files written before
# this helper stored a NaN co-evolution label as "inf"; those still read (as inf, which is what they said).
NONFINITE = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "-inf": -math.inf, "-infinity": -math.inf,
             "nan": math.nan}


def json_num(x: Any) -> float | str:
    """A float for JSON: finite as is, else "inf" / "-inf" / "nan" (the one encoding every writer uses)."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def as_float(x: Any, missing: float = math.nan) -> float:
    """A JSON number or one of `json_num`'s strings as a float; `missing` for None, text or anything else."""
    if isinstance(x, str):
        return NONFINITE.get(x.strip().lower(), missing)
    if isinstance(x, bool) or x is None:
        return missing
    try:
        return float(x)
    except (TypeError, ValueError):
        return missing


def json_default(o: Any) -> Any:
    """`json.dumps(default=...)` for numpy scalars and arrays and paths."""
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def json_line(obj: Any) -> str:
    """One JSONL line (sorted keys, numpy-aware), without the newline."""
    return json.dumps(obj, sort_keys=True, default=json_default)


def check_writable(path: str | Path, what: str = "output") -> Path:
    """Fail before the work starts, not at save time: `path` (a folder, or a file's folder when it has a
    suffix) must be creatable and writable. Raises PermissionError naming the path."""
    path = Path(path)
    folder = path.parent if path.suffix and not path.is_dir() else path
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK) or (path.is_file() and not os.access(path, os.W_OK)):
        raise PermissionError(13, f"{what} path is not writable ({probe} is read-only or not a folder); allowed: "
                                  "a writable location", str(path))
    return path


@contextmanager
def staged(out: str | Path) -> Iterator[Path]:
    """A hidden staging folder beside `out` (in its nearest existing folder, so a rename moves it): the caller
    writes there; on success each entry then replaces its namesake in `out` (created only now), on failure the
    stage is removed and `out` is left as it was, never half written."""
    out = Path(out)
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=probe))
    try:
        yield stage
        out.mkdir(parents=True, exist_ok=True)
        for entry in sorted(stage.iterdir()):
            dest = out / entry.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            os.replace(entry, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def sweep_temporaries(*folders: str | Path) -> list[Path]:
    """Remove the `.<name>.*.tmp` files `atomic_write_bytes` leaves when a process is killed mid-write."""
    gone = []
    for folder in folders:
        for p in Path(folder).glob(".*.tmp"):
            if p.is_file():
                p.unlink(missing_ok=True)
                gone.append(p)
    return gone


def shared_data_dir() -> Path:
    """Where ../shared/data lives: $FORGE_SHARED_DATA, else ../shared/data beside the repository."""
    env = os.environ.get("FORGE_SHARED_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


