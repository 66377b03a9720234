"""What the Python API hands back: `SearchResult` (one run folder, its front and archive as DataFrames, and its
next steps: export, verify, plot) and the JSONL-rows-to-DataFrame conversion. Kept apart from search/api.py,
which composes configs and runs the commands: this side only reads a finished run and offers the follow-ups,
each composing its command through search/api_compose.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from forge.errors import UserError
from forge.genomes.genome import Genome
from search.api_args import api_errors, check_choice
from search.api_compose import compose
from forge.disk import run_folder


def pandas_or_refuse() -> Any:
    """pandas, or the one-line refusal naming how to install it (the API's frames need it)."""
    try:
        import pandas
    except ImportError:
        raise UserError("the Python API returns pandas DataFrames and pandas is not installed; allowed: "
                        "pip install -e '.[api]' in the Forge clone (or pip install pandas)") from None
    return pandas


def rows_frame(rows: Iterable[Mapping[str, Any]]) -> Any:
    """JSONL rows (pareto.jsonl / archive.jsonl) → a DataFrame: `metrics` spread into columns (strings
    "inf"/"nan" as floats), the design's keys as `design.<key>`, the genome kept as a dict column."""
    from forge.disk.io import as_float

    flat = []
    for r in rows:
        out = {k: v for k, v in r.items() if k not in ("metrics", "design")}
        out.update({k: as_float(v) for k, v in (r.get("metrics") or {}).items()})
        out.update({f"design.{k}": v for k, v in (r.get("design") or {}).items()})
        flat.append(out)
    return pandas_or_refuse().DataFrame(flat)


@dataclass
class SearchResult:
    """One finished (or stopped) search: its summary, folder, front and archive, and the next steps."""

    run_dir: Path
    summary: dict[str, Any] = field(repr=False)
    parts: dict[str, Any] = field(default_factory=dict, repr=False)  # the Python objects it was made with

    @property
    def front(self) -> Any:
        """The Pareto front (pareto.jsonl), lowest predicted loss first; loss_lo / loss_hi are its interval."""
        from search.console import front_rows

        return rows_frame(front_rows(self.run_dir))

    @property
    def archive(self) -> Any:
        """Every evaluated genome (archive.jsonl) with its generation and surrogate version."""
        from search.state import read_jsonl

        return rows_frame(read_jsonl(self.run_dir / run_folder.ARCHIVE))

    def genomes(self, which: str = "front") -> list[Genome]:
        """The front's (or, with which="archive", every evaluated) genomes, in the frame's order."""
        from forge.genomes.genome import genome_from_dict

        frame = self.front if check_choice("which", which, ("front", "archive")) == "front" else self.archive
        return [genome_from_dict(g) for g in frame["genome"]]

    @property
    def hypervolume(self) -> float:
        return float(self.summary["hypervolume"])

    @api_errors
    def export(self, select: str = "knee", format: str = "safetensors", out: str | Path | None = None,
               **values: Any) -> dict[str, Any]:
        """`forge-export run=<this run> select=... format=... out=...`; out defaults to <run>/exported."""
        from search.export import run

        out = out or self.run_dir / "exported"
        return run(compose("forge-export", run=str(self.run_dir), select=select, format=format, out=str(out),
                           **{"progress": False, **values}))

    @api_errors
    def verify(self, **values: Any) -> dict[str, Any]:
        """`forge-verify run=<this run> ...`: trains the front's picks and a random control (slow: real training);
        the run's own space and surrogate objects are handed again (no command could rebuild some of them)."""
        from search.verify import run

        own = {k: v for k, v in self.parts.items() if k in ("space", "predictor")}
        return run(compose("forge-verify", run=str(self.run_dir), **{"progress": False, **values}), own)

    @api_errors
    def plot(self, out: str | Path | None = None) -> dict[str, Any]:
        """`forge-report runs=[<this run>]`: the PNGs and report.html, in `out` (default <run>/report)."""
        from search.report import run

        return run(compose("forge-report", runs=[str(self.run_dir)], out=str(out or self.run_dir / "report"),
                           allow_partial=self.summary.get("status") != "complete"))
