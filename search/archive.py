"""The Pareto archive of Algorithm 3 and the hypervolume used to compare searches.

The archive keeps every feasible, non-dominated genome seen in any generation (LLMForge Algorithm 3,
line 16: UPDATEPARETOSET over the feasible parent+offspring pool). Objective vectors are the ones
the search minimized when the genome was evaluated (under co-evolution, the surrogate of that time).

Hypervolume (documented, fixed normalization): each objective is divided by its value on a fixed
*anchor* genome evaluated by the same evaluator and backend, and the reference point is
`hv.ref` (default 2.0) in every normalized objective, i.e. "twice as bad as the anchor". The anchor
defaults to a GPT-2-style uniform stack that lies in both the IHA and the GQA space (see
`default_anchor`), so NSGA vs random vs GQA runs of one substrate share one scale. Our values are
therefore not the paper's numbers (Figure 7 uses an undocumented normalization).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
from pymoo.indicators.hv import HV
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from forge.errors import UserError
from forge.genomes.genome import Genome, LayerGene
from forge.disk.io import as_float
from forge.numeric import round_float
from forge.spaces.space import SearchSpace


def non_dominated(F: np.ndarray) -> np.ndarray:
    """Indices of the first front of F (minimization)."""
    if len(F) == 0:
        return np.zeros(0, dtype=int)
    return np.asarray(NonDominatedSorting().do(np.asarray(F, float), only_non_dominated_front=True), dtype=int)


@dataclass
class ParetoArchive:
    """Feasible non-dominated entries: {'id', 'genome', 'metrics', 'generation', ...} plus their F rows."""

    objectives: list[str]
    signs: Any = None  # +1 minimized, -1 maximized (F holds sign × value)
    entries: list[dict[str, Any]] = field(default_factory=list)
    F: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.signs = np.ones(len(self.objectives)) if self.signs is None else np.asarray(self.signs, float)
        if self.F is None:
            self.F = np.zeros((0, len(self.objectives)))

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def ids(self) -> set[str]:
        return {e["id"] for e in self.entries}

    def update(self, entries: Sequence[dict[str, Any]], F: np.ndarray) -> int:
        """Merge feasible candidates (first occurrence of each new id) and keep the first front; returns #added."""
        if not len(entries):  # a generation with no feasible candidate (a tight constraint, a small population)
            return 0
        have, new, rows = self.ids, [], []
        for e, f in zip(entries, np.asarray(F, float).reshape(len(entries), len(self.objectives))):
            if e["id"] not in have and np.all(np.isfinite(f)):
                have.add(e["id"])
                new.append(e)
                rows.append(f)
        if not new:
            return 0
        allF = np.vstack([self.F, np.array(rows)])
        allE = self.entries + new
        keep = np.sort(non_dominated(allF))
        self.entries, self.F = [allE[i] for i in keep], allF[keep]
        old = len(allE) - len(new)
        return int((keep >= old).sum())

    def to_rows(self) -> list[dict[str, Any]]:
        return [dict(e) for e in self.entries]

    @classmethod
    def from_rows(cls, objectives: list[str], rows: Sequence[dict[str, Any]], signs: Any = None) -> "ParetoArchive":
        F = np.array([[as_float(r["metrics"][o]) for o in objectives] for r in rows], dtype=float)
        F = F.reshape(len(rows), len(objectives)) * (1.0 if signs is None else np.asarray(signs, float))
        return cls(list(objectives), signs, [dict(r) for r in rows], F)


def least_violating(ids: Sequence[str], cv: Any, records: dict[str, dict[str, Any]],
                    violations: Callable[[dict[str, Any]], dict[str, float]], k: int = 5) -> list[dict[str, Any]]:
    """When no genome met the constraints: the k population members with the smallest total violation (pymoo's
    CV, what constraint dominance ranks by), each with by how much it misses each constraint."""
    cv = np.asarray(cv, float).reshape(-1)
    out: list[dict[str, Any]] = []
    for j in np.argsort(cv, kind="stable"):
        rec = records.get(ids[j])
        if rec is None or any(r["id"] == ids[j] for r in out):
            continue
        out.append({"id": ids[j], "violation": float(cv[j]), "violated": violations(rec), "metrics": rec["metrics"]})
        if len(out) == k:
            break
    return out


