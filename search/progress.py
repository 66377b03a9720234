"""The rich progress display: generation, best objectives, archive size and hypervolume."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Column
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

SHORT = {"val_loss": "loss", "ttft_ms": "ttft", "tpot_ms": "tpot", "energy_per_token_uj": "E/tok"}


class SearchProgress:
    """A context manager; `update(search)` after each generation. Disabled = no output at all."""

    def __init__(self, generations: int, enabled: bool = True, console: Console | None = None):
        self.enabled, self.total = enabled, generations + 1  # generation 0 is the initial population
        # on a narrow terminal the text shrinks (cut with …), never "gen n/N" or the time
        whole = {"no_wrap": True, "overflow": "ignore"}
        self.bar = Progress(TextColumn("[bold]gen", table_column=Column(**whole)),
                            MofNCompleteColumn(table_column=Column(**whole, min_width=2 * len(str(self.total)) + 1)),
                            BarColumn(bar_width=20), TimeElapsedColumn(table_column=Column(**whole, min_width=7)),
                            TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True,
                                                                                  overflow="ellipsis")),
                            console=console or Console(stderr=True), disable=not enabled, transient=False,
                            expand=True)
        self.task = None

    def __enter__(self) -> "SearchProgress":
        self.bar.__enter__()
        self.task = self.bar.add_task("", total=self.total)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def update(self, search: Any) -> None:
        if not self.enabled or not search.history:
            return
        h = search.history[-1]
        best = " ".join(f"{SHORT.get(k, k)}={v:.3g}" for k, v in h["best"].items() if v is not None)
        text = f"archive {h['archive_size']}  HV {h['hv']:.4f}  best {best}"
        self.bar.update(self.task, completed=h["generation"] + 1, description=text)

    def note(self, text: str) -> None:
        """What a long step inside a generation is doing (co-evolution's trainings): the bar's text on a
        terminal, a line on stderr otherwise."""
        if not self.enabled:
            return
        if self.bar.console.is_terminal:
            self.bar.update(self.task, description=text)
        else:
            self.bar.console.print(f"forge-search: {text}", highlight=False, soft_wrap=True)
