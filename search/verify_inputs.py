"""What forge-verify reads before it trains: the run directory, its per-group overrides and the measured backend
that re-measures cost on this machine. `from search.verify import VerifyError, measured_backend` keeps working.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from forge.runtime.config import group_yaml
from forge.disk.files import read_yaml_file
from search.components import backend_of
from search.errors import SearchConfigError, VerifyError
from search.run_files import refuse_odd
from search.run_files import read_summary
from search.state import read_jsonl
from forge.disk import run_folder

MEASURED = ("cpu-measured", "gpu-measured")
GPU_HARDWARE = ("a100", "h100", "orin")


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(resolved config, pareto rows, summary) of a forge-search run directory."""
    refuse_odd(run_dir, (run_folder.PARETO, run_folder.CONFIG), VerifyError)  # a FIFO is named as one, not "not there"
    if not (run_dir / run_folder.PARETO).is_file() or not (run_dir / run_folder.CONFIG).is_file():
        raise VerifyError(f"run={run_dir}: no pareto.jsonl/config.yaml there; allowed: a forge-search run directory")
    summary = read_summary(run_dir)
    cfg = read_yaml_file(run_dir / run_folder.CONFIG, "run config")  # not UTF-8, or a !!tag: one line naming it
    if not isinstance(cfg, dict):
        raise VerifyError(f"{run_dir / run_folder.CONFIG}: corrupt run config (a {type(cfg).__name__}, not a mapping); "
                          "allowed: the config.yaml forge-search wrote")
    return cfg, read_jsonl(run_dir / run_folder.PARETO), summary


def override_node(group: str, value: Any, fallback: Any) -> Any:
    """A verify override: null keeps the run's node, a name reads conf/<group>/<name>.yaml, a mapping is used as is."""
    if value is None:
        return fallback
    if isinstance(value, str):
        node = group_yaml(group, value)
        if node is None:
            raise VerifyError(f"{group}={value!r} is unknown; allowed: a config name in conf/{group}/ or null (the run's)")
        return node
    return dict(value)


def _backend_name(node: Any) -> str:
    return node if isinstance(node, str) else str((node or {}).get("name", ""))


def measured_backend(run_cfg: Mapping[str, Any], spec: Any) -> tuple[Any, str]:
    """(backend or None, note). auto: cpu-measured for a host-CPU run, gpu-measured for a GPU run on a GPU."""
    if spec in (None, "none", False):
        return None, "cost predicted (measure=none)"
    name = spec
    if spec == "auto":
        run_name = _backend_name(run_cfg.get("backend"))
        hw = str((run_cfg.get("backend") or {}).get("hardware", "") if isinstance(run_cfg.get("backend"), Mapping) else "")
        hw = hw or _backend_name(run_cfg.get("hardware"))
        name = run_name if run_name in MEASURED else ("cpu-measured" if "host-cpu" in hw else None)
        if name is None and any(g in hw for g in GPU_HARDWARE) and _cuda():
            name = "gpu-measured"
        if name is None:
            return None, f"cost predicted: no measured backend matches the run's hardware ({hw or run_name})"
    try:
        return backend_of({"backend": name}), f"cost measured by {name}"
    except SearchConfigError as e:
        if spec == "auto":
            return None, f"cost predicted: {name} unavailable ({e})"
        raise VerifyError(f"measure={spec!r}: {e}") from None


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False
