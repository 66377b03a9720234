"""forge-export: write selected Pareto genomes as a genome file, an IHA PyTorch model and a model card.

    forge-export run=<dir> select=pareto|knee|id:<id prefix>|min:<objective>|budget:<objective>:<value>
                 format=yaml|json|pt|safetensors|hf out=<dir>

`id:` takes any genome the run evaluated (archive.jsonl) or forge-verify trained (verify/verified.jsonl), saying
when it is not on the front.

`format` yaml/json picks the genome file (weights then go to safetensors); pt/safetensors picks the
weight file (the genome is then YAML). Weights are random (seeded GPT-2 init) unless trained ones
exist: `<weights>/<genome id>.safetensors|.pt`, or a label whose provenance names a `checkpoint`.
`load_exported(dir)` rebuilds the model from the exported files (tested with a forward pass).

`pareto.jsonl` is data: each folder is named from the id recomputed from the row's genome (a row whose stored
id differs is refused), and an `out=` folder that already holds an export is refused unless `overwrite=true`,
which then replaces each exported genome's folder whole (never a mix of two exports). Everything is written into
a hidden folder beside `out=` and moved in once whole (forge.disk.io.staged): a failed export leaves `out=` as it was.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from forge.genomes.genome import Genome, GenomeError, genome_from_dict
from forge.genomes.importers import load_genome
from forge.disk.io import as_float, atomic_write_json, atomic_write_text, check_writable, staged, usual_mode
from forge.numeric import argmin_by_id
from forge.disk.full import full_disk_at
from forge.runtime.signals import term_as_interrupt
from search.export_card import model_card
from search.odds import front_p_best
from search.run_files import read_summary, refuse_odd
from search.state import read_jsonl, require_complete
from search.errors import ExportError
from forge.disk import run_folder

FORMATS = ("yaml", "json", "pt", "safetensors", "hf")  # hf: a transformers folder (search/hf_export.py)


def _objectives(run: Path, rows: Sequence[dict[str, Any]]) -> list[str]:
    s = _summary(run)
    if s.get("objectives"):
        return list(s["objectives"])
    return sorted(rows[0]["metrics"]) if rows else []


def _maximized(run: Path) -> list[str]:
    return list(_summary(run).get("maximize") or [])


def _col(rows: Sequence[dict[str, Any]], name: str) -> np.ndarray:
    return np.array([as_float(r["metrics"].get(name), np.inf) for r in rows])


def select(rows: list[dict[str, Any]], spec: str, objectives: list[str],
           maximize: Sequence[str] = ()) -> list[dict[str, Any]]:
    """pareto (all), knee (closest to the ideal after min-max normalization; `maximize` names objectives
    whose ideal is their largest value), id:<id prefix>, min:<obj>, budget:<obj><=<v>."""
    if not rows:
        raise ExportError("the run's Pareto archive is empty; nothing to export")
    names = sorted(set(objectives) | set(rows[0]["metrics"]))
    if spec == "pareto":
        return list(rows)
    if spec == "knee":
        F = np.column_stack([_col(rows, o) * (-1.0 if o in maximize else 1.0) for o in objectives])
        lo, hi = F.min(0), F.max(0)
        Z = (F - lo) / np.where(hi > lo, hi - lo, 1.0)
        return [rows[argmin_by_id(np.linalg.norm(Z, axis=1), [r["id"] for r in rows])]]
    m = re.fullmatch(r"id:([0-9a-f]{4,64})", spec)  # one member by its id or a unique prefix (forge-report's table)
    if m:
        hit = [r for r in rows if str(r["id"]).startswith(m.group(1))]
        if len(hit) != 1:
            raise ExportError(f"select={spec}: {len(hit)} Pareto genomes have this id prefix; allowed: the id (or a "
                              "unique prefix) of one member of pareto.jsonl")
        return hit
    m = re.fullmatch(r"min:(\w+)", spec)
    if m:
        _check_name(m.group(1), names)
        return [rows[argmin_by_id(_col(rows, m.group(1)), [r["id"] for r in rows])]]
    m = re.fullmatch(r"budget:(\w+)\s*(?:<=|:)\s*([-+0-9.eE]+)", spec)  # ':' needs no shell/Hydra quoting
    if m:
        _check_name(m.group(1), names)
        ok = [r for r in rows if float(r["metrics"].get(m.group(1), np.inf)) <= float(m.group(2))]
        if not ok:
            raise ExportError(f"select={spec}: no Pareto genome meets the budget")
        return [min(ok, key=lambda r: float(r["metrics"].get(objectives[0], np.inf)))]
    raise ExportError(f"select={spec!r} is invalid; allowed: pareto | knee | id:<id prefix> | min:<objective> | "
                      f"budget:<objective><=<value> (or budget:<objective>:<value>) with objective in {', '.join(names)}")


def chosen_design(run: str | Path, spec: str = "knee") -> dict[str, Any]:
    """The selected Pareto row's id, objectives and design (array shape, precisions, batch) of a run."""
    run = Path(run)
    rows = read_jsonl(run / run_folder.PARETO) if (run / run_folder.PARETO).is_file() else []
    if not rows:
        return {}
    r = select(rows, spec, _objectives(run, rows), _maximized(run))[0]
    design = dict(r.get("design") or {})
    prec = (r.get("genome") or {}).get("precision")
    if prec and "precision" not in design:
        design["precision"] = "/".join(prec[t] for t in ("weights", "acts", "kv"))
    return {"select": spec, "id": r["id"], **design, "metrics": r["metrics"]}


