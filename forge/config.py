"""Where the Hydra configs and shipped assets live, for an editable or a plain install alike."""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

CONFIG_PATH = "pkg://forge_conf"  # what every @hydra.main uses


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
