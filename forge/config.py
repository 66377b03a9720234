"""Where the Hydra configs and shipped assets live, for an editable or a plain install alike."""
from __future__ import annotations

import os
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

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


@contextmanager
def user_errors(app: str) -> Iterator[None]:
    """Report bad input (a ValueError such as GenomeError, or a missing file) as one line naming what is
    wrong, and exit with status 2 instead of a traceback. FORGE_DEBUG=1 keeps the traceback."""
    try:
        yield
    except (ValueError, FileNotFoundError) as e:
        if os.environ.get("FORGE_DEBUG"):
            raise
        raise SystemExit(f"{app}: error: {e}") from None
