"""Genes the loss predictor cannot see (issue 35 §4): refuse a space that varies one, unless the user opts in.

A predictor declares what its training data covered (`covers`: {gene: [lo, hi]} or {gene: None} when only the
gene, not its range, is known; `surrogate.predictor.ForgeFormerPredictor.covers`). A space varies a gene when its
grid holds more than one value (the masks `active`/`attn` always vary). A varied gene the predictor does not
cover, or whose grid leaves the covered range, makes its predicted loss blind to that gene: the window-blind
paper checkpoint moved only through its FLOPs feature, so windows looked close to free in predicted loss.
`evaluator.allow_blind=[window]` runs anyway, and the run marks its loss as blind (summary, table, front.csv,
report, card). A predictor that declares nothing (a user's plug-in) is not checked.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from forge.genome import Genome
from forge.space import SearchSpace
from search.errors import SearchConfigError


def covers(predictor: Any) -> Mapping[str, Any] | None:
    got = getattr(predictor, "covers", None)
    return got if isinstance(got, Mapping) else None


def varied(space: SearchSpace) -> dict[str, tuple[Any, ...]]:
    """{gene: its grid} for every gene the space varies (per-layer codec genes, searched globals)."""
    out = {g: ((0, 1) if g in ("active", "attn") else tuple(space.grid(g))) for g in space.codec_genes}
    out.update({g: tuple(space.global_grid(g)) for g in space.searched_globals})
    return {g: v for g, v in out.items() if len(v) > 1}


def blind_genes(predictor: Any, grids: Mapping[str, Sequence[Any]]) -> dict[str, str]:
    """{gene: why} for each varied gene the predictor's training data did not cover."""
    cov = covers(predictor)
    if cov is None:
        return {}
    out = {}
    for g, values in grids.items():
        if g not in cov:
            out[g] = "never seen in its training data"
        elif cov[g] is not None:
            lo, hi = cov[g]
            outside = sorted({v for v in values if isinstance(v, (int, float)) and not lo <= v <= hi})
            if outside:
                out[g] = f"values {outside} outside the trained range [{lo}, {hi}]"
    return out


def check_blind(predictor: Any, grids: Mapping[str, Sequence[Any]], allow: Iterable[str] | None, name: str,
                where: str, space: SearchSpace | None = None) -> list[str]:
    """The blind genes the user allowed (sorted); refuses in one line if any blind gene is not allowed."""
    blind, ok = blind_genes(predictor, grids), set(allow or ())
    refused = {g: why for g, why in blind.items() if g not in ok}
    if refused:
        g, why = next(iter(sorted(refused.items())))
        raise SearchConfigError(f"predictor {name!r} is blind to gene {g!r} that {where} ({why}); allowed: a "
                                f"predictor trained on it ({fitting_hint(grids)}), or evaluator.allow_blind=[{g}] "
                                "to run with that loss marked blind")
    return sorted(blind)


def genome_grids(genomes: Sequence[Genome]) -> dict[str, tuple[Any, ...]]:
    """{gene: values} the genomes hold, for per-layer genes beyond the five grids and the masks (forge.predict)."""
    from forge.genes import extra_genes

    vals: dict[str, set] = {}
    for g in genomes:
        for layer in g.layers:
            for gene in extra_genes():
                vals.setdefault(gene.name, set()).add(getattr(layer, gene.name, gene.default))
    return {k: tuple(sorted(v)) for k, v in vals.items() if len(v - {0}) > 0}


def fitting_hint(grids: Mapping[str, Sequence[Any]], space: SearchSpace | None = None) -> str:
    """Shipped checkpoints that see every varied gene (and fit the space's globals), for `allowed:`."""
    fits = fitting(space, grids, ()) if space is not None else []
    return "shipped: " + ", ".join(fits) if fits else "none is shipped"


def fitting(space: SearchSpace, grids: Mapping[str, Sequence[Any]], allow: Iterable[str]) -> list[str]:
    """Shipped checkpoints trained for the space's globals and depth that are blind to no varied gene outside
    `allow`, best first: the space's own name with `-all` (every label), then its own name, then the rest."""
    from surrogate.predictor import shipped_sidecars

    out = []
    for name, meta in shipped_sidecars().items():
        sp = meta.get("space") or {}
        if any(sp.get(k) != getattr(space, k) for k in ("d_model", "block_size", "vocab_size")):
            continue
        if int(sp.get("L_max", 0)) >= space.L_max and not set(blind_genes(_load(name), grids)) - set(allow):
            out.append(name)
    rank = {f"forgeformer-{space.name}-all": 0, f"forgeformer-{space.name}": 1}
    return sorted(out, key=lambda n: (rank.get(n, 2), not n.endswith("-all"), n))


def default_predictor(space: SearchSpace, allow: Iterable[str] | None) -> str:
    """`evaluator.predictor=auto`: the shipped checkpoint trained for this space (`fitting`), or a one-line refusal
    naming the checkpoints that fit its globals and the genes they cannot see."""
    allow = list(allow or ())
    fits = fitting(space, varied(space), allow)
    if fits:
        return fits[0]
    near = fitting(space, {}, ())
    blind = sorted(set(blind_genes(_load(near[0]), varied(space)))) if near else []
    raise SearchConfigError(
        f"no shipped predictor sees every gene space {space.name!r} varies"
        + (f" (the ones for its globals, {', '.join(near)}, are blind to {', '.join(blind)})" if near else "")
        + "; allowed: evaluator.predictor=<checkpoint trained on this space>"
        + (f", or evaluator.predictor={near[0]} evaluator.allow_blind=[{','.join(blind)}]" if near else ""))


def _load(name: str) -> Any:
    from surrogate.predictor import covers_of, shipped_sidecars

    return type("Declared", (), {"covers": covers_of(shipped_sidecars()[name])})()
