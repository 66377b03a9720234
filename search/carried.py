"""What a printed follow-up command carries from the command that made a run, so it runs when pasted for any run.

A run of a plug-in, a space YAML in the user's own config folder or a predictor of theirs is read back only with
what made it: the plug-in modules it recorded (`plugins.json`, forge.shell.plugin_use), the config folders it was
launched with (`hydra.searchpath`) and, for a new search in its image (the CPU recipe), its own overrides (the
space's, the predictor's). Every printed line (`next:`, `continue with:`, the tier decision, verify's advice) takes
them from `carry` and `own_overrides` here, one place.

The launch is read from the run's `.hydra/` (what Hydra wrote for the job that made it): a suggestion to print,
never something run or imported here, each value quoted for the shell.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any
from forge.disk import run_folder

# overrides a new search in the run's image sets itself, or that belong to one job only
NOT_CARRIED = ("protocol", "corpus", "search.generations", "resume", "stop_after", "progress", "out_dir", "hydra",
               "json", "quiet")


def quote(arg: str) -> str:
    """A `key=value` with spaces or shell specials quoted for the shell (Hydra reads the quoted value)."""
    return arg if all(c.isalnum() or c in "_-./=:+,@" for c in arg) else "'" + arg.replace("'", "'\\''") + "'"


def _read(path: Path) -> Any:
    from forge.disk.files import read_yaml_file
    from forge.errors import UserError

    try:
        return read_yaml_file(path, "Hydra record") if path.is_file() else None
    except (UserError, OSError):
        return None


def _strings(value: Any) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def launch_overrides(run_dir: str | Path) -> list[str] | None:
    """The command-line overrides of the search that made the run (None: not recorded, or a resume's)."""
    got = _strings(_read(Path(run_dir) / run_folder.HYDRA_OVERRIDES))
    return None if got is None or any(o.split("=", 1)[0].lstrip("+~") == "resume" for o in got) else got


def searchpath(run_dir: str | Path) -> list[str]:
    """The config folders the run's search was launched with (`hydra.searchpath=[file://...]`), [] if none."""
    hydra = _read(Path(run_dir) / run_folder.HYDRA_HYDRA)
    node = hydra.get("hydra") if isinstance(hydra, dict) else None
    return _strings(node.get("searchpath") if isinstance(node, dict) else None) or []


def carry(run_dir: str | Path, code: bool = False) -> list[str]:
    """`hydra.searchpath=[...]` and `plugins.modules=[...]` a command on the run needs (`code`: one that rebuilds its
    classes: resume, verify); [] for a run of Forge's own parts launched without config folders of its own."""
    from forge.shell import plugin_use

    paths = searchpath(run_dir)
    return [*([quote(f"hydra.searchpath=[{','.join(paths)}]")] if paths else []), *plugin_use.args(run_dir, code)]


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def own_overrides(run_dir: str | Path) -> list[str] | None:
    """The run's own overrides a new search in its image repeats (its space's, its predictor's, its backend's,
    its scale), quoted; those `NOT_CARRIED` and `plugins.modules` (carried from the record) left out; None when the
    launch is not recorded (a run made from Python, or only resumed here)."""
    got = launch_overrides(run_dir)
    if got is None:
        return None
    keep = [o for o in got if not any(_key(o) == k or _key(o).startswith(f"{k}.") for k in NOT_CARRIED)]
    return [quote(o) for o in keep if _key(o) != "plugins.modules"]


def customized(run_dir: str | Path, run_cfg: dict[str, Any]) -> bool:
    """Whether the run's space or predictor is not one Forge ships as named: a plug-in run, a space from the user's
    config folder or changed by overrides, a predictor of theirs. A recipe for it repeats the run's own launch."""
    from forge.shell import plugin_use
    from forge.runtime.config import conf_dir, data_dir

    space = run_cfg.get("space")
    name = (space if isinstance(space, str) else str((space or {}).get("name", ""))) or "iha-tiny"  # the default
    pred = (run_cfg.get("evaluator") or {}).get("predictor", "auto")
    shipped_pred = isinstance(pred, str) and (pred == "auto" or (data_dir() / "surrogate" / f"{pred}.json").is_file())
    spaced = any(_key(o).startswith("space.") for o in launch_overrides(run_dir) or [])
    return bool(plugin_use.args(run_dir, code=True)) or not (conf_dir() / "space" / f"{name}.yaml").is_file() or \
        not shipped_pred or spaced