class Anchor(NamedTuple):
    """The hypervolume anchor: its genome, and its codec row (encoded once, with the space it belongs to)."""

    genome: Genome
    x: np.ndarray


def default_anchor(space: SearchSpace) -> Genome:
    """GPT-2-style uniform stack: round(0.3·L_max) layers, 64-wide heads, n_kv = n_h, d_mlp ≈ 4·d_model.

    On iha-paper/gqa-paper this is GPT-2 small (12 layers, 12 heads of 64, d_mlp 3072), valid in both. A searched
    global takes its least value (a choice: the registry's first), so the anchor never depends on a grid's order.
    """
    glob = anchor_globals(space)
    d = int(glob.get("d_model", space.d_model))
    heads = [h for h in space.n_h if d % h == 0] or list(space.n_h)
    n_h = min(heads, key=lambda h: (abs(h - max(1, d // 64)), h))  # the head count nearest 64-wide heads
    n_kv = max(k for k in space.n_kv if n_h % k == 0 and k <= n_h)
    gene = LayerGene(n_h=n_h, n_kv=n_kv, d_qk=space.nearest("d_qk", d // n_h), d_v=space.nearest("d_v", d // n_h),
                     d_mlp=space.nearest("d_mlp", 4 * d))
    n = max(1, round(0.3 * space.L_max))
    return space.repair(space.genome([gene] * n, name="hv-anchor", **glob))


def anchor_globals(space: SearchSpace) -> dict[str, Any]:
    """Each searched global gene at its least value: the smallest int, False, or the first of its registry choices."""
    from forge.genomes.genes import GLOBAL_GENES

    out = {}
    for k in space.searched_globals:
        gene = GLOBAL_GENES[k]
        out[k] = min(space.global_grid(k), key=lambda v: gene.choices.index(v) if gene.kind == "choice" else v)
    return out


@dataclass
class Hypervolume:
    """HV of F / anchor with reference point `ref` in every normalized objective (pymoo's indicator), rounded to
    `forge.numeric.DIGITS` significant digits.

    A maximized objective (sign −1, F = −value) is normalized as anchor / value, so it too is 1 at the
    anchor and `ref` means "`ref` times worse than the anchor"."""

    anchor: np.ndarray
    ref: float = 2.0
    signs: Any = None

    def __post_init__(self) -> None:
        self.anchor = np.asarray(self.anchor, float)
        self.maxi = np.asarray(self.signs if self.signs is not None else np.ones(len(self.anchor))) < 0
        if not np.all(np.isfinite(self.anchor)) or np.any(self.anchor <= 0):
            raise UserError(f"hypervolume anchor values {self.anchor.tolist()} must be finite and > 0; "
                            "allowed: give them yourself, +hv.anchor_values.<objective>=<value> (e.g. "
                            "+hv.anchor_values.val_loss=3.0), or another anchor genome (hv.anchor=...)")
        self._hv = HV(ref_point=np.full(len(self.anchor), float(self.ref)))

    def __call__(self, F: np.ndarray) -> float:
        F = np.asarray(F, float).reshape(-1, len(self.anchor))
        F = F[np.all(np.isfinite(F), axis=1)]
        if self.maxi.any():
            with np.errstate(divide="ignore"):
                F = np.where(self.maxi, self.anchor / np.where(-F > 0, -F, 0.0), F)
            F = F[np.all(np.isfinite(F), axis=1)]
        F = F / np.where(self.maxi, 1.0, self.anchor)
        if len(F) == 0:
            return 0.0
        return round_float(float(self._hv(F)))  # fixed digits: the same text in history/summary on any machine
