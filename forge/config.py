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


def group_names(group: str) -> list[str]:
    """Config names available in conf/<group>/ (what an error message lists as allowed)."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def group_yaml(group: str, name: str) -> dict[str, Any] | None:
    """The plain mapping of conf/<group>/<name>.yaml, or None when there is no such config."""
    import yaml

    path = conf_dir() / group / f"{name}.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else None


def output_dir(cfg: Any, fallback: str | Path | None = ".") -> Path | None:
    """Hydra's run directory under @hydra.main; else cfg.out_dir (tests call run() directly); else fallback."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:
        out = cfg.get("out_dir") if hasattr(cfg, "get") else None
        return Path(out) if out else (Path(fallback) if fallback is not None else None)
