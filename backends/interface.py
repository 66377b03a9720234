"""The one interface every cost backend implements, and the workload it is evaluated under.

`Backend.evaluate(genomes, workload) -> CostTable` costs a whole population at once. A genome that
cannot run on the substrate (it does not fit memory, say) gets infinite costs, `feasible = False`
and a reason; evaluate never raises for such a genome inside a search.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

from forge.errors import ForgeError
from forge.genomes.genome import Genome
from forge.genomes.precision import PrecisionError, parse_format
from forge.lm.workload import Precision

FORMAT_KEYS = ("weight_format", "act_format", "kv_format")
ALLOWED_BITS = (4, 6, 8, 16, 32)

if TYPE_CHECKING:
    from forge.spaces.arrays import PopArrays


class BackendError(ForgeError):
    """Bad backend input (unknown template, preset or workload); the message lists what is allowed."""


@dataclass(frozen=True)
class Workload:
    """Prefill L_p prompt tokens, then L_d decode steps with a growing KV cache, at a batch size.

    Precisions are bits per element of weights, activations and the KV cache (bf16 on GPUs,
    int8 on the accelerators; set per backend in conf/workload or on the command line). A format
    name (`weight_format=mxint4`, forge.genomes.precision) overrides the bits: its bytes count the MX shared
    scale, and its element bits replace `*_bits`. A genome's own precision genes override both.

    `batch: max` asks the backend for the largest batch whose weights plus KV cache fit its memory,
    per genome (`forge.lm.workload.max_batch`); only backends with `supports_batch_max` accept it.
    """

    prefill: int = 256
    decode: int = 256
    batch: int | str = 1
    weight_bits: int = 16
    act_bits: int = 16
    kv_bits: int = 16
    weight_format: str | None = None
    act_format: str | None = None
    kv_format: str | None = None

    def __post_init__(self) -> None:
        for k in ("prefill", "decode", "batch"):
            v = getattr(self, k)
            if k == "batch" and v == "max":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                more = " (batch also: max)" if k == "batch" else ""
                raise BackendError(f"workload.{k} = {v!r} is invalid; allowed: a positive integer{more}")
        for k in FORMAT_KEYS:
            if getattr(self, k) is not None:
                try:
                    f = parse_format(getattr(self, k))
                except PrecisionError as e:
                    raise BackendError(f"workload.{k}: {e}") from None
                object.__setattr__(self, k, f.name)
                object.__setattr__(self, k.replace("_format", "_bits"), f.bits)
        for k in ("weight_bits", "act_bits", "kv_bits"):
            if getattr(self, k) not in ALLOWED_BITS:
                raise BackendError(f"workload.{k} = {getattr(self, k)!r} is invalid; allowed: "
                                   f"{', '.join(map(str, ALLOWED_BITS))}")

    @property
    def batch_max(self) -> bool:
        return self.batch == "max"

    @property
    def precision(self) -> Precision:
        bits = Precision.from_bits(self.weight_bits, self.act_bits, self.kv_bits)
        own = [parse_format(f).bytes if f else b for f, b in zip(
            (self.weight_format, self.act_format, self.kv_format), (bits.weight_bytes, bits.act_bytes, bits.kv_bytes))]
        return Precision(*own)

    @classmethod
    def from_config(cls, cfg: Any) -> "Workload":
        d = {k: v for k, v in dict(cfg).items() if not str(k).startswith("_")}
        keys = ("prefill", "decode", "batch", "weight_bits", "act_bits", "kv_bits", *FORMAT_KEYS)
        unknown = set(d) - {*keys, "name"}
        if unknown:
            raise BackendError(f"workload.{sorted(unknown)[0]} is unknown; allowed: {', '.join(keys)}")
        d.pop("name", None)
        return cls(**d)


@dataclass
class CostTable:
    """One row per genome. Infeasible rows hold inf costs and a non-empty reason."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    energy_per_token_uj: np.ndarray
    feasible: np.ndarray
    reason: list[str]
    extras: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ttft_ms)

    def row(self, i: int) -> dict[str, Any]:
        return {"ttft_ms": float(self.ttft_ms[i]), "tpot_ms": float(self.tpot_ms[i]),
                "energy_per_token_uj": float(self.energy_per_token_uj[i]), "feasible": bool(self.feasible[i]),
                "reason": self.reason[i], **(self.extras[i] if self.extras else {})}

    def objective(self, name: str) -> np.ndarray:
        """A named column: a core metric or a numeric backend extra (inf where missing or infeasible)."""
        if name in ("ttft_ms", "tpot_ms", "energy_per_token_uj"):
            return np.asarray(getattr(self, name), dtype=float)
        vals = np.array([float(e.get(name, np.inf)) if e else np.inf for e in self.extras] or [np.inf] * len(self))
        return np.where(self.feasible, vals, np.inf)

    @classmethod
    def infeasible(cls, n: int, reason: str) -> "CostTable":
        inf = np.full(n, np.inf)
        return cls(inf, inf.copy(), inf.copy(), np.zeros(n, bool), [reason] * n, [{} for _ in range(n)])


class Backend(Protocol):
    """A cost model of one substrate."""

    name: str

    def evaluate(self, genomes: Sequence[Genome], workload: Workload) -> CostTable: ...


def evaluated(backend: Any, genomes: Any, workload: Workload, n: int) -> CostTable:
    """`backend.evaluate(genomes, workload)`, checked to be a CostTable of `n` rows: a user's `_target_` backend
    that returns anything else is refused in one line naming its class, not an AttributeError later."""
    table = backend.evaluate(genomes, workload)
    if isinstance(table, CostTable) and len(table) == n:
        return table
    got = f"{len(table)} rows" if isinstance(table, CostTable) else f"a {type(table).__name__}"
    raise BackendError(f"backend: {type(backend).__name__}.evaluate returned {got}; allowed: a "
                       f"backends.interface.CostTable with one row per genome ({n})")


def as_population(genomes: Any) -> "PopArrays":
    """A list of Genomes or an already-built PopArrays (the fast path) → PopArrays."""
    from forge.spaces.arrays import PopArrays

    if isinstance(genomes, PopArrays):
        return genomes
    if isinstance(getattr(genomes, "arrays", None), PopArrays):  # forge.spaces.arrays.GenomeBatch from the search
        return genomes.arrays
    genomes = list(genomes)
    if not genomes:
        raise BackendError("evaluate() got an empty population; allowed: a non-empty list of Genomes or a PopArrays")
    return PopArrays.from_genomes(genomes)
