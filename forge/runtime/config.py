"""Where the Hydra configs and shipped assets live, for an editable or a plain install alike, and what the
shipped config groups hold (their names, their YAML, a key's default), and the check that a command-line
override has its default's type and its key's range.

Pure helpers over files and configs; the command wrapper every `forge-*` CLI runs in (one error path, exit
codes) is forge.shell.app; the run-folder guard is forge.shell.run_guard.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from forge.errors import UserError
from forge.runtime.limits import check_range

CONFIG_PATH = "pkg://forge_conf"  # what every @hydra.main uses
# a config-group choice is a plain name (`local`, `iha-tiny`, `a100-40gb`): no separator, no leading dot, so no
# value read from a run folder can pick a file outside its group's folder (`/abs/evil`, `../x`, `/proc/self/cwd/x`)
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@-]*")


def conf_dir() -> Path:
    return Path(str(resources.files("forge_conf")))


def data_dir() -> Path:
    return Path(str(resources.files("forge_data")))


def to_container(cfg: Any) -> Any:
    """OmegaConf node → plain python containers (resolving interpolations); plain input passes through."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover
        return cfg
    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


def group_names(group: str) -> list[str]:
    """Config names available in conf/<group>/ (what an error message lists as allowed)."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def is_name(value: Any) -> bool:
    """Whether `value` is a plain config name (never a path): what a group value read from disk must be."""
    return isinstance(value, str) and NAME.fullmatch(value) is not None


def _group_dirs(group: str) -> list[Path]:
    """conf/<group>/, then <dir>/<group>/ of each `file://` searchpath the running Hydra job was launched with."""
    try:
        from hydra.core.hydra_config import HydraConfig

        sources = list(HydraConfig.get().runtime.config_sources)
    except Exception:  # noqa: BLE001 - no Hydra job (ValueError), or one that recorded no sources
        sources = []
    extra = [Path(str(s["path"])) / group for s in sources if s.get("schema") == "file" and s.get("path")]
    return [conf_dir() / group, *extra]


def known_names(group: str) -> list[str]:
    """A group's names, shipped or on the launched searchpath: what a group value read from a run folder may name."""
    return sorted({p.stem for d in _group_dirs(group) for p in d.glob("*.yaml") if is_name(p.stem)})


def group_yaml(group: str, name: str) -> dict[str, Any] | None:
    """The plain mapping of <group>/<name>.yaml (shipped, else on the launched searchpath), or None when there is no
    such config (a path given as the name included: a group value names a config, never a file)."""
    import yaml

    if not is_name(name):
        return None
    path = next((p for d in _group_dirs(group) if (p := d / f"{name}.yaml").is_file()), None)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's safe loader where built: the same data
    return (yaml.load(path.read_text(), Loader=loader) or {}) if path is not None else None  # noqa: S506


def searchpath_yaml(group: str, name: str) -> dict[str, Any] | None:
    """conf/<group>/<name>.yaml of the package, else of a folder on the running command's searchpath
    (`hydra.searchpath=[file://my/conf]`, where the user keeps recipes of their own), else None. `name` is a
    config name, never a path."""
    node = group_yaml(group, name)
    if node is not None or "/" in name or "\\" in name or name.startswith("."):
        return node
    try:
        from hydra.core.hydra_config import HydraConfig

        paths = [str(p) for p in HydraConfig.get().searchpath or []]
    except ValueError:  # no Hydra job (a test, the Python API's compose): the package's configs only
        return None
    import yaml

    for folder in (Path(p.removeprefix("file://")) for p in paths if p.startswith("file://")):
        path = folder / group / f"{name}.yaml"
        if path.is_file():
            return yaml.safe_load(path.read_text()) or {}
    return None


def as_choices(config: str, overrides: list[str]) -> list[str]:
    """`+group=x` for a group the config's defaults list holds (forge-search's `hardware`, default none) is that
    group's choice, as `group=x` is: Hydra would refuse it ("Multiple values"), the docs used to show it."""
    top = group_yaml("", config) or {}
    groups = {k for e in top.get("defaults") or [] if isinstance(e, dict) for k in e}
    return [o[1:] if isinstance(o, str) and o.startswith("+") and o[1:].split("=", 1)[0] in groups else o
            for o in overrides]


