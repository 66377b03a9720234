"""`forge-surrogate mode=train|eval|compare|finetune|calibrate`: a thin Hydra wrapper around `run(cfg) -> dict`.

The model is the config group `surrogate=<name>` (conf/surrogate/<name>.yaml); `model=<name>` is
accepted as a shorthand for the same choice. Every mode writes `summary.json` into the run dir.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from forge import plugins
from forge.errors import UserError
from forge.shell.app import forge_main
from forge.runtime.config import output_dir, to_container
from forge.disk.io import atomic_write_bytes, atomic_write_json, check_writable, shared_data_dir
from forge.spaces.space import space_from_config
from surrogate.compare import compare, model_config, write_markdown
from surrogate.dataset import duplicate_groups, load_labelset, train_val_test
from surrogate.generic import build_model
from surrogate.metrics import evaluate
from forge.disk import run_folder

MODES = ("train", "eval", "compare", "finetune", "calibrate")


def _out_dir(cfg: DictConfig) -> Path:
    out = output_dir(cfg, fallback=None)
    if out is None:
        raise UserError("out_dir is required when run() is called outside Hydra")
    return out


def _data_paths(cfg: DictConfig) -> list[Path]:
    """`data=FILE` or `data=[FILE,FILE,...]` (joined, one protocol); null = the shared LLMForge CSV."""
    d = cfg.get("data")
    if OmegaConf.is_list(d):
        if not len(d):
            raise UserError("data=[] names no label file; allowed: data=FILE, data=[FILE,...] or no data= "
                            "(the shared LLMForge CSV)")
        return [Path(str(p)) for p in d]
    return [Path(str(d))] if d else [shared_data_dir() / "llmforge_iha_200M.csv"]


def _data_path(cfg: DictConfig) -> str:
    """The label file(s) as one string for summaries and messages."""
    return " + ".join(str(p) for p in _data_paths(cfg))


def _labels(cfg: DictConfig, key: str = "data") -> Any:
    """The label set at `cfg[key]`; rows dropped for a non-finite label (NaN/inf) are said on the console."""
    path = _data_path(cfg) if key == "data" else Path(cfg[key])
    data = load_labelset(_data_paths(cfg) if key == "data" else path)
    if data.dropped:
        print(f"forge-surrogate: {key}={path}: dropped {data.dropped} row(s) with a non-finite label (NaN/inf); "
              f"using {len(data)}", flush=True)
    dup = duplicate_groups(data.ids)
    if dup["duplicate_groups"]:
        print(f"forge-surrogate: {key}={path}: {dup['rows']} rows hold {dup['architectures']} architectures; "
              f"{dup['duplicate_groups']} of them have more than one row ({dup['rows_in_duplicate_groups']} rows); "
              "every split keeps an architecture's rows together", flush=True)
    return data


def _data_info(data: Any) -> dict:
    """Rows used, rows dropped, and how many architectures repeat (splits group them)."""
    return {"n_rows": len(data), "dropped": data.dropped, "duplicates": duplicate_groups(data.ids)}


def _model_cfg(cfg: DictConfig) -> Any:
    return model_config(cfg.model) if cfg.get("model") else cfg.surrogate


def _train(cfg: DictConfig) -> dict:
    data = _labels(cfg)
    space = space_from_config(to_container(cfg.space))
    if cfg.get("out"):  # checked before the fit: a finished training is never lost at save time
        check_writable(Path(f"{cfg.out}.safetensors"), "out")
    train, val, test = train_val_test(data, cfg.seed, cfg.test_frac)
    test = test if len(test) else None
    model = build_model(_model_cfg(cfg), seed=cfg.seed, space=space.name, L_max=space.L_max).fit(train, val)
    res: dict[str, Any] = {"mode": "train", "data": str(_data_path(cfg)), **_data_info(data),
                           "n_train": len(train), "n_val": len(val), "n_test": len(test) if test else 0}
    if test is not None:
        res["metrics"] = evaluate(test.y, model.predict(test.genomes))
    if cfg.get("out"):
        res["checkpoint"] = str(_save(cfg, model, res, test))
    return res


def _save(cfg: DictConfig, model: Any, res: dict, test: Any) -> Path:
    """`out=`: the model's own `save(stem)` (surrogate.interface); a Forge-Former's sidecar also records the
    held-out metrics and split and its conformal interval, calibrated on those held-out rows."""
    if not callable(getattr(model, "save", None)):
        raise UserError(f"out= saves the trained model, and {type(model).__name__} has no save(stem); allowed: "
                         "a surrogate with save (forgeformer*), or no out=")
    if callable(getattr(model, "calibrate", None)):  # a surrogate that sizes its own interval (supernet)
        if test is not None:
            model.calibrate(test, {"data": _data_path(cfg), "split": f"train_val_test(seed={cfg.seed}, "
                                   f"test_frac={cfg.test_frac})", "metrics": res.get("metrics", {})})
        return model.save(cfg.out)
    p = getattr(model, "predictor", None)
    if p is not None and hasattr(p, "meta"):
        p.meta["metrics"] = res.get("metrics", {})
        p.meta["test"] = {"seed": cfg.seed, "test_frac": cfg.test_frac, "n_test": res["n_test"]}
        if test is not None:  # the interval and pairwise calibrations on the same held-out rows as mode=calibrate
            p.conformal = _conformal(cfg, p, test)
            p.pairwise = _pairwise(cfg, p, test)
    return model.save(cfg.out)


def _eval(cfg: DictConfig) -> dict:
    from surrogate.predictor import DEFAULT
    from surrogate.loading import load_predictor

    p = load_predictor(cfg.ckpt or DEFAULT)
    data = _labels(cfg)
    mu, _ = p.predict(data.genomes)
    return {"mode": "eval", "ckpt": str(cfg.ckpt or DEFAULT), **_data_info(data),
            "metrics": evaluate(data.y, mu), **_blind(p, data)}


def _blind(p: Any, data: Any) -> dict[str, Any]:
    """{blind_to: {gene: why}, blind: what that means} where the labels hold values the checkpoint never covered
    (surrogate.checkpoints.uncovered, the check a search makes): its metrics there measure an extrapolation."""
    from surrogate.checkpoints import BLIND_WHY, layer_values, uncovered

    cov = getattr(p, "covers", None)
    blind = uncovered(cov, layer_values(data.genomes)) if isinstance(cov, dict) else {}
    return {"blind_to": blind, "blind": f"the predictions were blind to {', '.join(blind)}: {BLIND_WHY}"} if blind else {}


def _conformal(cfg: DictConfig, p: Any, held: Any) -> Any:
    from surrogate.fit import conformal_fit

    iv = cfg.get("interval") or {}
    split = {"data": " + ".join(f.name for f in _data_paths(cfg)),
             "split": f"train_val_test(seed={p.meta['test']['seed']}, test_frac={p.meta['test']['test_frac']})"}
    bins = iv.get("bins", 3)
    bins = int(bins) if isinstance(bins, int) else tuple(float(b) for b in bins)
    return conformal_fit(p, held, split, int(iv.get("n_mc", 10)), bins, int(cfg.seed), float(iv.get("level", 0.9)))


def _pairwise(cfg: DictConfig, p: Any, held: Any) -> Any:
    """P(lower μ trains better | Δμ) on the held-out rows (surrogate.pairwise), with its grouped check."""
    from surrogate.fit import pairwise_fit

    split = {"data": " + ".join(f.name for f in _data_paths(cfg)),
             "split": f"train_val_test(seed={p.meta['test']['seed']}, test_frac={p.meta['test']['test_frac']})"}
    return pairwise_fit(p, held, split, int(cfg.seed))


def _calibrated_stem(cfg: DictConfig, stem: Path) -> Path:
    """Where mode=calibrate writes: `out=` (a copy), else the checkpoint's own sidecar. A shipped checkpoint is
    the package's data, which a calibration must not rewrite in place (a re-run moves its 6th digit)."""
    from forge.runtime.config import data_dir
    from surrogate.checkpoints import checkpoint_stem

    if cfg.get("out"):
        out = checkpoint_stem(cfg.out)
        check_writable(out.with_suffix(".safetensors"), "out")
        return out
    if stem.parent.resolve() == (data_dir() / "surrogate").resolve():
        raise UserError(f"ckpt={cfg.ckpt or stem.name} is a shipped checkpoint, which mode=calibrate does not rewrite; "
                        "allowed: out=<stem> to write a calibrated copy there, or ckpt=<your own checkpoint>")
    return stem


