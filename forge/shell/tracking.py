"""Run tracking: every training Forge runs (labels, surrogate fits, verify, co-evolution) logs through one
Lightning logger, chosen the same way everywhere: `logger=csv` (default), `logger=tensorboard`, `logger=mlflow`
(conf/logger/), or `logger=none` for none. Logs go into the command's run folder, `<run dir>/logs/`.

A logger whose package is missing is refused in one line when the command starts, before any training (a
training that failed on it later would store a failed label). Loggers are code, so only Lightning's own (or
one the user registers under `plugins.logger`) are built (forge.plugins).
"""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from forge.errors import UserError

DEFAULT = "lightning.pytorch.loggers.CSVLogger"
# the package each of Lightning's loggers imports (any one of a tuple will do) and how to install it
NEEDS = {"TensorBoardLogger": (("tensorboard", "tensorboardX"), "pip install tensorboard"),
         "MLFlowLogger": (("mlflow",), "pip install mlflow"), "WandbLogger": (("wandb",), "pip install wandb"),
         "CometLogger": (("comet_ml",), "pip install comet-ml"), "NeptuneLogger": (("neptune",), "pip install neptune")}
_ACTIVE: list[dict[str, Any] | None] = []  # the logger node trainings in this process use (`log_to`)


class TrackingError(UserError):
    """A logger that cannot run here (its package is missing)."""


def check(node: Mapping[str, Any] | None, app: str) -> None:
    """Refuse, in one line, a logger whose package is not installed."""
    if not node:
        return
    cls = str(node.get("_target_", DEFAULT)).rsplit(".", 1)[-1]
    mods, how = NEEDS.get(cls, ((), ""))
    if mods and not any(importlib.util.find_spec(m) is not None for m in mods):
        raise TrackingError(f"{app}: logger {cls} needs the package {mods[0]}, which is not installed; allowed: "
                            f"{how}, or logger=csv (the default, no extra package) or logger=none (no logs)")


def node_for(node: Mapping[str, Any] | None, run_dir: str | Path | None, app: str) -> dict[str, Any] | None:
    """The logger node a command's trainings use: checked, its save_dir defaulting to <run_dir>/logs."""
    if not node:
        return None
    check(node, app)
    node = dict(node)
    save = node.get("save_dir") or (Path(run_dir) / "logs" if run_dir is not None else None)
    return {**node, "save_dir": str(Path(save).resolve())} if save else None


def build(node: Mapping[str, Any] | None, name: str) -> Any:
    """A Lightning logger from a node (False when there is none); `name` where the logger takes one."""
    if not node:
        return False
    import inspect

    from forge import plugins

    node = dict(node)
    cls = plugins.resolve("logger", node.pop("_target_", DEFAULT))
    if "name" in inspect.signature(cls).parameters and "name" not in node:
        node["name"] = name
    return cls(**node)


@contextmanager
def log_to(node: Mapping[str, Any] | None) -> Iterator[None]:
    """Trainings started inside (surrogate fits, refits) log through `node`."""
    _ACTIVE.append(dict(node) if node else None)
    try:
        yield
    finally:
        _ACTIVE.pop()


def current() -> dict[str, Any] | None:
    return _ACTIVE[-1] if _ACTIVE else None


def logged(fn: Any, node: Mapping[str, Any] | None) -> Any:
    """`fn` (a refit: surrogate.fit.finetune, ...) run inside `log_to(node)`, wherever it is called from."""
    if not node:
        return fn

    def run(*args: Any, **kwargs: Any) -> Any:
        with log_to(node):
            return fn(*args, **kwargs)

    return run
