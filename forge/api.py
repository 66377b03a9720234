"""The Python API: `forge.search`, `forge.cost`, `forge.predict` for notebooks and scripts.

It is the CLIs with Python arguments: every call composes the same Hydra config the command line composes
(`hydra.compose` on conf/forge-<app>.yaml) and calls the same `run(cfg)`, so a call and its command write
the same files. This module is the one façade above every package (tests/test_structure.py lets it import
search, backends and surrogate); `import forge` stays light because `forge/__init__` loads it on first use.

    import forge
    res = forge.search(space="iha-tiny", backend="roofline", objectives=["val_loss", "ttft_ms", "params"],
                       search={"generations": 3}, out_dir="runs/demo")
    res.front            # pandas DataFrame: one row per Pareto member, metrics and loss interval as columns
    res.export(select="knee", out="exported/")

Results come back as pandas DataFrames (`pip install "forge-nas[api]"`).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from forge.config import CONFIG_PATH, UserError
from forge.genome import Genome

GROUPS = ("space", "search", "backend", "workload", "protocol", "corpus", "dispatch", "experiment", "hardware",
          "logger")


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise UserError("the Python API returns pandas DataFrames and pandas is not installed; allowed: "
                        "pip install 'forge-nas[api]' (or pip install pandas)") from None
    return pandas


def compose(app: str, overrides: Sequence[str] = (), **values: Any) -> Any:
    """conf/<app>.yaml composed as its CLI would: a string for a config group (`backend="gemmini"`) is a
    group choice; any other value (lists, numbers, mappings such as `search={"generations": 3}`) is merged
    into the composed config, except a mapping with `_target_`, which replaces the node (a plug-in).
    `overrides` are command-line overrides, passed through unchanged."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import OmegaConf, open_dict

    from forge.shadow import check

    check()  # a `search/` or `backends/` folder beside the user's script would be imported instead of Forge's

    groups = [f"{k}={v}" for k, v in values.items() if k in GROUPS and isinstance(v, str)]
    with initialize_config_module(config_module=CONFIG_PATH.removeprefix("pkg://"), version_base="1.3"):
        cfg = hydra_compose(app, overrides=[*groups, *overrides])
    with open_dict(cfg):
        for k, v in values.items():
            if v is not None and not (k in GROUPS and isinstance(v, str)):
                OmegaConf.update(cfg, k, v, merge=isinstance(v, Mapping) and "_target_" not in v)
    return cfg


# ------------------------------------------------------------------------------------------ frames
def rows_frame(rows: Iterable[Mapping[str, Any]]) -> Any:
    """JSONL rows (pareto.jsonl / archive.jsonl) → a DataFrame: `metrics` spread into columns (strings
    "inf"/"nan" as floats), the design's keys as `design.<key>`, the genome kept as a dict column."""
    from forge.io import as_float

    flat = []
    for r in rows:
        out = {k: v for k, v in r.items() if k not in ("metrics", "design")}
        out.update({k: as_float(v) for k, v in (r.get("metrics") or {}).items()})
        out.update({f"design.{k}": v for k, v in (r.get("design") or {}).items()})
        flat.append(out)
    return _pandas().DataFrame(flat)


@dataclass
class SearchResult:
    """One finished (or stopped) search: its summary, folder, front and archive, and the next steps."""

    run_dir: Path
    summary: dict[str, Any] = field(repr=False)

    @property
    def front(self) -> Any:
        """The Pareto front (pareto.jsonl), lowest predicted loss first; loss_lo / loss_hi are its interval."""
        from search.console import front_rows

        return rows_frame(front_rows(self.run_dir))

    @property
    def archive(self) -> Any:
        """Every evaluated genome (archive.jsonl) with its generation and surrogate version."""
        from search.state import read_jsonl

        return rows_frame(read_jsonl(self.run_dir / "archive.jsonl"))

    def genomes(self, which: str = "front") -> list[Genome]:
        """The front's (or, with which="archive", every evaluated) genomes, in the frame's order."""
        from forge.genome import genome_from_dict

        frame = self.front if which == "front" else self.archive
        return [genome_from_dict(g) for g in frame["genome"]]

    @property
    def hypervolume(self) -> float:
        return float(self.summary["hypervolume"])

    def export(self, select: str = "knee", format: str = "safetensors", out: str | Path | None = None,
               **values: Any) -> dict[str, Any]:
        """`forge-export run=<this run> select=... format=... out=...`; out defaults to <run>/exported."""
        from search.export import run

        out = out or self.run_dir / "exported"
        return run(compose("forge-export", run=str(self.run_dir), select=select, format=format, out=str(out),
                           **values))

    def verify(self, **values: Any) -> dict[str, Any]:
        """`forge-verify run=<this run> ...`: trains the front's picks and a random control (slow: real training)."""
        from search.verify import run

        return run(compose("forge-verify", run=str(self.run_dir), **{"progress": False, **values}))

    def plot(self, out: str | Path | None = None) -> dict[str, Any]:
        """`forge-report runs=[<this run>]`: the PNGs and report.html, in `out` (default <run>/report)."""
        from search.report import run

        return run(compose("forge-report", runs=[str(self.run_dir)], out=str(out or self.run_dir / "report"),
                           allow_partial=self.summary.get("status") != "complete"))