def _calibrate(cfg: DictConfig) -> dict:
    """Conformal interval of a checkpoint from the held-out rows of the split it was trained on (re-made from
    the sidecar's test seed/fraction and checked against its training-data hash), written into its sidecar."""
    from surrogate.checkpoints import resolve_checkpoint
    from surrogate.predictor import DEFAULT
    from surrogate.loading import load_predictor

    stem = resolve_checkpoint(cfg.ckpt or DEFAULT)
    p = load_predictor(stem)
    t = p.meta.get("test") or {}
    if p.conformal is not None and "folds" in p.conformal.provenance:  # surrogate.crossconf: every label trained it
        raise UserError(f"{stem.name} is calibrated cross-conformally on grouped out-of-fold rows (it has no held-out "
                        "split); allowed: a checkpoint with a test split, or re-run bench/fit_paper_all.py "
                        "--calibrate-only for this one")
    if not t.get("test_frac") or not t.get("n_test"):
        raise UserError(f"{stem.name}: no held-out split recorded (test_frac = 0); allowed: a checkpoint trained "
                        "with test_frac > 0, whose test rows calibrate it")
    train, _, held = train_val_test(_labels(cfg), int(t["seed"]), float(t["test_frac"]))
    if train.data_hash() != p.meta.get("data_hash"):
        raise UserError(f"data={_data_path(cfg)} does not re-make {stem.name}'s training split (hash "
                        f"{train.data_hash()} != {p.meta.get('data_hash')}); allowed: the label file it was trained on")
    dest = _calibrated_stem(cfg, stem)
    p.conformal = _conformal(cfg, p, held)
    p.pairwise = _pairwise(cfg, p, held)
    if dest != stem:  # a calibrated copy: the same weights beside the new sidecar
        atomic_write_bytes(dest.with_suffix(".safetensors"), stem.with_suffix(".safetensors").read_bytes())
    atomic_write_json(dest.with_suffix(".json"), p.sidecar())
    return {"mode": "calibrate", "checkpoint": str(dest.with_suffix(".json")), "n_rows": len(held),
            "cv_check": p.conformal.provenance["cv_check"],
            "pairwise_check": {"max_error": p.pairwise.provenance["check"]["max_error"]}}


