"""The model card of a `forge-export` folder (MODEL_CARD.md): what the numbers are, where they came from, how to
load it. The Hugging Face README card is search/hf_card.py."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forge.genomes.genes import LAYER_GENES
from forge.genomes.genome import Genome
from search.markdown import md_code, md_text
from search.summary import predictor_label
from surrogate.checkpoints import BLIND_WHY


def loss_line(info: dict[str, Any]) -> str:
    """The predicted loss with its calibrated interval and where the calibration came from (or why none)."""
    m, iv = info["metrics"], info.get("loss_interval") or {}
    mu, lo, hi = (m.get(k) for k in ("mu", "loss_lo", "loss_hi"))
    real = info.get("measured_loss")
    said = (f"Measured loss: {real:.4f} (these weights, trained by `forge-verify`; its verify.json). Predicted before "
            "training: " if isinstance(real, float) else "Predicted loss: ")
    if not all(isinstance(x, (int, float)) for x in (mu, lo, hi)):
        return f"{said}{md_text(mu)} (no calibrated interval: {md_text(iv.get('source', 'the run recorded none'))})."
    src = iv.get("source")
    if isinstance(src, dict):
        src = (f"calibrated on {src.get('n_rows')} held-out rows of {src.get('data')}, {src.get('split')}"
               if "split" in src else f"calibrated on {src.get('n_rows')} {src.get('rows')}")
    level = iv.get("level") if isinstance(iv.get("level"), (int, float)) else 0.9
    blind = (f" Blind to gene(s) {md_text(', '.join(map(str, iv['blind_to'])))}: {md_text(BLIND_WHY)} (run with "
             "evaluator.allow_blind)." if iv.get("blind_to") else "")
    return (f"{said}{mu:.4f}, {level:.0%} interval [{lo:.4f}, {hi:.4f}] ({md_text(iv.get('method'))}; {md_text(src)}: "
            "failure risk, not a tie)." + odds_line(info)
            + ("" if isinstance(real, float) else " A prediction, not a measurement: `forge-verify` trains it.") + blind)


def odds_line(info: dict[str, Any]) -> str:
    """What the run's pairwise odds say of this member against the front's best-predicted one ('' without odds)."""
    odds = info.get("front_p_best") or {}
    if info.get("id") not in odds:
        return ""
    p = odds[info["id"]]
    if p is None:
        return " It is the front's best-predicted member."
    return (f" The front's best-predicted member trains better than this one with probability {p:.2f} (the loss "
            "predictor's pairwise odds, counted on pairs it never saw).")


def model_card(info: dict[str, Any], genome: Genome, folder: Path | None = None) -> str:
    metrics = "\n".join(f"| {md_text(k)} | {md_text(v)} |" for k, v in sorted(info["metrics"].items()))
    cols = genome.shown_genes()
    cell = lambda g, k: "-" if LAYER_GENES[k].attention and not g.attn else LAYER_GENES[k].show(g.get(k))  # noqa: E731
    layers = "\n".join(f"| {i} | " + " | ".join(cell(g, k) for k in cols) + f" | {'yes' if g.attn else 'identity'} |"
                       for i, g in enumerate(genome.active_layers))
    where = json.dumps(str(folder.resolve()) if folder else info["id"])  # a full path: the snippet runs from anywhere
    return f"""# Forge export {info['id']}: an IHA decoder

IHA decoder found by forge-search (run `{md_code(info.get('run'))}`, generation {md_text(info.get('generation'))}).
Weights: {info['weights']}. Parameters: {info['params']:,}. Active layers: {info['n_layers']}.

## Objectives and metrics (as evaluated during the search)
Objectives: {md_text(', '.join(map(str, info.get('objectives') or ['not recorded'])))}.
{loss_line(info)}

| metric | value |
| --- | --- |
{metrics}

## Hardware / evaluation setting
- precision (weights/acts/kv): {genome.precision or 'the workload default'}
- design chosen by the backend: `{md_code(json.dumps(info.get('design')))}`
- backend: `{md_code(json.dumps(info.get('backend')))}`
- workload: `{md_code(json.dumps(info.get('workload')))}`
- evaluator: `{md_code(json.dumps(info.get('evaluator')))}`
- loss predictor: `{md_code(predictor_label(info.get('loss_predictor')) or 'not recorded')}`
- space: {md_text(info.get('space'))}

## Architecture ({genome.describe()})
| layer | {' | '.join(cols)} | attention |
| --- | {'--- | ' * len(cols)}--- |
{layers}

## Load
```python
{chr(10).join(python_load(info.get("plugin_modules"), where))}
```
"""


def python_load(modules: Any, where: str) -> list[str]:
    """The Python statements that load an export: its genes' plug-in modules first (when its run used any), then
    the folder (`where`: a Python string literal)."""
    names = [str(m) for m in modules or [] if isinstance(m, str)]
    first = ["from forge.plugins import load_modules", f"load_modules({names!r})"] if names else []
    return [*first, "from search.export import load_exported", f"genome, model = load_exported({where})"]