# ------------------------------------------------------------------------------------------ calls
def search(space: str | Mapping[str, Any] | None = None, backend: str | Mapping[str, Any] | None = None,
           objectives: Sequence[Any] | None = None, constraints: Sequence[str] | None = None,
           out_dir: str | Path | None = None, overrides: Sequence[str] = (), **values: Any) -> SearchResult:
    """Run `forge-search` with these choices; unnamed settings keep the CLI's defaults.

    `values` are any other keys of conf/forge-search.yaml (`seed=1`, `search={"generations": 5}`,
    `evaluator={"predictor": "forgeformer-iha-tiny"}`, `workload="agentic-90k"`); `overrides` are
    command-line strings (`["search.pop_size=8"]`). The run folder is `out_dir` (default
    outputs/search/<time>, as the CLI's); the progress bar is off unless `progress=True`."""
    from search.cli import run

    out = Path(out_dir) if out_dir else Path("outputs/search") / time.strftime("%Y-%m-%d_%H-%M-%S")
    cfg = compose("forge-search", overrides, space=space, backend=backend, objectives=_list(objectives),
                  constraints=_list(constraints), out_dir=str(out), **{"progress": False, **values})
    summary = run(cfg)
    return SearchResult(Path(summary["run_dir"]), summary)


def load(run_dir: str | Path) -> SearchResult:
    """A SearchResult for an existing run folder (its summary.json)."""
    p = Path(run_dir) / "summary.json"
    if not p.is_file():
        raise UserError(f"{run_dir}: no summary.json; allowed: a forge-search run folder")
    return SearchResult(Path(run_dir), json.loads(p.read_text()))


def genomes_of(items: Genome | str | Path | Sequence[Genome | str | Path]) -> list[Genome]:
    """Genomes, genome files, or names from data/archs (as `forge-hw arch=` takes them)."""
    from forge.cli import resolve_arch

    seq = [items] if isinstance(items, (Genome, str, Path)) else list(items)
    return [g if isinstance(g, Genome) else resolve_arch(str(g)) for g in seq]


def cost(genomes: Any, backend: str | Mapping[str, Any] = "roofline", workload: str | Mapping[str, Any] | None = None,
         overrides: Sequence[str] = (), **values: Any) -> Any:
    """Hardware cost of genomes on a backend, built as the search builds it: one row per genome with
    ttft_ms, tpot_ms, energy_per_token_uj, feasible, reason and the backend's numeric extras."""
    from search.components import build_backend, build_workload

    gs = genomes_of(genomes)
    c = _container(compose("forge-search", overrides, backend=backend, workload=workload, **values))
    be = build_backend(c)
    table = be.evaluate(gs, build_workload(c, be))
    rows = []
    for i, g in enumerate(gs):
        ex = table.extras[i] if table.extras else {}
        rows.append({"id": g.id, "name": g.name, **table.row(i), "feasible": bool(table.feasible[i]),
                     "reason": table.reason[i], **{k: v for k, v in ex.items() if _is_num(v)}})
    return _pandas().DataFrame(rows)


def predict(genomes: Any, predictor: str | Mapping[str, Any] = "forgeformer-iha-paper", n_mc: int = 0,
            level: float = 0.9, seed: int = 0) -> Any:
    """Predicted loss of genomes, as the search's evaluator computes it: one row per genome with mu, sigma
    (n_mc MC-dropout passes; 0 = deterministic) and the calibrated interval loss_lo / loss_hi at `level`."""
    from search.components import load_surrogate
    from search.problem import LossEvaluator

    gs = genomes_of(genomes)
    ev = LossEvaluator(load_surrogate(predictor, None), n_mc=n_mc, seed=seed, level=level)
    _, mu, sigma = ev(gs)
    lo, hi = ev.interval(mu, sigma)
    return _pandas().DataFrame({"id": [g.id for g in gs], "name": [g.name for g in gs], "mu": mu, "sigma": sigma,
                                "loss_lo": lo, "loss_hi": hi})


def _list(x: Sequence[Any] | None) -> list[Any] | None:
    return None if x is None else list(x)


def _container(cfg: Any) -> dict[str, Any]:
    from forge.config import to_container

    return to_container(cfg)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
