"""Launch-only options: what runs a shell line, joins a host or writes outside the run folder.

The plug-in allowlist (forge.plugins) decides which *classes* a saved config may name; this module decides which
of their *options* it may carry. A trainer's `local_setup`/`slurm_setup` lines (submitit runs them), its log
`folder`, a Ray `address`/`init_kwargs`, a label `store` URL, a `weights_dir`, a `logger` (a tracking server), a
test `fault` hook: such values come only from the command line and the config the user launches, never from a
run folder, a checkpoint, a label store or an export. `check_saved` refuses, in one line naming the key and how
to pass it, a saved value that is neither the shipped default of its class nor the launched config's own value.
A `logger` node (it writes, or connects to a tracking server) is launch-only as a whole, in every command.
`check_names` refuses a config-group value read from disk that is not one of its group's names (`dispatch:
/proc/self/cwd/run/evil` would load a YAML planted in the run folder): a group value from disk is a name, never a
path. Each copy of the config a command reads (config.yaml, .hydra/config.yaml, the checkpoint's) is checked
where it is read, before anything is built from it.

    check_saved(saved_cfg, live_cfg, where=f"resume={run_dir}", how=f"forge-search resume={run_dir}")
"""
from __future__ import annotations

import functools
from typing import Any, Iterator, Mapping

from forge.runtime.config import select
from forge.errors import UserError

# where a run's config holds a trainer node (conf/dispatch, or a `_target_` node in its place)
TRAINER_PATHS = ("dispatch", "evaluator.trainer", "search.coevolve.trainer")
# config-group values below the top level (a top-level key named like a conf/ group holds that group's value)
NESTED_GROUPS = {"evaluator.trainer": "dispatch", "search.coevolve.trainer": "dispatch", "backend.hardware": "hardware"}
# trainer options that execute, connect or write outside the run folder (forge.labelling.dispatch / base)
LAUNCH_ONLY = ("folder", "parameters", "cluster", "address", "init_kwargs", "store", "weights_dir", "logger",
               "fault")
_UNSET = object()


class LaunchOnlyError(UserError):
    """A saved run names an option that only the launched command may set."""


@functools.lru_cache(maxsize=None)
def _shipped(group: str, target: str) -> tuple[tuple[str, Any], ...]:
    """The options of the shipped conf/<group> config whose `_target_` is `target` (trusted)."""
    import yaml

    from forge.runtime.config import conf_dir

    for path in sorted((conf_dir() / group).glob("*.yaml")):
        node = yaml.safe_load(path.read_text()) or {}
        if node.get("_target_") == target:
            return tuple(node.items())
    return ()


def _nodes(saved: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], tuple[str, ...], dict[str, Any]]]:
    """(path, node, its launch-only keys, the shipped config of its class) of each node `check_saved` checks:
    every trainer node, and the top-level logger, all of whose options are launch-only."""
    for base, group in [*((p, "dispatch") for p in TRAINER_PATHS), ("logger", "logger")]:
        node = select(saved, base)
        if isinstance(node, Mapping):
            keys = LAUNCH_ONLY if group == "dispatch" else tuple(k for k in node if k != "_target_")
            yield base, node, keys, dict(_shipped(group, str(node.get("_target_", ""))))


def _leaves(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of each set option under `value`; null and empty containers set nothing."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}")
    elif value is not None and value != [] and value != ():
        yield prefix, value


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def check_saved(saved: Mapping[str, Any], live: Mapping[str, Any] | None, where: str, how: str) -> None:
    """Refuse a saved trainer option that executes, connects or writes outside the run folder unless it is the
    shipped default of its class or the launched config (`live`) sets the same value at the same key; and a
    config-group value that is not one of its group's names (`check_names`)."""
    check_names(saved, where)
    for base, node, keys, default in _nodes(saved):
        for key in keys:
            for path, value in _leaves(node.get(key), f"{base}.{key}"):
                rel = path[len(base) + 1:]
                if value == select(default, rel, _UNSET) or (live is not None and value == select(live, path, _UNSET)):
                    continue
                raise LaunchOnlyError(
                    f"{where}: the saved {path} = {_short(value)} is refused: options that run commands, connect "
                    f"to hosts or write outside the run folder are never read from a run folder, checkpoint, "
                    f"store or export; allowed: pass it yourself on the command line ({how} {path}=...) or "
                    "leave it out")


def check_names(saved: Mapping[str, Any], where: str) -> None:
    """Refuse a config-group value read from disk that is not a name of its group (shipped, or on the searchpath
    the command was launched with): `dispatch: /proc/self/cwd/<run>/evil` or `../x` would pick a file."""
    from forge.runtime.config import conf_dir, known_names

    groups = {p.name for p in conf_dir().iterdir() if p.is_dir() and p.name != "hydra"}
    for path, group in {**{str(k): str(k) for k in saved if k in groups}, **NESTED_GROUPS}.items():
        value = select(saved, path)
        if isinstance(value, str) and value not in (names := known_names(group)):
            raise LaunchOnlyError(
                f"{where}: the saved {path} = {_short(value)} is refused: a config-group value read from a run "
                f"folder, checkpoint, store or export is a name, never a path; allowed: {' | '.join(names)} "
                f"(conf/{group}/, or a config on the searchpath you launch with)")
