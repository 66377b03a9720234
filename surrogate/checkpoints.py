"""Where a surrogate checkpoint lives and what it covers: shipped names, path resolution, the genes and value
ranges its training data saw (`covers_of`, `data_covers`), the one check of values against them (`uncovered`,
which search.blind applies wherever a predictor prices genomes) and what a loss blind to a gene means
(`BLIND_WHY`). JSON only: nothing here loads weights (surrogate.loading does). surrogate.predictor re-exports these.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from forge.runtime.config import data_dir
from forge.errors import ForgeError
from surrogate.dataset import LabelSet
from forge.disk.io import loads


class CheckpointError(ForgeError):
    """A checkpoint is missing, corrupt or does not match the field layout / space it is used with."""


# what a loss "blind to" a gene is (search.blind), said the same way by the console, the card, forge-verify and
# forge-surrogate mode=eval: not ignored (an unseen window still moves μ through the FLOPs it saves), but unlearned
BLIND_WHY = ("its training data never held these values, so it never learned their effect on loss: μ there is an "
             "extrapolation (a gene it has no input for moves μ only through the inputs it changes, such as FLOPs "
             "per token)")


def covers_of(meta: dict[str, Any]) -> dict[str, Any]:
    """{gene: [lo, hi]} a checkpoint covers: its sidecar's declared `covers`, else the range of each gene field in
    its normalization statistics (the min/max of its training split, `norm`); `None` only where neither says."""
    if isinstance(meta.get("covers"), dict):
        return dict(meta["covers"])
    from forge.genomes.genes import LAYER_GENES

    fields, norm = list(meta.get("fields") or ()), meta.get("norm") or {}
    lo, hi = list(norm.get("lo") or ()), list(norm.get("hi") or ())
    out: dict[str, Any] = {}
    for i, f in enumerate(fields):
        gene = LAYER_GENES.get("active" if f == "mask" else f)
        if gene is not None:
            known = gene.grid and i < min(len(lo), len(hi))
            out[gene.name] = [_num(lo[i]), _num(hi[i])] if known else None if gene.grid else [0, 1]
    return out


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


def layer_values(genomes: Iterable[Any]) -> dict[str, set]:
    """{gene: values} the genomes' layers hold: `active` over every slot, `attn` and every grid gene over active
    layers, attention genes over attention layers only (identity attention blanks them)."""
    from forge.genomes.genes import LAYER_GENES

    out: dict[str, set] = {g: set() for g in LAYER_GENES}
    grid = [(name, gene.default) for name, gene in LAYER_GENES.items() if gene.grid]
    plain = [(name, d) for name, d in grid if not LAYER_GENES[name].attention]  # genes an identity-attention layer has
    # each layer object once: the codec shares equal layers between genomes (the search's hot path, issue 45)
    for lay in {id(lay): lay for g in genomes for lay in g.layers}.values():
        out["active"].add(int(bool(lay.active)))
        if not lay.active:
            continue
        out["attn"].add(int(bool(lay.attn)))
        for name, default in grid if lay.attn else plain:
            out[name].add(getattr(lay, name, default))
    return {k: v for k, v in out.items() if v}


def data_covers(data: LabelSet) -> dict[str, list[float]]:
    """{gene: [lo, hi]} over the labelled genomes (`layer_values`): the built-in genes, and each registered gene
    whose labels hold a value other than its default (a gene never varied stays undeclared: blind)."""
    from forge.genomes.genes import LAYER_GENES

    out: dict[str, list[float]] = {"active": [0, 1], "attn": [0, 1]}
    for name, vals in layer_values(data.genomes).items():
        gene = LAYER_GENES[name]
        if gene.grid and (gene.builtin or vals != {gene.default}):
            out[name] = [min(vals), max(vals)]
    return out


def union_covers(*covers: dict[str, Any]) -> dict[str, Any]:
    """What a model trained on several label sets covers (a fine-tune: its base's covers and its new and replay
    data's, `data_covers`): each gene's range spans all of theirs. A gene one of them leaves undeclared saw only its
    default there, so the union spans the default too; a range that is unknown (None) everywhere stays None."""
    from forge.genomes.genes import LAYER_GENES

    out: dict[str, Any] = {}
    for gene in dict.fromkeys(g for cov in covers for g in cov):
        default = LAYER_GENES[gene].default if gene in LAYER_GENES else None
        spans = [cov[gene] for cov in covers if isinstance(cov.get(gene), (list, tuple))]
        spans += [[default, default] for cov in covers if gene not in cov and isinstance(default, (int, float))]
        out[gene] = [_num(min(s[0] for s in spans)), _num(max(s[1] for s in spans))] if spans else None
    return out


def _span(values: Iterable[Any]) -> str:
    vals = sorted(values)
    return ", ".join(map(str, vals)) if len(vals) <= 3 else f"{vals[0]}..{vals[-1]} ({len(vals)} values)"


def uncovered(cov: dict[str, Any], grids: dict[str, Iterable[Any]]) -> dict[str, str]:
    """{gene: why} for each gene of `grids` ({gene: values}) whose values `cov` (`covers_of`) does not cover: a gene
    it does not declare (its training genomes held only the default, so any other value is unseen), or values
    outside its range; the check search.blind makes wherever a predictor prices genomes."""
    from forge.genomes.genes import LAYER_GENES

    out = {}
    for g, values in grids.items():
        values = set(values)
        if g not in cov:
            default = LAYER_GENES[g].default if g in LAYER_GENES else None
            if values - {default}:
                held = f", which holds {g} {default} only" if default is not None else ""
                out[g] = f"{g} {_span(values - {default})} never seen in its training data{held}"
        elif cov[g] is not None:
            lo, hi = cov[g]
            outside = [v for v in values if isinstance(v, (int, float)) and not lo <= v <= hi]
            if outside:
                out[g] = f"{g} {_span(outside)} outside the range it covers, [{lo}, {hi}]"
    return out


def shipped_sidecars() -> dict[str, dict[str, Any]]:
    """{name: sidecar} of every shipped checkpoint (JSON only; nothing loaded)."""
    out = {}
    for p in sorted((data_dir() / "surrogate").glob("*.json")):
        try:
            out[p.stem] = loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return out


def checkpoint_stem(path: str | Path) -> Path:
    p = Path(path)
    return p.with_suffix("") if p.suffix in (".json", ".safetensors") else p


def resolve_checkpoint(path_or_name: str | Path) -> Path:
    """A path (with or without extension) or a shipped name such as 'forgeformer-iha-paper'."""
    stem = checkpoint_stem(path_or_name)
    if stem.with_suffix(".json").is_file():
        return stem
    shipped = data_dir() / "surrogate" / Path(str(path_or_name)).name
    if checkpoint_stem(shipped).with_suffix(".json").is_file():
        return checkpoint_stem(shipped)
    avail = sorted(p.stem for p in (data_dir() / "surrogate").glob("*.json"))
    raise CheckpointError(f"checkpoint {path_or_name!s} not found (no {stem}.json); shipped: {', '.join(avail) or 'none'}")
