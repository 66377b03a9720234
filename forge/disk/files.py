"""Reading a file the user (or a shared run folder) names: every way it can be wrong is bad input, in one line.

A folder, a FIFO (opening one blocks forever), a missing path, bytes that are not UTF-8, YAML with a language
tag (`!!python/object/...`: code, not data) are each reported naming the file and
what is allowed, as a `forge.errors.UserError` or an `OSError` naming the file (both exit 2 in the CLIs),
never as a `UnicodeDecodeError` or `ConstructorError` traceback.

    data = read_yaml_file(run_dir / "config.yaml", "run config")
"""
from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from forge.errors import UserError
from forge.disk.io import load_yaml, read_text


def require_file(path: str | Path, what: str = "file") -> Path:
    """`path` when it is a regular file; else FileNotFoundError / IsADirectoryError naming it, or a UserError for
    a FIFO, socket or device (which would block or never end)."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"{what} is a folder; allowed: a file", str(path))
    if path.exists():
        raise UserError(f"{path}: {what} is not a regular file (a FIFO, socket or device); allowed: a file")
    raise FileNotFoundError(errno.ENOENT, f"{what} not found", str(path))


def read_yaml_file(path: str | Path, what: str = "file") -> Any:
    """A YAML file's data (safe loader); a tag such as `!!python/object` names code, not data: refused."""
    import yaml

    text = read_text(require_file(path, what), what)
    try:
        return load_yaml(text, path)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(e, "problem", None) or type(e).__name__
        raise UserError(f"{where}: corrupt {what} ({problem}); allowed: plain YAML data (mappings, lists, strings, "
                        "numbers; no !!tags)") from None
