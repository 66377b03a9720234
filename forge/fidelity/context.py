"""What a stopping rule decides on (`Context`) and the one error of a bad rule option; kept apart so every
rule module (stopping, moasha) imports them without importing each other."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from forge.errors import ForgeError


class StopError(ForgeError):
    """A stopping-rule option or curve model outside its allowed values."""


@dataclass
class Context:
    """What a rule knows when it decides: the candidate's exact costs and prior, the front to beat, and the
    other trainings' curves (peers: id -> (costs, rung losses so far, final loss or None))."""

    costs: Sequence[float]
    prior: float | None = None
    front: list[tuple[str, Sequence[float], float]] = field(default_factory=list)
    peers: dict[str, tuple[Sequence[float], list[float], float | None]] = field(default_factory=dict)
    gid: str = ""

    def members(self) -> list[tuple[str, Sequence[float], float]]:
        """The front given plus every peer that finished (its final loss is a real label)."""
        done = [(g, c, f) for g, (c, _, f) in self.peers.items() if f is not None and math.isfinite(f)]
        return [*self.front, *done]
