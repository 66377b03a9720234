"""Passwords never leave the process: the one helper that masks the password of a URL in anything Forge
writes or prints (summaries, verify.json, the console, Hydra's `.hydra/*.yaml` and `multirun.yaml`).

A label store URL may carry one (`postgresql+psycopg://user:pw@host/db`); better not to type it at all:
libpq reads `PGPASSWORD`, `~/.pgpass` or a service file (`docs/how-to/labels.md`). Where one is typed, it
is used to connect and shown as `user:***@host`.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from forge.disk.io import atomic_write_text
from forge.moved import moved_attribute
from forge.disk import run_folder

MASK = "***"
# scheme://user:password@  (the password runs to the last '@' of the word, as SQLAlchemy's make_url reads it;
# Hydra escapes each ':' as '\:' in a multirun's overrides)
_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*\\?://[^\s:/@'\"\\]*)(?P<sep>\\?:)(?P<pw>[^\s'\"]*)@")


def mask(value: Any) -> Any:
    """`value` with the password of every URL in it replaced by `***` (strings, mappings and lists, nested)."""
    if isinstance(value, str):
        return _PASSWORD.sub(lambda m: f"{m['head']}{m['sep']}{MASK}@", value)
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(mask(v) for v in value)
    return value


def mask_file(path: Path) -> bool:
    """Rewrite a text file (atomically) with its URL passwords masked; True when it changed."""
    path = Path(path)
    if not path.is_file():
        return False
    text = path.read_text(errors="replace")
    masked = mask(text)
    if masked != text:
        atomic_write_text(path, masked)
    return masked != text


def hydra_files(config: Any) -> list[Path]:
    """The files Hydra wrote for this job before it started: `.hydra/*.yaml` and, in a multirun, `multirun.yaml`."""
    from omegaconf import OmegaConf

    hc = config.hydra if "hydra" in config else config
    out: list[Path] = []
    sub = OmegaConf.select(hc, "output_subdir")
    run_dir = OmegaConf.select(hc, "runtime.output_dir")
    if sub is not None and run_dir:
        out += sorted((Path(run_dir) / str(sub)).glob("*.yaml"))
    sweep = OmegaConf.select(hc, "sweep.dir")
    if str(OmegaConf.select(hc, "mode")) == "RunMode.MULTIRUN" and sweep:
        out.append(Path(sweep) / run_folder.HYDRA_MULTIRUN)
    return out


def mask_log_records() -> None:
    """Every log record of this process (Hydra's launcher prints each job's overrides) is masked when it is
    made, so no handler Hydra configures later can print or file a password."""
    old = logging.getLogRecordFactory()
    if getattr(old, "forge_masks", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = old(*args, **kwargs)
        text = record.getMessage()
        if "://" in text and mask(text) != text:
            record.msg, record.args = mask(text), ()
        return record

    factory.forge_masks = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def __getattr__(name: str) -> object:
    """`forge.disk.redact.MaskSecrets` (every saved `.hydra/hydra.yaml` names it there) is forge.shell.callbacks's now
    (issue 57): resolved through forge.moved, with its one warning."""
    return moved_attribute(__name__, name)
