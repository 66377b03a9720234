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
# what a received run may not choose (issue 50 §2): the data it trains on, the kind of trainer (a local process,
# Ray, Slurm jobs) and the logger's class (a tracking service). Key -> its group; the choice is compared, not only
# the options: a saved choice must be the launched one (or, for a corpus, a shipped config as shipped)
CHOICES = {"corpus": "corpus", "dispatch": "dispatch", "evaluator.trainer": "dispatch",
           "search.coevolve.trainer": "dispatch", "logger": "logger"}
# the choice a command makes where its launched value is null ("keep the run's"): conf/forge-search.yaml's defaults
DEFAULT_CHOICE = {"dispatch": "local", "logger": "csv"}


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
    stop = select(saved, "search.coevolve.stop")  # issue 52: a curve model file is a path, named only at launch
    if isinstance(stop, Mapping) and isinstance(stop.get("model"), str):
        yield "search.coevolve.stop", stop, ("model",), {}


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


def check_saved(saved: Mapping[str, Any], live: Mapping[str, Any] | None, where: str, how: str,
                choices: tuple[str, ...] = tuple(CHOICES)) -> None:
    """Refuse a saved trainer option that executes, connects or writes outside the run folder unless it is the
    shipped default of its class or the launched config (`live`) sets the same value at the same key; and a
    config-group value that is not one of its group's names (`check_names`); and a saved choice (corpus,
    trainer kind, logger class: `check_choices`, on the keys `choices` names) that is not the launched one."""
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
    check_choices(saved, live, where, how, choices)


def _node(group: str, value: Any) -> dict[str, Any] | None:
    """A saved or launched group value as its mapping (a name read from conf/<group>/), None for none."""
    from forge.runtime.config import group_yaml

    if isinstance(value, str):
        return group_yaml(group, value)
    return dict(value) if isinstance(value, Mapping) else None


def choice_of(group: str, value: Any) -> tuple[Any, ...] | None:
    """What a value chooses: its class, and for a corpus every text option too (a path, a dataset or tokenizer
    name: what is read or downloaded); numbers (sizes, fractions) choose nothing. None: no choice (null)."""
    node = _node(group, value)
    if not node:
        return None
    target = str(node.get("_target_", "lightning.pytorch.loggers.CSVLogger" if group == "logger" else ""))
    if group != "corpus":
        return (target,)
    named = sorted((k, repr(v)) for k, v in node.items()
                   if k != "_target_" and not (v is None or isinstance(v, (int, float))))  # bools are ints
    return (target, *named)


def check_choices(saved: Mapping[str, Any], live: Mapping[str, Any] | None, where: str, how: str,
                  keys: tuple[str, ...] = tuple(CHOICES)) -> None:
    """Refuse a saved corpus, trainer kind or logger class that is not the launched one: a received run never
    picks the data a command trains on, the jobs it starts or the service it reports to. A launched null keeps
    the command's own default (`DEFAULT_CHOICE`); a saved corpus may also be a shipped config as shipped."""
    from forge.runtime.config import conf_dir

    for key in keys:
        group = CHOICES[key]
        mine = choice_of(group, select(saved, key))
        if mine is None:
            continue
        launched = select(live or {}, key)
        if launched is None and key in TRAINER_PATHS[1:]:  # an unset trainer slot trains through `dispatch`
            launched = select(live or {}, "dispatch")
        if launched is None:
            launched = DEFAULT_CHOICE.get(group)
        allowed = [choice_of(group, launched)]
        if group == "corpus":
            allowed += [choice_of(group, p.stem) for p in sorted((conf_dir() / group).glob("*.yaml"))]
        if mine in allowed:
            continue
        raise LaunchOnlyError(
            f"{where}: the saved {key} ({_short(_node(group, select(saved, key)))}) is refused: a run folder, "
            f"checkpoint, store or export never chooses {_WHAT[group]}; allowed: choose it yourself on the command "
            f"line ({how} {key}=<name> with its options, e.g. {_spelled(key, _node(group, select(saved, key)))}) or "
            "leave it out (the command's own)")


_WHAT = {"corpus": "the data a command trains on", "dispatch": "the kind of trainer (which jobs start where)",
         "logger": "the logger's class (where results are reported)"}


def _spelled(key: str, node: Mapping[str, Any] | None) -> str:
    """The overrides that pass a saved choice deliberately: its shipped name when it is one, else its options."""
    from forge.runtime.config import conf_dir

    group = CHOICES[key]
    for p in sorted((conf_dir() / group).glob("*.yaml")):
        if node and _node(group, p.stem) and choice_of(group, p.stem)[0] == str(node.get("_target_", "")):
            extra = [f"{key}.{k}={v}" for k, v in node.items()
                     if k != "_target_" and isinstance(v, str) and v != (_node(group, p.stem) or {}).get(k)]
            return " ".join([f"{key}={p.stem}", *extra])
    return f"+{key}._target_=<class>"


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
