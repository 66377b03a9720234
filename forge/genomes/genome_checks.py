"""A genome field's value checked against its domain: one `GenomeError` line naming field, value and what is allowed.

forge.genomes.genome validates every gene through these; forge.spaces.grids checks a grid's values with `check_gene`.
`from forge.genomes.genome import GenomeError` keeps working.
"""
from __future__ import annotations

import operator
from typing import Any

from forge.errors import ForgeError
from forge.genomes.genes import GLOBAL_GENES, LAYER_GENES, Gene, GlobalGene


class GenomeError(ForgeError):
    """A genome field holds a value outside its domain; the message names field, value and domain."""


GENE_HINT = ", or a gene your plug-in module registers (name it: plugins.modules=[mypkg.genes])"  # unknown key


def in_python(err: GenomeError, modules: list[str] | None = None) -> GenomeError:
    """`err` as said to a Python caller (search.export.load_exported): the unknown-gene hint names the Python call
    that imports a plug-in module, with `modules` (the ones the genome's run recorded) where known."""
    call = f"forge.plugins.load_modules({modules or ['mypkg.genes']!r})"
    return GenomeError(str(err).replace(GENE_HINT, f", or a gene your plug-in module registers (import it first: "
                                                   f"{call})"))


def fail(where: str, value: Any, allowed: str) -> GenomeError:
    return GenomeError(f"{where} = {value!r} is invalid; allowed: {allowed}")


def check_int(where: str, value: Any, lo: int = 1) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        if isinstance(value, bool):
            raise TypeError
        iv = operator.index(value)
    except TypeError:
        raise fail(where, value, f"an integer >= {lo}") from None
    if iv < lo:
        raise fail(where, iv, f"an integer >= {lo}")
    return iv


def check_bool(where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise fail(where, value, "true/false (or 0/1)")


def check_choice(where: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise fail(where, value, " | ".join(choices))
    return value


def check_gene(gene: Gene | GlobalGene, value: Any, where: str = "") -> Any:
    where = where or f"layer.{gene.name}"
    if gene.kind == "choice":
        return check_choice(where, value, gene.choices)
    return check_bool(where, value) if gene.kind == "bool" else check_int(where, value, gene.lo)


def check_globals(extra: Any) -> tuple[tuple[str, Any], ...]:
    """Registered global genes beyond the nine, validated, sorted, those at their default dropped."""
    out = []
    for k, v in (extra.items() if isinstance(extra, dict) else dict(extra).items()):
        gene = GLOBAL_GENES.get(k)
        if gene is None or gene.builtin:
            raise fail(k, v, "keys " + ", ".join(sorted({*GLOBAL_GENES, "name", "layers", "precision"})) + GENE_HINT)
        v = check_gene(gene, v, k)
        if v != gene.default:
            out.append((k, v))
    return tuple(sorted(out))


def check_extra(extra: Any) -> tuple[tuple[str, int], ...]:
    items = dict(extra).items() if not isinstance(extra, dict) else extra.items()
    out = []
    for k, v in items:
        gene = LAYER_GENES.get(k)
        if gene is None or gene.builtin:
            raise fail(f"layer.{k}", v, "a registered gene: " + ", ".join(LAYER_GENES))
        v = check_gene(gene, v)
        if v != gene.default:
            out.append((k, v))
    return tuple(sorted(out))
