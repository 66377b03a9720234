"""A search space's grids: parsing the YAML forms of a per-layer grid, a global gene's values and the precision
lists, and printing a grid back compactly. Kept apart from `forge.spaces.space` (the space's class) so that module
holds the space and `forge.spaces.codec` its encoding; `forge.spaces.space` re-exports `make_grid`."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from forge.genomes.genes import GlobalGene, show
from forge.genomes.genome_checks import GenomeError, check_gene
from forge.genomes.precision import TENSORS, PrecisionError, parse_format


def make_grid(spec: Any, name: str, lo: int = 1) -> tuple[int, ...]:
    """`{start, stop, step}` (inclusive stop), a `[a, step, b]` triple string `"a:step:b"`, or explicit `values`."""
    if isinstance(spec, Mapping) and "values" in spec:
        vals = [int(v) for v in spec["values"]]
    elif isinstance(spec, Mapping):
        a, b, s = int(spec["start"]), int(spec["stop"]), int(spec.get("step", 1))
        vals = list(range(a, b + 1, s))
    elif isinstance(spec, str) and spec.count(":") == 2:
        a, s, b = (int(x) for x in spec.split(":"))
        vals = list(range(a, b + 1, s))
    elif isinstance(spec, Sequence):
        vals = [int(v) for v in spec]
    else:
        raise GenomeError(f"space.{name} = {spec!r} is invalid; allowed: {{start, stop, step}}, 'a:step:b' or a list")
    if not vals or any(v < lo for v in vals) or sorted(set(vals)) != vals:
        raise GenomeError(f"space.{name} = {vals!r} is invalid; allowed: a strictly increasing list of ints >= {lo}")
    return tuple(vals)



def fmt_grid(grid: Sequence[Any]) -> str:
    """Compact text of a grid: `64:32:512` when evenly spaced, else the list."""
    g = list(grid)
    if len(g) > 2 and all(type(x) is int for x in g) and len({b - a for a, b in zip(g, g[1:])}) == 1:
        return f"{g[0]}:{g[1] - g[0]}:{g[-1]}"
    return str(g)


def range_text(grid: Sequence[Any], kind: str, tie: str | None = None, ratio: Any = None) -> str:
    """How a per-layer gene ranges, as forge-space shows it: `same as n_h` for a tied gene, `false, true` for a
    bool one (its spelling), `2:1:4 x d_model` for a ratio of a global, else its grid (`16:8:64`)."""
    if tie:
        return f"same as {tie}"
    if ratio:
        return f"{fmt_grid(ratio[1])} x {ratio[0]}"
    return ", ".join(show(kind, v) for v in grid) if kind == "bool" else fmt_grid(grid)


class Grid(dict):
    """A hashable {tensor: formats} (the space is a frozen, hashable dataclass)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


def global_grid_values(gene: GlobalGene, spec: Any) -> tuple[Any, ...]:
    """A global gene's values in a space: one value (fixed), or a grid (ints: as `make_grid`) or a list of
    distinct choices / booleans, each checked as the genome checks it."""
    where = f"space.{gene.name}"
    if gene.kind == "int" and (isinstance(spec, (Mapping, list, tuple)) or (isinstance(spec, str) and ":" in spec)):
        return make_grid(spec, gene.name, gene.lo)
    vals = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    vals = [check_gene(gene, v, where) for v in vals]
    if not vals or len(set(vals)) != len(vals):
        raise GenomeError(f"{where} = {spec!r} is invalid; allowed: one value or a list of distinct values "
                          f"({gene.allowed()})")
    return tuple(vals)


def precision_grid(spec: Any) -> dict[str, tuple[str, ...]]:
    """{weights, acts, kv: [formats]} → normalized names; bad names raise a GenomeError listing valid ones."""
    if not isinstance(spec, Mapping) or set(spec) != set(TENSORS):
        raise GenomeError(f"space.precision = {spec!r} is invalid; allowed: a mapping with lists for {', '.join(TENSORS)}")
    out = {}
    for t in TENSORS:
        vals = [spec[t]] if isinstance(spec[t], str) else list(spec[t])
        try:
            names = [parse_format(v).name for v in vals]
        except PrecisionError as e:
            raise GenomeError(f"space.precision.{t}: {e}") from None
        if not names or len(set(names)) != len(names):
            raise GenomeError(f"space.precision.{t} = {vals!r} is invalid; allowed: a non-empty list of distinct formats")
        out[t] = tuple(names)
    return Grid(out)
