"""Gene links a space yaml may declare instead of writing code: a ratio gene and a tied gene.

    d_mlp: {ratio: [2, 3, 4], of: d_model}   # a per-layer width as a ratio of a global: d_mlp = r * d_model
    n_kv: {same_as: n_h}                     # tied genes: every layer's n_kv equals its n_h (multi-head attention)
    d_v: {same_as: d_qk}

A ratio resolves, when the space is built, to the grid of its values (r * the global's fixed value, integers
only); a tied gene takes its source's grid and, in every genome the space makes or repairs, its source's value
(its codec column copies the source's grid index). The space records its ties (`links: {n_kv: n_h}`), so a
space written back to a config (`forge.space.space_config`) keeps them.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from forge.genome import GenomeError


def resolve(specs: dict[str, Any], globals_: Mapping[str, Any], given: Mapping[str, str] | None) -> dict[str, str]:
    """Rewrite ratio and tied specs in `specs` (gene -> a space yaml's grid spec) into plain grids, in place;
    return the ties {gene: source}, those already recorded (`given`) included."""
    for name, spec in specs.items():
        if isinstance(spec, Mapping) and "ratio" in spec:
            specs[name] = ratio_grid(name, spec, globals_)
    ties = dict(given or {})
    for name, spec in list(specs.items()):
        if isinstance(spec, Mapping) and "same_as" in spec:
            src = str(spec["same_as"])
            if src not in specs or src == name or isinstance(specs[src], Mapping) and "same_as" in specs[src]:
                raise GenomeError(f"space.{name}.same_as = {src!r} is invalid; allowed: another gene with a grid "
                                  f"({', '.join(k for k in specs if k != name)})")
            specs[name], ties[name] = specs[src], src
    return ties


def ratio_grid(name: str, spec: Mapping[str, Any], globals_: Mapping[str, Any]) -> list[int]:
    """r * the global's value for each ratio r; refused unless the global is fixed and every product an integer."""
    of = str(spec.get("of", "d_model"))
    base = globals_.get(of)
    if isinstance(base, (list, tuple, Mapping)) or not isinstance(base, (int, float)) or isinstance(base, bool):
        raise GenomeError(f"space.{name}.of = {of!r} is invalid; allowed: a global with one integer value in this space "
                          "(a searched global cannot anchor a ratio)")
    ratios = spec["ratio"] if isinstance(spec["ratio"], (list, tuple)) else [spec["ratio"]]
    vals = [float(r) * base for r in ratios]
    if not vals or any(v <= 0 or abs(v - round(v)) > 1e-9 for v in vals):
        raise GenomeError(f"space.{name}.ratio = {list(ratios)} is invalid with {of} = {base}; allowed: ratios "
                          "whose products with it are positive integers")
    return sorted({int(round(v)) for v in vals})


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
