"""Genes and values the loss predictor cannot see (issues 35 §4, 43 §5): refuse them, unless the user opts in.

A predictor declares what its training data covered (`covers`: {gene: [lo, hi]}, or None where only the gene is
known; surrogate.checkpoints.covers_of: a sidecar's declared ranges, else its normalization statistics). A space
varies a gene when it takes more than one value there (`space_values`: a grid, or what a tie derives; the masks
`active`/`attn` always vary); genomes hold the values their layers hold (`genome_grids`). A gene the predictor
never saw, or a value outside its range, makes the predicted loss blind there: the model never learned that
effect on loss, so μ is an extrapolation (a gene it has no input for moves μ only through the inputs it changes,
such as FLOPs per token). `check_blind` refuses in one line naming gene, values and covered range;
`evaluator.allow_blind=[gene]` runs anyway and marks the loss blind (summary, table, front.csv, report, card,
verify). `guard` is the same check on genomes, wherever a predictor prices them. A predictor that declares
nothing (a user's plug-in) is not checked. `resolve_auto` picks `evaluator.predictor=auto`'s checkpoint.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from forge.genomes.genome import Genome
from forge.spaces.space import SearchSpace
from search.errors import SearchConfigError


def covers(predictor: Any) -> Mapping[str, Any] | None:
    """What a predictor declares it covers ({gene: [lo, hi] | None}), or None: a predictor that declares nothing."""
    if isinstance(predictor, Mapping):
        return predictor
    got = getattr(predictor, "covers", None)
    return got if isinstance(got, Mapping) else None


def space_values(space: SearchSpace, gene: str) -> tuple[Any, ...]:
    """Every value `gene` takes in a genome of the space: its grid, or what a tie derives (a GQA space's d_qk = d_v =
    d_model / n_h; a width that is a ratio of a searched global: each ratio times each of the global's values)."""
    if space.attention == "gqa" and gene in ("d_qk", "d_v"):
        return tuple(sorted({space.d_model // h for h in space.n_h}))
    rule = getattr(space, "_tables", {}).get("ratios", {}).get(gene)  # forge.spaces.space: (global, ratios)
    if rule:
        from forge.spaces import links

        return tuple(sorted({v for base in space.global_grid(rule[0]) for v in links.products(rule, base)}))
    return tuple(space.grid(gene))


def varied(space: SearchSpace) -> dict[str, tuple[Any, ...]]:
    """{gene: the values it takes} for every gene the space varies (per-layer codec genes, searched globals)."""
    out = {g: ((0, 1) if g in ("active", "attn") else space_values(space, g)) for g in space.codec_genes}
    out.update({g: tuple(space.global_grid(g)) for g in space.searched_globals})
    return {g: v for g, v in out.items() if len(v) > 1}


def genome_grids(genomes: Sequence[Genome]) -> dict[str, tuple[Any, ...]]:
    """{gene: values} the genomes' layers hold (surrogate.checkpoints.layer_values: active layers, attention genes
    on attention layers), what `blind_genes` checks genomes by (forge.predict, every LossEvaluator call)."""
    from surrogate.checkpoints import layer_values

    return {k: tuple(sorted(v)) for k, v in layer_values(genomes).items()}


def blind_genes(predictor: Any, grids: Mapping[str, Sequence[Any]]) -> dict[str, str]:
    """{gene: why} for each gene whose values the predictor's training data did not cover
    (surrogate.checkpoints.uncovered); {} for a predictor that declares nothing."""
    from surrogate.checkpoints import uncovered

    cov = covers(predictor)
    return {} if cov is None else uncovered(cov, grids)


def check_blind(predictor: Any, grids: Mapping[str, Sequence[Any]], allow: Iterable[str] | None, name: str,
                where: str, space: Any = None) -> list[str]:
    """The blind genes the user allowed (sorted); refuses in one line if any blind gene is not allowed. `space`: a
    SearchSpace or anything with its globals and L_max (`like`), for the checkpoints that would see the genes."""
    blind, ok = blind_genes(predictor, grids), set(allow or ())
    refused = {g: why for g, why in blind.items() if g not in ok}
    if refused:
        g, why = next(iter(sorted(refused.items())))
        more = f" (and {', '.join(sorted(refused)[1:])})" if len(refused) > 1 else ""
        raise SearchConfigError(f"predictor {name!r} is blind to gene {g!r}{more} that {where} ({why}); allowed: a "
                                f"predictor trained on it ({fitting_hint(grids, space)}), or "
                                f"evaluator.allow_blind=[{','.join(sorted(set(refused) | ok))}] to run with that loss "
                                "marked blind")
    return sorted(blind)


def like(genomes: Sequence[Genome]) -> Any:
    """The globals and depth of a list of genomes, standing for a space in `fitting` (forge.predict has no space)."""
    from types import SimpleNamespace

    g = genomes[0]
    return SimpleNamespace(name="", d_model=g.d_model, block_size=g.block_size, vocab_size=g.vocab_size,
                           L_max=max(len(x.layers) for x in genomes))


def guard(predictor: Any, genomes: Sequence[Genome], allow: Iterable[str] | None, name: str) -> list[str]:
    """The one check on genomes, wherever a predictor prices them (forge.predict, every LossEvaluator call: a
    search, verify, co-evolution's refits): the blind genes allowed, else a one-line refusal."""
    if covers(predictor) is None or not len(genomes):
        return []
    return check_blind(predictor, genome_grids(genomes), allow, name, "these genomes use", like(genomes))


def fitting_hint(grids: Mapping[str, Sequence[Any]], space: Any = None) -> str:
    """Shipped checkpoints that see every varied gene (and fit the space's globals), for `allowed:`."""
    fits = fitting(space, grids, ()) if space is not None else []
    return "shipped: " + ", ".join(fits) if fits else "none is shipped"


def fitting(space: Any, grids: Mapping[str, Sequence[Any]], allow: Iterable[str]) -> list[str]:
    """Shipped checkpoints trained for the space's globals and depth that are blind to no varied gene outside
    `allow`, best first: the space's own name with `-all` (every label), then its own name, then the rest."""
    from surrogate.checkpoints import covers_of, shipped_sidecars

    out = []
    for name, meta in shipped_sidecars().items():
        sp = meta.get("space") or {}
        if any(sp.get(k) != getattr(space, k) for k in ("d_model", "block_size", "vocab_size")):
            continue
        if int(sp.get("L_max", 0)) >= space.L_max and not set(blind_genes(covers_of(meta), grids)) - set(allow):
            out.append(name)
    rank = {f"forgeformer-{space.name}-all": 0, f"forgeformer-{space.name}": 1}
    return sorted(out, key=lambda n: (rank.get(n, 2), not n.endswith("-all"), n))


def unfitted_globals(space: Any) -> str:
    """Why no shipped checkpoint fits the space's globals, naming each field: those of the nearest checkpoint (the
    fewest fields apart, the space's own name first), e.g. `L_max 16 > 12, the most forgeformer-iha-tiny saw`."""
    from surrogate.checkpoints import shipped_sidecars

    def apart(meta: dict[str, Any]) -> list[str]:
        sp = meta.get("space") or {}
        out = [f"{k} {getattr(space, k)} (it has {sp.get(k)})" for k in ("d_model", "block_size", "vocab_size")
               if sp.get(k) != getattr(space, k)]
        return out + ([f"L_max {space.L_max} > {sp.get('L_max')}, the most it saw"]
                      if int(sp.get("L_max", 0)) < space.L_max else [])

    metas = shipped_sidecars()
    if not metas:
        return "none is shipped"
    name = min(metas, key=lambda n: (len(apart(metas[n])), not n.startswith(f"forgeformer-{space.name}"), n))
    return f"none was trained for its globals; the nearest, {name}, differs in {'; '.join(apart(metas[name]))}"


def resolve_auto(space: SearchSpace, allow: Iterable[str] | None) -> tuple[str, str | None]:
    """`evaluator.predictor=auto`: (the shipped checkpoint trained for this space (`fitting`), a note when it is
    not the one auto ranks first, which is blind to a gene the space varies), or a one-line refusal naming the
    checkpoints that fit its globals and the genes they cannot see."""
    allow = list(allow or ())
    fits, near = fitting(space, varied(space), allow), fitting(space, {}, ())
    if fits:
        skipped = near[:near.index(fits[0])] if fits[0] in near else []
        why = "; ".join(f"{n}: {', '.join(blind_genes(declared(n), varied(space)).values())}" for n in skipped)
        return fits[0], (f"evaluator.predictor=auto uses {fits[0]}, not {', '.join(skipped)}, which is blind to what "
                         f"space {space.name!r} varies ({why})" if skipped else None)
    blind = sorted(set(blind_genes(declared(near[0]), varied(space)))) if near else []
    why = "; ".join(blind_genes(declared(near[0]), varied(space)).values()) if near else ""
    raise SearchConfigError(
        f"no shipped predictor sees every gene space {space.name!r} varies"
        + (f" (the ones for its globals, {', '.join(near)}, are blind to {', '.join(blind)}: {why})" if near else
           f" ({unfitted_globals(space)})")
        + "; allowed: evaluator.predictor=<checkpoint trained on this space>"
        + (f", or evaluator.predictor={near[0]} evaluator.allow_blind=[{','.join(blind)}]" if near else ""))


def default_predictor(space: SearchSpace, allow: Iterable[str] | None) -> str:
    """The checkpoint `evaluator.predictor=auto` resolves to (`resolve_auto`)."""
    return resolve_auto(space, allow)[0]


def declared(name: str) -> dict[str, Any]:
    """What the shipped checkpoint `name` covers (its sidecar only; nothing loaded)."""
    from surrogate.checkpoints import covers_of, shipped_sidecars

    return covers_of(shipped_sidecars()[name])
