"""Launch-only options: what runs a shell line, joins a host or writes outside the run folder.

The plug-in allowlist (forge.plugins) decides which *classes* a saved config may name; this module decides which
of their *options* it may carry. A trainer's `local_setup`/`slurm_setup` lines (submitit runs them), its log
`folder`, a Ray `address`/`init_kwargs`, a label `store` URL, a `weights_dir`, a `logger` (a tracking server), a
test `fault` hook: such values come only from the command line and the config the user launches, never from a
run folder, a checkpoint, a label store or an export. `check_saved` refuses, in one line naming the key and how
to pass it, a saved value that is neither the shipped default of its class nor the launched config's own value.

    check_saved(saved_cfg, live_cfg, where=f"resume={run_dir}", how=f"forge-search resume={run_dir}")
"""
from __future__ import annotations

import functools
from typing import Any, Iterator, Mapping

from forge.config import select
from forge.errors import UserError

# where a run's config holds a trainer node (conf/dispatch, or a `_target_` node in its place)
TRAINER_PATHS = ("dispatch", "evaluator.trainer", "search.coevolve.trainer")
# trainer options that execute, connect or write outside the run folder (forge.labelling.dispatch / base)
LAUNCH_ONLY = ("folder", "parameters", "cluster", "address", "init_kwargs", "store", "weights_dir", "logger",
               "fault")
_UNSET = object()


class LaunchOnlyError(UserError):
    """A saved run names an option that only the launched command may set."""


@functools.lru_cache(maxsize=None)
def _shipped(target: str) -> tuple[tuple[str, Any], ...]:
    """The launch-only options of the shipped conf/dispatch config whose `_target_` is `target` (trusted)."""
    import yaml

    from forge.config import conf_dir

    for path in sorted((conf_dir() / "dispatch").glob("*.yaml")):
        node = yaml.safe_load(path.read_text()) or {}
        if node.get("_target_") == target:
            return tuple((k, node[k]) for k in LAUNCH_ONLY if k in node)
    return ()


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
    shipped default of its class or the launched config (`live`) sets the same value at the same key."""
    for base in TRAINER_PATHS:
        node = select(saved, base, _UNSET)
        if not isinstance(node, Mapping):  # absent, or a shipped config name (conf/dispatch/<name>.yaml): trusted
            continue
        default = dict(_shipped(str(node.get("_target_", ""))))
        for key in LAUNCH_ONLY:
            for path, value in _leaves(node.get(key), f"{base}.{key}"):
                rel = path[len(base) + 1:]
                if value == select(default, rel, _UNSET) or (live is not None and value == select(live, path, _UNSET)):
                    continue
                raise LaunchOnlyError(
                    f"{where}: the saved {path} = {_short(value)} is refused: options that run commands, connect "
                    f"to hosts or write outside the run folder are never read from a run folder, checkpoint, "
                    f"store or export; allowed: pass it yourself on the command line ({how} {path}=...) or "
                    "leave it out")
