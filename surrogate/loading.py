"""Reading a surrogate checkpoint back: `load_predictor` picks the loader its sidecar's `format` names
(Forge-Former's here, the supernet's, or one registered with `register_format`) and checks the untrusted
sidecar and tensors before building a predictor. Kept apart from surrogate/predictor.py, which predicts
(MC dropout, intervals, devices) and writes: reading validates disk input, predicting trusts its object.
Only safetensors and JSON are read: nothing is ever unpickled, and the file never names the code that reads it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from safetensors.numpy import load_file

from surrogate.calibration import LowEndStretch
from surrogate.checkpoints import CheckpointError, resolve_checkpoint
from surrogate.conformal import ConformalInterval
from surrogate.pairwise import PairwiseOdds
from surrogate.features import FeatureError, MinMax, field_names
from surrogate.numpy_encoder import FFConfig, NumpyForgeFormer
from surrogate.predictor import DEFAULT, FORMAT, ForgeFormerPredictor
from surrogate.targets import TargetMap
from surrogate.sidecar import _finite, check_finite, check_outputs, check_sidecar
from surrogate.trees import RankForest
from forge.disk.io import loads


def _read_sidecar(stem: Path) -> dict[str, Any]:
    try:
        meta = loads(stem.with_suffix(".json").read_text())
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CheckpointError(f"{stem}.json: unreadable sidecar ({type(e).__name__}); allowed: the .json a "
                              "surrogate checkpoint was saved with") from None
    if isinstance(meta, dict) and meta.get("format") == FORMAT:
        check_sidecar(meta, stem)  # every key the loader reads, of its kind: one line, never a TypeError
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{stem}.json: format {meta.get('format') if isinstance(meta, dict) else None!r}; "
                              f"allowed: {', '.join([FORMAT, *LOADERS])}")
    fs = meta.get("field_set")
    try:
        fields = list(field_names(fs))  # a plain set, or one + registered token genes (forge.genomes.genes)
    except FeatureError:
        fields = None
    if fields is None or meta.get("fields") != fields:
        raise CheckpointError(f"{stem}.json: field layout {meta.get('fields')} does not match this code's "
                              f"layout for field_set={fs!r}")
    if meta["config"].get("n_fields") != len(meta["fields"]) or len(meta["norm"]["lo"]) != len(meta["fields"]):
        raise CheckpointError(f"{stem}.json: config/normalization sizes do not match its {len(meta['fields'])} fields")
    return meta


LOADERS: dict[str, Callable[[Path], Any]] = {}  # other checkpoint formats: sidecar "format" → loader(stem)


def register_format(fmt: str, loader: Callable[[Path], Any]) -> None:
    """Make `load_predictor` (and so `evaluator.predictor=<name>`) load checkpoints whose sidecar says
    `format: fmt`. The file only names its format; the code that reads it is registered here, never named
    by the file."""
    LOADERS[str(fmt)] = loader


def load_predictor(path_or_name: str | Path = DEFAULT) -> Any:
    """Load a checkpoint by name or path: Forge-Former's (safetensors + JSON only; nothing unpickled) or
    any format registered with `register_format`."""
    stem = resolve_checkpoint(path_or_name)
    try:
        fmt = loads(stem.with_suffix(".json").read_text()).get("format")
    except (OSError, ValueError, AttributeError):  # not JSON, not UTF-8, not an object: _read_sidecar names it
        fmt = None
    if fmt != FORMAT and fmt in LOADERS:
        return LOADERS[fmt](stem)
    if fmt == "forge-surrogate/supernet-v1":  # issue 38's supernet (loaded lazily: torch model code)
        from surrogate.supernet import load_supernet
        return load_supernet(stem)
    meta = _read_sidecar(stem)
    try:
        tensors = load_file(str(stem.with_suffix(".safetensors")))
    except Exception as e:  # safetensors raises its own error types
        raise CheckpointError(f"{stem}.safetensors: unreadable weights: {e}") from None
    check_finite(tensors, stem)
    cfg = FFConfig(**meta["config"])
    members = []
    for k in range(int(meta["n_members"])):
        sd = {n[len(f"m{k}."):]: t for n, t in tensors.items() if n.startswith(f"m{k}.")}
        try:
            members.append(NumpyForgeFormer(cfg, sd))
        except ValueError as e:
            raise CheckpointError(f"{stem}.safetensors: member {k} does not match its config: {e}") from None
    try:
        forests = [RankForest.from_tensors({k: v for k, v in tensors.items() if k.startswith(f"f{j}.")},
                                           f"f{j}", fm, int(meta["space"]["L_max"]))
                   for j, fm in enumerate(meta.get("forests", []))]
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{stem}.safetensors: forest arrays do not match the sidecar: {e}") from None
    nn_weight = float(meta.get("nn_weight", 1.0))
    if not 0.0 <= nn_weight <= 1.0:
        raise CheckpointError(f"{stem}.json: nn_weight = {nn_weight}; allowed: 0 <= nn_weight <= 1")
    try:
        calib = LowEndStretch.from_dict(meta["calibration"]) if meta.get("calibration") is not None else None
    except ValueError as e:
        raise CheckpointError(f"{stem}.json: {e}") from None
    try:
        conformal = ConformalInterval.from_dict(meta["conformal"]) if meta.get("conformal") else None
    except ValueError as e:
        raise CheckpointError(f"{stem}.json: {e}") from None
    try:
        pairwise = PairwiseOdds.from_dict(meta["pairwise"]) if meta.get("pairwise") is not None else None
    except ValueError as e:
        raise CheckpointError(f"{stem}.json: {e}") from None
    fw = meta.get("forest_weights")
    if fw is not None and (len(fw) != len(forests) or any(not (_finite(w) and 0 <= w <= 1) for w in fw) or sum(fw) <= 0):
        raise CheckpointError(f"{stem}.json: forest_weights {fw}; allowed: one weight in [0, 1] per forest, sum > 0")
    rest = {k: v for k, v in meta.items() if k not in ("format", "config", "n_members", "field_set", "fields", "norm",
                                                         "target", "space", "forests", "nn_weight", "calibration",
                                                         "conformal", "forest_weights", "pairwise")}
    try:
        target = TargetMap.from_dict(meta["target"])
    except (TypeError, ValueError) as e:  # a grid of text, a kind that is not a string
        raise CheckpointError(f"{stem}.json: target: {e}; allowed: the target map it was saved with") from None
    for k, m in enumerate(members):
        check_outputs(m, len(meta["fields"]), target.to_loss, f"{stem}: member {k}")
    return ForgeFormerPredictor(members, MinMax.from_dict(meta["norm"]), meta["field_set"], meta["space"],
                                target, rest, forests, nn_weight, calib, conformal,
                                None if fw is None else [float(w) for w in fw], pairwise)
