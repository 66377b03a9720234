"""Python arguments → the Hydra config the command line would compose: a string for a config group is a
choice, any other value is merged, `overrides` pass through as typed. Kept apart from search/api.py (the
calls) because both the calls and `SearchResult`'s follow-ups (search/result.py) compose commands through it.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from forge.runtime.config import CONFIG_PATH, as_choices, check_override_types
from search.api_args import as_list, check_group, check_values

GROUPS = ("space", "search", "backend", "workload", "protocol", "corpus", "dispatch", "experiment", "hardware",
          "logger")


def compose(app: str, overrides: Sequence[str] = (), **values: Any) -> Any:
    """conf/<app>.yaml composed as its CLI would: a string for a config group (`backend="gemmini"`) is a
    group choice; any other value (lists, numbers, mappings such as `search={"generations": 3}`) is merged
    into the composed config, except a mapping with `_target_`, which replaces the node (a plug-in).
    `overrides` are command-line overrides, passed through unchanged."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import OmegaConf, open_dict

    from forge.runtime.shadow import check

    check()  # a `search/` or `backends/` folder beside the user's script would be imported instead of Forge's
    own, plus = _groups(app)  # forge-verify's `dispatch="local"` is a plain key of its config, not a group choice
    for k, v in values.items():
        check_group(k, v, own + plus)
    groups = [f"{'+' * (k in plus)}{k}={v}" for k, v in values.items() if k in own + plus and isinstance(v, str)]
    own += plus
    with initialize_config_module(config_module=CONFIG_PATH.removeprefix("pkg://"), version_base="1.3"):
        cfg = hydra_compose(app, overrides=[*groups, *as_choices(app, as_list("overrides", overrides) or [])],
                            return_hydra_config=True)
    check_override_types(cfg.hydra)  # `overrides` typed and ranged as on the command line
    with open_dict(cfg):
        del cfg["hydra"]
    check_values(app, OmegaConf.to_container(cfg, resolve=False),  # what the CLI's struct mode would refuse
                 {k: v for k, v in values.items() if not (k in own and isinstance(v, str))})
    with open_dict(cfg):
        for k, v in values.items():
            if v is not None and not (k in own and isinstance(v, str)):
                OmegaConf.update(cfg, k, v, merge=isinstance(v, Mapping) and "_target_" not in v)
    return cfg


def _groups(app: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the groups conf/<app>.yaml's defaults list chooses from, the groups it may add as the CLI's `+group=x`
    does, such as forge-search's `+hardware=host-cpu`): a string for either is a choice, not a value."""
    from forge.runtime.config import group_yaml

    top = group_yaml("", app) or {}
    own = tuple(k for e in top.get("defaults") or [] if isinstance(e, dict) for k in e if k in GROUPS)
    return own, (("hardware",) if "backend" in own and "hardware" not in own + tuple(top) else ())