def _finetune(cfg: DictConfig) -> dict:
    from surrogate.fit import finetune
    from surrogate.predictor import DEFAULT

    if not (cfg.get("new") and cfg.get("out")):
        raise UserError("mode=finetune needs new=<new labels> and out=<checkpoint stem> (data= is the replay set)")
    check_writable(Path(f"{cfg.out}.safetensors"), "out")
    if len(_data_paths(cfg)) != 1:
        raise UserError(f"mode=finetune: data={_data_path(cfg)} is several files; allowed: one replay label file")
    p = finetune(cfg.ckpt or DEFAULT, cfg.new, _data_paths(cfg)[0], cfg.ratio, cfg.ft_epochs,
                 cfg.ft_lr, cfg.ft_batch, cfg.seed)
    return {"mode": "finetune", "checkpoint": str(p.save(cfg.out)), **p.meta["finetune"]}


def _compare(cfg: DictConfig, out: Path) -> dict:
    data = _labels(cfg)
    models = list(cfg.models)
    save = out / run_folder.CHECKPOINTS_DIR if cfg.get("save_ckpt") else None
    from forge.runtime.steps import active

    res = compare(data, models, int(cfg.seeds), int(cfg.seed), float(cfg.test_frac), save_dir=save,
                  workers=int(cfg.get("workers", 1)), step=active().step)  # run()'s Steps counts the fits
    n_test = res[models[0]]["runs"][0]["n_test"]
    write_markdown(out / run_folder.SURROGATE_TABLE, res, n_test, int(cfg.seeds))
    return {"mode": "compare", "data": str(_data_path(cfg)), **_data_info(data),
            "seeds": int(cfg.seeds), "models": {m: {"summary": r["summary"], "runs": r["runs"], "fit_s": r["fit_s"]}
                                                for m, r in res.items()}, "table": str(out / run_folder.SURROGATE_TABLE)}


