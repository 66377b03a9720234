"""Progress of a long command, n of m steps: a rich bar on a terminal, one plain line per step otherwise.

forge-verify, forge-label, the surrogate fits and the co-evolving searches train for minutes; each says what it
trains or measures, how many of how many, the time spent and the time left, so no command sits silent. On a
terminal the bar redraws in place; piped or logged (CI, `nohup`, a notebook's captured stream) each step is one
line on stderr, so a log shows the same story. Output goes to stderr: stdout stays the result (or `--json`).
"""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO


_ACTIVE: list["Steps"] = []  # the innermost running Steps: code deep below a command steps it (a fit's epochs)


def active() -> "Steps | None":
    return _ACTIVE[-1] if _ACTIVE else None


def clock(seconds: float) -> str:
    """3 s, 2 min 05 s, 1 h 02 min: a duration a reader takes in at a glance."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Steps:
    """`with Steps("forge-verify", "training", 8) as st: ... st.step("pick knee 1a2b3c4d")`.

    `tty=None` asks the stream; `enabled=False` prints nothing (the Python API, `--json` scripts)."""

    def __init__(self, app: str, what: str, total: int, enabled: bool = True, stream: TextIO | None = None,
                 tty: bool | None = None, lazy: bool = False, unit: str = "step"):
        """`lazy`: the opening line waits for the first step (a job refused on bad input then prints only
        its one error line). `unit`: what one step is (`epoch`: code deep below, a Lightning fit, steps it)."""
        self.app, self.what, self.total, self.enabled, self.lazy = app, what, max(int(total), 0), enabled, lazy
        self.unit = unit
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done, self.t0, self._bar, self._task = 0, time.perf_counter(), None, None

    def __enter__(self) -> "Steps":
        self.t0 = time.perf_counter()
        _ACTIVE.append(self)
        if not self.enabled:
            return self
        if self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn(f"[bold]{self.what}"), MofNCompleteColumn(), BarColumn(),
                                 TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                                 TextColumn("{task.description}"), console=Console(file=self.stream))
            self._bar.__enter__()
            self._task = self._bar.add_task("", total=self.total or None)  # 0: a count with no known end
        elif not self.lazy:
            self._opening()
        return self

    def _opening(self) -> None:
        self._line(f"{self.what}: 0/{self.total} to do" if self.total else f"{self.what}: started")

    def __exit__(self, *exc: Any) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def remaining(self) -> float | None:
        """Time left at the mean pace so far (None before the first step)."""
        return self.elapsed / self.done * (self.total - self.done) if self.done and self.total else None

    def step(self, note: str = "", n: int = 1) -> None:
        self.done = min(self.done + n, self.total) if self.total else self.done + n
        if not self.enabled:
            return
        from forge.disk.inert import inert

        note = inert(note)  # a genome or run name from a received file: shown, never sent to the terminal
        if self._bar is not None:
            from rich.markup import escape

            self._bar.update(self._task, completed=self.done, description=escape(note))
            return
        if self.lazy and self.done == n:
            self._opening()
        left = self.remaining()
        tail = f", ~{clock(left)} left" if left is not None and self.done < self.total else ""
        self._line(f"{self.what} {self.done}{f'/{self.total}' if self.total else ''}{f' ({note})' if note else ''}: "
                   f"{clock(self.elapsed)} elapsed{tail}")

    def _line(self, text: str) -> None:
        print(f"{self.app}: {text}", file=self.stream, flush=True)
