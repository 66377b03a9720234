"""A run folder checked as data before any work starts: each file a regular one, each read by one safe loader.

A resume used to read some files late (config.yaml only for the end screen, after every generation ran), so a
damaged one surfaced as a crash at the end. `check_run_files` reads and checks them all first: a link, FIFO or
folder where a run file should be is named for what it is; config.yaml is read with the safe YAML loader (a
`!!python` tag is refused); summary.json is checked against its schema (`check_summary`). Every refusal is one
line naming the file and what is allowed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from search.errors import ResumeError
from forge.disk.io import loads
from forge.disk import run_folder

SUMMARY = run_folder.SUMMARY

RUN_FILES = run_folder.SEARCH_FILES  # what a search writes in its folder (checked when present)
_NUM = (int, float)
# summary.json's fields and their JSON types (search.summary writes them); an unknown key is kept, unread
SUMMARY_TYPES: dict[str, Any] = {
    "status": str, "generations_done": int, "generations": int, "hypervolume": _NUM,
    "hypervolume_loss_params": _NUM, "hv_per_generation": list, "hv_loss_params_per_generation": list,
    "evaluations": int, "archive_size": int, "wall_s": _NUM, "phase_s": dict, "objectives": list, "maximize": list,
    "constraints": list, "constraint_use": list, "hv_anchor": dict, "algorithm": str, "space": str, "backend": str,
    "seed": int, "surrogate_version": int, "run_dir": str, "loss_interval": (dict, type(None)),
    "loss_pairwise": (dict, type(None)), "interrupted_by": str,
    "reason": str, "least_violating": (dict, list, type(None)), "coevolution": (dict, type(None)),
}
_KINDS = ((Path.is_dir, "a folder"), (Path.is_fifo, "a FIFO"), (Path.is_socket, "a socket"),
          (Path.is_block_device, "a device"), (Path.is_char_device, "a device"))


def what_is(path: Path) -> str:
    """'a link to X', 'a folder', 'a FIFO', ... for a path that is not a regular file."""
    if path.is_symlink():
        return f"a link to {os.readlink(path)}"
    return next((name for test, name in _KINDS if test(path)), "not a regular file")


def odd_run_file(run_dir: Path, names: tuple[str, ...]) -> str | None:
    """'config.yaml is a FIFO' for the first of `names` under `run_dir` that is there but not a regular file (a
    link, FIFO, folder): a command that needs it says what it is, not that it is missing."""
    for name in names:
        path = Path(run_dir) / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return f"{name} is {what_is(path)}, not a file"
    return None


def refuse_odd(run_dir: Path, names: tuple[str, ...], error: type[Exception] = ResumeError) -> None:
    """`error` in one line when one of `names` is there but not a regular file (see `odd_run_file`)."""
    odd = odd_run_file(run_dir, names)
    if odd:
        raise error(f"run={run_dir}: {odd}; allowed: the regular file forge-search wrote")


def check_run_files(run_dir: Path) -> None:
    """Every run file present is a regular file (not a link, FIFO or folder), config.yaml is plain YAML data and
    summary.json matches its schema; else ResumeError (or forge.disk.files' UserError) in one line."""
    from forge.disk.files import read_yaml_file

    run_dir = Path(run_dir)
    odd = odd_run_file(run_dir, RUN_FILES)
    if odd:
        raise ResumeError(f"resume={run_dir}: {odd}; allowed: the regular file forge-search wrote (nothing in a run "
                          "folder is read or written through a link)")
    if (run_dir / run_folder.CONFIG).is_file():
        cfg = read_yaml_file(run_dir / run_folder.CONFIG, "run config")  # a !!python tag: refused, naming the line
        if not isinstance(cfg, Mapping):
            raise ResumeError(f"{run_dir / run_folder.CONFIG}: a YAML {type(cfg).__name__}, not a mapping; allowed: the "
                              "config.yaml forge-search wrote")
    read_summary(run_dir)


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run's summary.json as a dict ({} when absent); anything but a JSON object is refused, naming the file."""
    path = Path(run_dir) / SUMMARY
    if path.is_symlink():  # its target's content would be copied into a report or an export as the run's
        from forge.disk.confined import refused

        raise refused(path, Path(run_dir))
    if not path.exists():
        return {}
    if not path.is_file() and not path.is_dir():  # a FIFO would block the read forever
        raise ResumeError(f"{path}: not a regular file (a FIFO, socket or device); allowed: the summary.json "
                          "forge-search wrote")
    try:
        s = loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError) as e:
        raise ResumeError(f"{path}: corrupt summary ({type(e).__name__}); allowed: the summary.json forge-search "
                          "wrote") from None
    if not isinstance(s, dict):
        raise ResumeError(f"{path}: corrupt summary (a JSON {type(s).__name__}, not an object); allowed: the "
                          "summary.json forge-search wrote")
    check_summary(s, path)
    return s


def check_summary(s: Mapping[str, Any], path: Path) -> None:
    """summary.json's known fields have their types, and no `_target_` anywhere (data never names code)."""
    bad = [k for k, t in SUMMARY_TYPES.items() if k in s and (not isinstance(s[k], t) or
                                                               (isinstance(s[k], bool) and t is not bool))]
    if bad:
        raise ResumeError(f"{path}: corrupt summary (mistyped {', '.join(bad)}); allowed: the summary.json "
                          "forge-search wrote")
    if _names_code(s):
        raise ResumeError(f"{path}: corrupt summary (a _target_ key: data never names code); allowed: the "
                          "summary.json forge-search wrote")


def _names_code(v: Any) -> bool:
    if isinstance(v, Mapping):
        return "_target_" in v or any(_names_code(x) for x in v.values())
    return isinstance(v, list) and any(_names_code(x) for x in v)


def refuse_unknown_keys(saved: dict[str, Any], run_dir: Path) -> None:
    """A top-level key no forge-search config has (conf/forge-search.yaml's keys and groups) is refused in one
    line: a resume would carry it silently, and nothing reads it (a typo of a real key, or a planted one)."""
    import yaml

    from forge.runtime.config import conf_dir

    top = yaml.safe_load((conf_dir() / "forge-search.yaml").read_text())
    groups = {k.split()[-1] for d in top.get("defaults", []) if isinstance(d, dict) for k in d}
    unknown = sorted(str(k) for k in saved if k not in {*top, *groups, "hydra"} - {"defaults"})
    if unknown:
        raise ResumeError(f"resume={run_dir}: the saved config has unknown key(s) {', '.join(unknown)}; allowed: "
                          "the keys of forge-search's config (`forge-search --cfg job` lists them)")