def run(cfg: DictConfig) -> dict:
    """Dispatch on `cfg.mode`; writes and returns the summary."""
    plugins.trust(cfg)  # the user's own config: a model class named in it is theirs to run
    if cfg.mode not in MODES:
        raise UserError(f"mode={cfg.mode!r} is unknown; allowed: {' | '.join(MODES)}")
    torch.set_num_threads(int(cfg.get("threads", 2)))
    out = _out_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    from forge.shell.tracking import log_to, node_for

    from forge.runtime.steps import Steps

    unit, total = ("fit", _fits(cfg)) if cfg.mode == "compare" else ("epoch", _epochs(cfg))
    steps = Steps("forge-surrogate", f"mode={cfg.mode}: {unit}s", total, enabled=bool(cfg.get("progress", True)),
                  lazy=True, unit=unit)
    with log_to(node_for(to_container(cfg.get("logger")), out, "forge-surrogate")), steps:  # curves in <out>/logs
        res = _compare(cfg, out) if cfg.mode == "compare" else {"train": _train, "eval": _eval, "finetune": _finetune,
                                                                   "calibrate": _calibrate}[cfg.mode](cfg)
    res["wall_s"] = round(time.perf_counter() - t0, 2)
    res["config"] = to_container(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]))
    atomic_write_json(out / run_folder.SUMMARY, res)
    return res


def _fits(cfg: DictConfig) -> int:
    """Fits `mode=compare` will run (seeds x models), for the progress count; 0 (no known end) while the options
    are not yet checked (compare refuses bad ones in one line)."""
    seeds, models = cfg.get("seeds"), cfg.get("models")
    ok = isinstance(seeds, int) and seeds > 0 and OmegaConf.is_list(models)
    return seeds * len(models) if ok else 0


def _epochs(cfg: DictConfig) -> int:
    """Epochs the job will train, for the progress count (0: not known in advance, a count with no end)."""
    s = cfg.get("surrogate") or {}
    if cfg.mode == "train":
        return int(s.get("epochs", 0) or 0) * int(s.get("n_members", 1) or 1)
    return int(cfg.get("ft_epochs", 0) or 0) if cfg.mode == "finetune" else 0


def human(res: dict) -> str:
    """The job's end in a few lines (summary.json and `--json` hold everything)."""
    from forge.runtime.steps import clock

    lines = [f"forge-surrogate mode={res.get('mode')} done in {clock(float(res.get('wall_s') or 0))}"]
    m = res.get("metrics") or {}
    if isinstance(m, dict) and m:
        lines.append("  " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                      for k, v in list(m.items())[:8]))
    lines += [f"  {k}: {res[k]}" for k in ("checkpoint", "table") if res.get(k)]
    if res.get("blind_to"):
        lines.append(f"  BLIND: {res['blind']} ({'; '.join(res['blind_to'].values())})")
    return "\n".join(lines)


@forge_main("forge-surrogate")
def _job(cfg: DictConfig) -> None:
    import json

    res = run(cfg)
    if cfg.get("json"):
        print(json.dumps({k: v for k, v in res.items() if k != "config"}, indent=2, default=str))
    else:
        print(human(res))


def main() -> None:
    """`forge-surrogate`: `--json` becomes json=true (the machine-readable summary)."""
    import sys

    sys.argv = [a for a in sys.argv if a != "--json"] + (["json=true"] if "--json" in sys.argv[1:] else [])
    _job()
