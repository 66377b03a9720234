"""The shape of a Forge-Former checkpoint's sidecar (its .json), checked before anything is built from it.

A sidecar is data someone may hand over (a run's refitted surrogate, a downloaded checkpoint): a `config`
with an unknown key, a list where a mapping belongs, a missing `norm`, a NaN in the normalization would
otherwise end in a TypeError, KeyError or AttributeError deep in the loader, or in a predictor whose every
loss is NaN. `check_sidecar` refuses each in one line naming the key and what is allowed. The keys, their
kinds and which are optional are listed once, here (`REQUIRED`, `OPTIONAL`); any other top-level key is
metadata the predictor keeps (metrics, recipe, provenance) and is not interpreted.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping

from surrogate.checkpoints import CheckpointError
from surrogate.numpy_encoder import FFConfig

_NUM = (int, float)
# key -> (allowed types, what to say): read by the loader, so required and of this kind
REQUIRED: dict[str, tuple[tuple[type, ...], str]] = {
    "format": ((str,), "a string"), "config": ((dict,), "a mapping of encoder sizes"),
    "n_members": ((int,), "an integer >= 1"), "field_set": ((str,), "a field-set name"),
    "fields": ((list,), "a list of field names"), "norm": ((dict,), "a mapping {lo: [...], hi: [...]}"),
    "target": ((dict,), "a mapping {kind, mean, std, ...}"), "space": ((dict,), "a mapping with L_max"),
}
# optional keys the loader reads (None: absent), each of these kinds when present
OPTIONAL: dict[str, tuple[tuple[type, ...], str]] = {
    "forests": ((list,), "a list of forest descriptions"), "nn_weight": (_NUM, "a number in [0, 1]"),
    "calibration": ((dict, type(None)), "a mapping {cut, k} or null"),
    "conformal": ((dict, type(None)), "a mapping or null"),
    "forest_weights": ((list, type(None)), "a list of numbers or null"),
    "pairwise": ((dict, type(None)), "a mapping or null"),  # a pairwise-order calibration (the lead's, issue 51)
}
_CONFIG = {f.name: f.type for f in dataclasses.fields(FFConfig)}


def check_sidecar(meta: Any, stem: Path) -> None:
    """Refuse, in one line, a sidecar that is not the mapping a Forge-Former checkpoint is saved with."""
    where = f"{stem}.json"
    if not isinstance(meta, dict):
        raise CheckpointError(f"{where}: a {type(meta).__name__}, not a mapping; allowed: the .json a surrogate "
                              "checkpoint was saved with")
    for key, (kinds, what) in {**REQUIRED, **OPTIONAL}.items():
        if key not in meta and key in OPTIONAL:
            continue
        value = meta.get(key)
        if key not in meta or not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            said = "missing" if key not in meta else f"a {type(value).__name__}"
            raise CheckpointError(f"{where}: {key} is {said}; allowed: {what}")
    _check_config(meta["config"], where)
    if meta["n_members"] < 1:
        raise CheckpointError(f"{where}: n_members = {meta['n_members']}; allowed: an integer >= 1")
    norm = meta["norm"]
    for side in ("lo", "hi"):
        v = norm.get(side)
        if not (isinstance(v, list) and all(_finite(x) for x in v)):
            raise CheckpointError(f"{where}: norm.{side} is not a list of finite numbers; allowed: one finite "
                                  "number per field")
    L = meta["space"].get("L_max")
    if not (isinstance(L, int) and not isinstance(L, bool) and L >= 1):
        raise CheckpointError(f"{where}: space.L_max = {L!r}; allowed: an integer >= 1")
    if any(not isinstance(f, dict) for f in meta.get("forests") or []):
        raise CheckpointError(f"{where}: forests holds a non-mapping; allowed: the forest descriptions it was saved "
                              "with")
    for key in ("mean", "std"):
        if key in meta["target"] and not _finite(meta["target"][key]):
            raise CheckpointError(f"{where}: target.{key} = {meta['target'][key]!r}; allowed: a finite number")


def _check_config(cfg: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(cfg) - set(_CONFIG))
    if unknown:
        raise CheckpointError(f"{where}: config has unknown key(s) {', '.join(map(str, unknown))}; allowed: "
                              f"{', '.join(_CONFIG)}")
    for key, value in cfg.items():
        kind = int if _CONFIG[key] in (int, "int") else float
        ok = _finite(value) and (kind is float or (isinstance(value, int) and value >= 1))
        if key == "dropout":
            ok = _finite(value) and 0 <= value < 1
        if not ok:
            allowed = "a number in [0, 1)" if key == "dropout" else "an integer >= 1"
            raise CheckpointError(f"{where}: config.{key} = {value!r}; allowed: {allowed}")


def _finite(x: Any) -> bool:
    return isinstance(x, _NUM) and not isinstance(x, bool) and math.isfinite(x)


def check_finite(tensors: Mapping[str, Any], stem: Path) -> None:
    """Refuse weights holding NaN or inf: every prediction would be NaN and the search would run on nothing."""
    import numpy as np

    bad = next((k for k, t in tensors.items() if np.issubdtype(np.asarray(t).dtype, np.floating)
                and not np.all(np.isfinite(t))), None)
    if bad is not None:
        raise CheckpointError(f"{stem}.safetensors: tensor {bad} holds NaN or inf; allowed: a checkpoint with "
                              "finite weights (train or download it again)")


def check_outputs(member: Any, n_fields: int, to_loss: Any, where: str) -> None:
    """Refuse an encoder member whose predicted loss is not finite for a probe genome (every field mid-range,
    every layer real): finite weights and a finite target map can still overflow together, and a NaN loss would
    only show as an empty front, the search advising to relax a constraint."""
    import numpy as np

    L = int(member.cfg.L_max)
    with np.errstate(all="ignore"):
        out = np.asarray(to_loss(member(np.full((1, L, n_fields), 0.5), np.ones((1, L), bool))), float)
    if not np.all(np.isfinite(out)):
        raise CheckpointError(f"{where}: its prediction is not finite ({out.ravel()[0]}) for a probe genome; "
                              "allowed: a checkpoint whose outputs are finite (train or download it again)")