RAY_INIT = "hydra.launcher.ray.init."


def ray_cluster(overrides: list[str]) -> list[str]:
    """hydra-ray-launcher sets `ray.init(object_store_memory=...)` unless told otherwise, which Ray refuses when
    it joins a running cluster (`+hydra.launcher.ray.init.address=auto`): the cluster's store is already sized.
    Joining one, the launcher is told `object_store_memory=null` (Ray's default), unless the command sets it."""
    def key(o: str) -> str:
        return o.lstrip("+~").split("=", 1)[0] if isinstance(o, str) else ""

    joins = any(key(o) == RAY_INIT + "address" and o.split("=", 1)[1:] not in ([""], ["null"]) for o in overrides
                if isinstance(o, str) and "=" in o)
    if not joins or any(key(o) == RAY_INIT + "object_store_memory" for o in overrides):
        return overrides
    return [*overrides, f"+{RAY_INIT}object_store_memory=null"]


def output_dir(cfg: Any, fallback: str | Path | None = ".") -> Path | None:
    """Hydra's run directory under @hydra.main; else cfg.out_dir (tests call run() directly); else fallback."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:
        out = cfg.get("out_dir") if hasattr(cfg, "get") else None
        return Path(out) if out else (Path(fallback) if fallback is not None else None)


def check_override_types(hydra_cfg: Any = None) -> None:
    """Command-line values must have the type of the shipped default (`seed=abc` names `seed`) and lie in the
    key's range (forge.runtime.limits): Hydra accepts any value for an untyped YAML key, and the failure would come
    later without the key's name (or never: `n=1e9` hangs)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = hydra_cfg or HydraConfig.get()
    except ValueError:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser

    choices = dict(hc.runtime.choices)
    for o in OverridesParser.create().parse_overrides(list(hc.overrides.task)):
        key = o.key_or_group
        if o.is_delete() or key.split(".")[0] == "hydra" or key in choices:
            continue
        default = default_value(key, hc.job.config_name, choices)
        grid = isinstance(o.value(), list) and key.startswith("space.") and _searchable_global(key[6:])
        problem = next(filter(None, (type_problem(default, v) for v in (o.value() if grid else [o.value()]))), None)
        if problem:
            raise UserError(f"{key}={o.value()!r} is not {problem}; allowed: {problem} (default {default!r})")
        check_range(hc.job.config_name, key, o.value())


def _searchable_global(name: str) -> bool:
    """`space.d_model=[128,192]`: a global gene a space may search takes a grid of its default's type."""
    from forge.genomes.genes import GLOBAL_GENES

    return name in GLOBAL_GENES and GLOBAL_GENES[name].search


def default_value(key: str, config_name: str, choices: dict[str, Any]) -> Any:
    """The shipped default of a dotted key: from conf/<group>/<choice>.yaml when it lies in a chosen group."""
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        group = "/".join(parts[:n])
        if choices.get(group):
            return select(group_yaml(group, str(choices[group])), ".".join(parts[n:]))
    return select(group_yaml("", config_name), key)


def select(node: Any, path: str, missing: Any = None) -> Any:
    """The value at a dotted `path` of plain containers, or `missing` where a step is absent."""
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return missing
        node = node[part]
    return node


def type_problem(default: Any, value: Any) -> str | None:
    """What a value must be to stand where the shipped `default` is (None: it may): Hydra and the API's merge
    accept any value for an untyped YAML key, so the check is ours (check_override_types, search.api_args)."""
    if value is None or default is None or isinstance(default, str):
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "a boolean (true|false)"
    if isinstance(default, int):
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())  # 1e6 is fine
        return None if whole and not isinstance(value, bool) else "an integer"
    if isinstance(default, float):
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "a number"
    return None
