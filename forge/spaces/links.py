"""Gene links a space yaml may declare instead of writing code: a ratio gene and a tied gene.

    d_mlp: {ratio: [2, 3, 4], of: d_model}   # a per-layer width as a ratio of a global: d_mlp = r * d_model
    n_kv: {same_as: n_h}                     # tied genes: every layer's n_kv equals its n_h (multi-head attention)
    d_v: {same_as: d_qk}

A ratio of a fixed global resolves, when the space is built, to the grid of its values (r * the global's value,
integers only). A ratio of a searched global (`d_model: [128, 192]`) follows each genome's value: the gene's codec
column is an index into the ratios, decoded as r * that genome's d_model; the genome stores the product (the
model, the workload and the id see a plain width, so a genome's id does not depend on how the space spells it),
and the space's grid of the gene is every product (what any genome may hold). Every product must be an integer.
A tied gene takes its source's grid and, in every genome the space makes or repairs, its source's value (its
codec column copies the source's grid index). The space records its ties (`links: {n_kv: n_h}`) and writes a
following ratio back as written, so a space written to a config (`forge.spaces.space.space_config`) keeps both.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from forge.genomes.genes import GLOBAL_GENES
from forge.genomes.genome import GenomeError
from forge.spaces.grids import global_grid_values

Rule = tuple[str, tuple[float, ...]]  # a gene that follows a searched global: (the global, its ratios)


def resolve(specs: dict[str, Any], globals_: Mapping[str, Any],
            given: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, Rule]]:
    """Rewrite ratio and tied specs in `specs` (gene -> a space yaml's grid spec) into plain grids, in place;
    return the ties {gene: source}, those already recorded (`given`) included, and the genes that follow a
    searched global {gene: (global, ratios)} (a gene tied to one follows it too)."""
    follow = {}
    for name, spec in specs.items():
        if isinstance(spec, Mapping) and "ratio" in spec:
            specs[name], rule = ratio_grid(name, spec, globals_)
            follow.update({name: rule} if rule else {})
    ties = dict(given or {})
    for name, spec in list(specs.items()):
        if isinstance(spec, Mapping) and "same_as" in spec:
            src = str(spec["same_as"])
            if src not in specs or src == name or isinstance(specs[src], Mapping) and "same_as" in specs[src]:
                raise GenomeError(f"space.{name}.same_as = {src!r} is invalid; allowed: another gene with a grid "
                                  f"({', '.join(k for k in specs if k != name)})")
            specs[name], ties[name] = specs[src], src
    follow.update({name: follow[src] for name, src in ties.items() if src in follow})
    return ties, follow


def ratio_grid(name: str, spec: Mapping[str, Any], globals_: Mapping[str, Any]) -> tuple[list[int], Rule | None]:
    """Every product r * v of a ratio r and a value v of the global (integers only), and the rule the codec
    follows when the global is searched (None when it is fixed: the products are then a plain grid)."""
    of = str(spec.get("of", "d_model"))
    gene = GLOBAL_GENES.get(of)
    if gene is None or gene.kind != "int":
        raise GenomeError(f"space.{name}.of = {of!r} is invalid; allowed: an integer global gene, fixed or searched "
                          f"({', '.join(k for k, g in GLOBAL_GENES.items() if g.kind == 'int')})")
    bases = global_grid_values(gene, globals_.get(of, gene.default))
    given = spec["ratio"] if isinstance(spec["ratio"], (list, tuple)) else [spec["ratio"]]
    try:
        ratios = tuple(sorted({int(r) if float(r).is_integer() else float(r) for r in given}))
    except (TypeError, ValueError):
        ratios = ()
    for base in bases:
        vals = [r * base for r in ratios]
        if not vals or any(v <= 0 or abs(v - round(v)) > 1e-9 for v in vals):
            raise GenomeError(f"space.{name}.ratio = {list(given)} is invalid with {of} = {base}; allowed: numbers "
                              "whose products with every value of it are positive integers")
    products = sorted({int(round(r * b)) for r in ratios for b in bases})
    return products, ((of, ratios) if len(bases) > 1 else None)


def products(rule: Rule, base: Any) -> tuple[int, ...]:
    """The values a following gene may take in a genome whose global is `base`."""
    return tuple(int(round(r * base)) for r in rule[1])


def scaled(rule: Rule, idx: np.ndarray, base: np.ndarray) -> np.ndarray:
    """(n, L) ratio indices and (n,) values of the global -> (n, L) integer widths (the codec's decode)."""
    return np.rint(np.asarray(rule[1], dtype=float)[idx] * np.asarray(base, dtype=float)[:, None]).astype(np.int64)


def tie_columns(X3: np.ndarray, codec: tuple[str, ...], ties: Mapping[str, str]) -> None:
    """(n, L, genes) grid indices: each tied gene's column takes its source's (the grids are equal), in place."""
    for name, src in ties.items():
        X3[:, :, codec.index(name)] = X3[:, :, codec.index(src)]


def check(genome: Any, ties: Mapping[str, str], space: str) -> None:
    """Every active layer of `genome` keeps its ties (a blanked identity-attention field counts as kept)."""
    for i, gene in enumerate(genome.layers):
        for name, src in ties.items():
            if gene.active and gene.attn and gene.get(name) != gene.get(src):
                raise GenomeError(f"layers[{i}].{name} = {gene.get(name)} is invalid for space {space}; allowed: "
                                  f"equal to {src} ({gene.get(src)}: the space ties them)")


def attention_configs(grids: Mapping[str, tuple[int, ...]], ties: Mapping[str, str], d_model: int,
                      attention: str) -> dict[str, int]:
    """Distinct per-layer attention configurations a space holds: (n_h, n_kv) pairs with n_kv | n_h whose n_h
    divides d_model (GQA), and (n_h, n_kv, d_qk, d_v) with n_kv | n_h (IHA; the GQA count under `attention: gqa`),
    a tied gene (`n_kv: {same_as: n_h}`) taking its source's value instead of ranging over its grid."""
    import itertools

    free = [k for k in grids if ties.get(k) not in grids]
    iha, gqa = set(), set()
    for values in itertools.product(*(grids[k] for k in free)):
        v = dict(zip(free, values))
        v.update({k: v[ties[k]] for k in grids if k not in v})
        if v["n_h"] % v["n_kv"] == 0:
            iha.add((v["n_h"], v["n_kv"], v["d_qk"], v["d_v"]))
            gqa.update({(v["n_h"], v["n_kv"])} if d_model % v["n_h"] == 0 else set())
    return {"gqa": len(gqa), "iha": len(iha) if attention == "iha" else len(gqa)}
