"""Where a surrogate checkpoint lives and what it covers: shipped names, path resolution and the genes (and
ranges) its training data saw. JSON only: nothing here loads weights. surrogate.predictor re-exports these.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forge.config import data_dir
from forge.errors import ForgeError
from surrogate.dataset import LabelSet


class CheckpointError(ForgeError):
    """A checkpoint is missing, corrupt or does not match the field layout / space it is used with."""


def covers_of(meta: dict[str, Any]) -> dict[str, Any]:
    """A sidecar's declared `covers`, else what its token fields let it see: the seven built-in genes (range
    unknown: None) and every registered gene named as a field (e.g. `window` in field set `paper+window`)."""
    if isinstance(meta.get("covers"), dict):
        return dict(meta["covers"])
    from forge.genes import BUILTIN, GLOBAL_GENES, LAYER_GENES

    fields = set(meta.get("fields") or ())
    seen = {g: None for g in BUILTIN if ("mask" if g == "active" else g) in fields}
    return seen | {g: None for g in (*LAYER_GENES, *GLOBAL_GENES) if g in fields and g not in BUILTIN}


def data_covers(data: LabelSet) -> dict[str, list[float]]:
    """{gene: [lo, hi]} over the labelled genomes' active layers (attention genes over attention layers only)."""
    from forge.genes import attention_genes, grid_genes

    att = set(attention_genes())
    out: dict[str, list[float]] = {"active": [0, 1], "attn": [0, 1]}
    for gene in grid_genes():
        vals = [getattr(lay, gene.name) for g in data.genomes for lay in g.layers
                if lay.active and (lay.attn or gene.name not in att)]
        if vals and (len(set(vals)) > 1 or gene.builtin):
            out[gene.name] = [min(vals), max(vals)]
    return out


def shipped_sidecars() -> dict[str, dict[str, Any]]:
    """{name: sidecar} of every shipped checkpoint (JSON only; nothing loaded)."""
    out = {}
    for p in sorted((data_dir() / "surrogate").glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text())
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