def _check_name(name: str, names: list[str]) -> None:
    if name not in names:
        raise ExportError(f"objective {name!r} is unknown in this run; allowed: {', '.join(names)}")


def _trained_weights(gid: str, weights: Path | None, labels: dict[str, dict[str, Any]]) -> Path | None:
    cands = [weights / f"{gid}{ext}" for ext in (".safetensors", ".pt")] if weights else []
    ck = labels.get(gid, {}).get("provenance", {}).get("checkpoint")  # from labels.jsonl: data, so only a file of
    names = [f"{gid}{ext}" for ext in (".safetensors", ".pt")]      # this genome's weights, never any file it names
    cands += [Path(ck)] if isinstance(ck, str) and Path(ck).name in names else []
    return next((p for p in cands if p.is_file()), None)


def _load_weights(model: Any, path: Path) -> None:
    """Trained weights into `model` (None: only read the file, to refuse an unreadable one before any work); a file
    that is not a checkpoint of this genome is refused, naming it."""
    import pickle

    import safetensors
    import torch

    unreadable = (RuntimeError, EOFError, KeyError, TypeError, ValueError, pickle.UnpicklingError,
                  getattr(safetensors, "SafetensorError", RuntimeError))
    try:
        if path.suffix == ".safetensors" and model is None:
            with safetensors.safe_open(str(path), "pt"):
                pass
        elif path.suffix == ".safetensors":
            from safetensors.torch import load_model

            load_model(model, str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
            if model is not None:
                model.load_state_dict(state)
    except unreadable as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
        raise ExportError(f"{path}: not a readable weights file for this genome ({first}); allowed: a .pt state "
                          "dict or .safetensors saved by forge-label / forge-verify for this genome") from None


def export_one(row: dict[str, Any], dest: Path, fmt: str, seed: int, weights: Path | None,
               labels: dict[str, dict[str, Any]], card: dict[str, Any], final: Path | None = None) -> dict[str, Any]:
    """One genome's folder written at `dest` (a staging folder) whose card names `final`, where it will live."""
    import torch
    from safetensors.torch import save_model

    from forge.lm.model import build_model
    from search.verify_report import measured_loss

    genome = genome_from_dict(row["genome"])
    model = build_model(genome, seed=seed)
    src = _trained_weights(genome.id, weights, labels)
    if src is not None:  # before anything is written: unreadable weights leave no half export behind
        _load_weights(model, src)
    dest.mkdir(parents=True, exist_ok=True)
    gfile = dest / (run_folder.GENOME_JSON if fmt == "json" else run_folder.GENOME_YAML)
    atomic_write_text(gfile, genome.to_json() if fmt == "json" else genome.to_yaml())
    wfile = dest / (run_folder.WEIGHTS_PT if fmt == "pt" else run_folder.WEIGHTS_SAFETENSORS)
    if fmt == "pt":
        torch.save(model.state_dict(), wfile)
    elif fmt != "hf":  # hf: write_hf below saves the weights under transformers' names
        save_model(model, str(wfile))
    info = {"id": genome.id, "genome_file": gfile.name, "weights_file": wfile.name,
            "weights": f"trained ({src})" if src else f"random init (seed {seed})",
            "params": model.num_params(), "n_layers": genome.n_active, "metrics": row["metrics"],
            "precision": genome.precision.to_dict() if genome.precision else None, "design": row.get("design"),
            "generation": row.get("generation"), **card,
            "measured_loss": measured_loss(weights.parent, genome.id) if src is not None and weights else None}
    if fmt == "hf":
        from search.hf_export import write_hf

        info["hf"] = write_hf(model, genome, dest, info)  # README.md: search/hf_card.py
    atomic_write_json(dest / run_folder.EXPORT_JSON, info)
    atomic_write_text(dest / run_folder.MODEL_CARD, model_card(info, genome, final or dest))
    usual_mode(dest)  # safetensors writes 0600: the weights get the user's umask like every other file
    return info


def _directed(objectives: Sequence[str], maximize: Sequence[str]) -> list[str]:
    """Objective names with their direction, as the card lists them."""
    return [f"{o} ({'max' if o in maximize else 'min'})" for o in objectives]


def exported_modules(folder: Path) -> list[str]:
    """The plug-in modules the export's run recorded for its genes (export.json: names to show, never imported)."""
    try:
        names = json.loads((Path(folder) / run_folder.EXPORT_JSON).read_text()).get("plugin_modules") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [str(n) for n in names if isinstance(n, str) and n.replace(".", "").replace("_", "").isalnum()]


def load_exported(folder: str | Path) -> tuple[Genome, Any]:
    """(genome, model) rebuilt from an exported folder's genome file and weights. Installed plug-ins (entry points)
    are imported first; a genome with a gene of a plug-in module not imported is one line naming
    `forge.plugins.load_modules([...])` with the modules its run recorded."""
    folder = Path(folder)
    gfile = next((folder / n for n in (run_folder.GENOME_YAML, run_folder.GENOME_JSON) if (folder / n).is_file()), None)
    wfile = next((folder / n for n in (run_folder.WEIGHTS_SAFETENSORS, run_folder.WEIGHTS_PT) if (folder / n).is_file()), None)
    if gfile is None or wfile is None:
        raise ExportError(f"{folder}: not an export folder (needs genome.yaml|json and model.safetensors|pt)")
    from forge import plugins
    from forge.genomes.genome_checks import GENE_HINT, in_python
    from forge.lm.model import build_model

    plugins.load_installed()  # as every command does: an installed plug-in's genes are known here too
    try:
        genome = load_genome(gfile)
    except GenomeError as e:
        if GENE_HINT not in str(e):
            raise
        raise in_python(e, exported_modules(folder)) from None
    model = build_model(genome)
    if (folder / "modeling_forge.py").is_file():  # format=hf: weights under transformers' names
        from search.hf_export import load_hf_weights

        load_hf_weights(model, wfile)
    else:
        _load_weights(model, wfile)
    return genome, model.eval()


def run(cfg: Any) -> dict[str, Any]:
    from forge.runtime.config import to_container

    from forge import plugins
    from forge.shell import plugin_use

    plugins.trust(cfg)  # the user's plug-in modules (a gene of theirs) before any genome is read
    c = to_container(cfg)
    run_dir = Path(str(c.get("run") or ""))
    refuse_odd(run_dir, (run_folder.PARETO, run_folder.CONFIG, run_folder.SUMMARY), ExportError)  # a FIFO: named as one
    if not (run_dir / run_folder.PARETO).is_file():
        raise ExportError(f"run={c.get('run')!r}: no pareto.jsonl there; allowed: a forge-search run directory")
    plugin_use.require(run_dir)
    fmt = str(c.get("format", "safetensors"))
    if fmt not in FORMATS:
        raise ExportError(f"format={fmt!r} is invalid; allowed: {' | '.join(FORMATS)}")
    if fmt == "hf":
        from search.hf_export import require_transformers

        require_transformers()
    status = require_complete(run_dir, bool(c.get("allow_partial", False)), "run")
    rows = read_jsonl(run_dir / run_folder.PARETO)
    weights = Path(c["weights"]) if c.get("weights") else None
    chosen, note = _chosen(run_dir, rows, str(c.get("select", "knee")), weights)
    run_cfg = _run_config(run_dir)
    card = {"run": str(run_dir), "loss_interval": _summary(run_dir).get("loss_interval"),
            "loss_predictor": _summary(run_dir).get("loss_predictor"),
            "objectives": _directed(_objectives(run_dir, rows), _maximized(run_dir)),
            "backend": run_cfg.get("backend"), "workload": run_cfg.get("workload"),
            "evaluator": run_cfg.get("evaluator"), "space": _space_name(run_cfg.get("space")),
            "tokenizer_source": _tokenizer(c, fmt, chosen), "plugin_modules": plugin_use.needed(run_dir),
            "front_p_best": front_p_best(rows, _summary(run_dir), chosen)}
    labels = {r["genome_id"]: r for r in read_jsonl(run_dir / run_folder.LABELS)}
    ids = [checked_id(r, run_dir) for r in chosen]
    out = check_writable(Path(c.get("out") or "exported"), "out")
    check_overwrite(out, ids, bool(c.get("overwrite", False)))
    from forge.runtime.steps import Steps

    for gid in ids:  # an unreadable weights file is refused in one line, before the progress opens
        if (src := _trained_weights(gid, weights, labels)) is not None:
            _load_weights(None, src)
    # written beside out=, moved in once whole: a failure (a full disk), Ctrl-C or SIGTERM leaves out= as it was
    with term_as_interrupt(), full_disk_at(out), staged(out) as stage, Steps(
            "forge-export", f"writing format={fmt}", len(ids), unit="genome", lazy=True,
            enabled=bool(c.get("progress", False))) as st:  # lazy: a failure before the first genome is one line
        done = []
        for gid, r in zip(ids, chosen):
            done.append(export_one(r, stage / gid, fmt, int(c.get("seed", 0)), weights, labels, card, out / gid))
            st.step(gid[:8])
        summary = {"run": str(run_dir), "select": c.get("select"), "format": fmt, "out": str(out), "run_status": status,
                   **({"plugin_modules": card["plugin_modules"]} if card["plugin_modules"] else {}),
                   "exported": [{"id": d["id"], "params": d["params"], "weights": d["weights"]} for d in done],
                   **({"note": note} if note else {})}
        atomic_write_json(stage / run_folder.EXPORT_SUMMARY, summary)  # overwrite=true: each folder replaced whole
    return summary


def _space_name(node: Any) -> str | None:
    """The run's space name: a saved config holds the node, or (a run made from Python) its name."""
    return node if isinstance(node, str) else (node or {}).get("name") if isinstance(node, dict) else None


def _chosen(run_dir: Path, rows: list[dict[str, Any]], spec: str,
            weights: Path | None) -> tuple[list[dict[str, Any]], str | None]:
    """The selected rows, and a note when `id:` named a genome off the front (search.evaluated.chosen_rows)."""
    from search.evaluated import chosen_rows

    return chosen_rows(run_dir, rows, spec, weights,
                       lambda: select(rows, spec, _objectives(run_dir, rows), _maximized(run_dir)))


def checked_id(row: dict[str, Any], run_dir: Path) -> str:
    """The id recomputed from the row's genome: what names its folder. A row whose stored id differs (a
    hand-edited or hostile pareto.jsonl, e.g. id `../../x`) is refused before anything is written."""
    try:
        gid = genome_from_dict(row["genome"]).id
    except (KeyError, TypeError) as e:
        raise ExportError(f"{run_dir / run_folder.PARETO}: a row has no valid genome ({type(e).__name__}: {e}); "
                          "allowed: the rows forge-search wrote") from None
    if row.get("id") != gid:
        raise ExportError(f"{run_dir / run_folder.PARETO}: row id {row.get('id')!r} does not match its genome "
                          f"(recomputed id {gid}); allowed: the rows forge-search wrote")
    return gid


def holds_export(out: Path, ids: Sequence[str] = ()) -> bool:
    """Whether a folder already holds a forge-export (its summary, a genome folder with export.json, or a
    folder of one of `ids`)."""
    return out.is_dir() and ((out / run_folder.EXPORT_SUMMARY).is_file() or any(out.glob(f"*/{run_folder.EXPORT_JSON}"))
                             or any((out / gid).exists() for gid in ids))


def check_overwrite(out: Path, ids: Sequence[str], overwrite: bool) -> None:
    if not overwrite and holds_export(out, ids):
        raise ExportError(f"out={out} already holds an export; allowed: an empty or new folder, or overwrite=true "
                          "(replaces the exported genomes' folders)")


def _summary(run_dir: Path) -> dict[str, Any]:
    return read_summary(run_dir)


def _run_config(run_dir: Path) -> dict[str, Any]:
    from forge.disk.files import read_yaml_file

    p = run_dir / run_folder.CONFIG
    return (read_yaml_file(p, "run config") or {}) if p.is_file() else {}


def _tokenizer(c: dict[str, Any], fmt: str, chosen: list[dict[str, Any]]) -> str | None:
    """`tokenizer=<folder>` for format=hf, checked against every chosen genome's vocabulary before any writing."""
    src = c.get("tokenizer")
    if src and fmt == "hf":
        from search.hf_tokenizer import local_tokenizer

        for r in chosen:
            local_tokenizer(int(r["genome"].get("vocab_size", 50257)), str(src))
    return str(src) if src else None
