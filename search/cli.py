"""CLI apps of the search: `forge-search`, `forge-report`, `forge-export` (thin Hydra mains around run()).

    forge-search                                   # Table 6 defaults on iha-paper + roofline (~1 min CPU)
    forge-search -m seed=0,1,2,3,4 search=nsga,random
    forge-search resume=outputs/search/<stamp>     # continue a killed or interrupted run
    forge-report runs='[multirun/search/<stamp>]'  # PNGs + one self-contained report.html
    forge-export run=<dir> select=knee format=safetensors out=exported/
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from forge.config import CONFIG_PATH, to_container, user_errors
from forge.config import output_dir as _output_dir
from forge.io import atomic_write_text
from search.components import (build_backend, build_coevolution, build_evaluator, build_space,
                               build_workload)
from search.runner import Search
from search.problem import SearchConfigError
from search.state import CHECKPOINT, RUNTIME_KEYS, ResumeError, check_same_config, load_checkpoint


def output_dir(cfg: Any) -> Path:
    """Hydra's run directory under Hydra, else cfg.out_dir (tests), else ./outputs/search."""
    return _output_dir(cfg, fallback="outputs/search")


def run(cfg: Any, components: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run (or resume) one search; `components` may inject space/evaluator/backend/workload/coevolution."""
    c = to_container(cfg)
    resume = c.get("resume")
    run_dir = Path(resume) if resume else output_dir(c)
    if resume:
        c = resume_config(c, load_checkpoint(run_dir)["config"], run_dir, _cli_overrides())
    else:
        if (run_dir / CHECKPOINT).is_file():
            raise SearchConfigError(f"{run_dir} already holds a search; allowed: resume={run_dir} or a new out_dir")
        run_dir.mkdir(parents=True, exist_ok=True)
        import yaml

        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(c, sort_keys=False))
    _set_threads(c.get("threads"))
    parts = dict(components or {})
    space = parts.get("space") or build_space(c)
    evaluator = parts.get("evaluator") or build_evaluator(c, space, run_dir / "labels.db")
    backend = parts.get("backend") or build_backend(c)
    workload = parts.get("workload") or build_workload(c, backend)
    coevo = parts["coevolution"] if "coevolution" in parts else build_coevolution(c, space, run_dir)
    search = Search(c, run_dir, space, evaluator, backend, workload, coevo, progress=bool(c.get("progress", True)))
    if resume:
        search.load()
    summary = search.run(c.get("stop_after"))
    if summary["status"] != "complete":
        print(f"search {summary['status']} after generation {summary['generations_done']}; continue with: "
              f"forge-search resume={run_dir}", file=sys.stderr)
    return summary


def _cli_overrides() -> list[str] | None:
    """The command-line overrides of this Hydra job (None outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except ValueError:
        return None


def _select(d: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(d, dict) or part not in d:
            return "<unset>"
        d = d[part]
    return d


def resume_config(c: dict[str, Any], saved: dict[str, Any], run_dir: Path,
                  overrides: list[str] | None) -> dict[str, Any]:
    """The config to continue with: the run's own, plus the new runtime keys.

    From the command line only the keys given again are compared (`forge-search resume=DIR` alone works);
    called with a whole config (tests, scripts) every key is compared. A difference is refused, listed.
    """
    if overrides is None:
        check_same_config(saved, c, run_dir)
    else:
        keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
        keys = [k for k in keys if k.split(".")[0] not in (*RUNTIME_KEYS, "hydra")]
        diff = [k for k in keys if _select(saved, k) != _select(c, k)]
        if diff:
            raise ResumeError(f"resume={run_dir} refused: the config differs from the run's in {', '.join(diff)}; "
                              "resume with the same overrides (or start a new run)")
    return {**saved, **{k: c[k] for k in RUNTIME_KEYS if k in c}}


def _set_threads(n: Any) -> None:
    """Torch intra-op threads for the surrogate: batches of ~48 genomes are too small to gain from more
    than one thread, and on a shared 2-core machine extra threads mostly spin (20x slower measured)."""
    if n:
        import torch

        torch.set_num_threads(int(n))


def _brief(s: dict[str, Any]) -> dict[str, Any]:
    keys = ("status", "run_dir", "space", "backend", "algorithm", "seed", "generations_done", "evaluations",
            "archive_size", "hypervolume", "hypervolume_loss_params", "wall_s")
    out = {k: s[k] for k in keys if k in s}
    from search.export import chosen_design  # the knee's array shape, precisions and batch (where reported)

    return out | ({"chosen": chosen_design(s["run_dir"])} if s.get("run_dir") else {})


@hydra.main(config_path=CONFIG_PATH, config_name="forge-search", version_base="1.3")
def search_main(cfg: DictConfig) -> None:
    with user_errors("forge-search"):
        print(json.dumps(_brief(run(cfg)), indent=2))


@hydra.main(config_path=CONFIG_PATH, config_name="forge-report", version_base="1.3")
def report_main(cfg: DictConfig) -> None:
    from search.report import run as run_report

    with user_errors("forge-report"):
        print(json.dumps(run_report(cfg), indent=2))


@hydra.main(config_path=CONFIG_PATH, config_name="forge-export", version_base="1.3")
def export_main(cfg: DictConfig) -> None:
    from search.export import run as run_export

    with user_errors("forge-export"):
        print(json.dumps(run_export(cfg), indent=2))
