"""The model card (`README.md`) of a `forge-export format=hf` folder.

What a Hub reader needs and a local card does not: front matter (license, pipeline_tag, library, base data),
that every cost is an estimate of the named backend, which label protocol, corpus and tokenizer the predicted
loss refers to, and how to run the folder with `pipeline`. Paths are shown by their last component only: the
card travels with the folder, the exporting machine's directories do not.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from forge.runtime.config import data_dir
from forge.genomes.genome import Genome
from search.export_card import odds_line
from search.markdown import md_code, md_text
from forge.disk.io import loads
from forge.disk import run_folder

# what the labels of each shipped surrogate were measured under (space name -> protocol, corpus, tokenizer, HF id)
LOSS_BASIS = {
    "iha-paper": ("LLMForge's label protocol (paper App. B: trained from scratch, 655M tokens, sequence 512, "
                  "batch 128, AdamW lr 1e-3, bf16)", "MiniPile", "GPT-2 BPE (50,257 tokens)", "JeanKaddour/minipile"),
    "iha-tiny": ("Forge's cpu-proxy protocol (conf/protocol/cpu-proxy.yaml: 32,768 tokens from scratch on a CPU)",
                 "the source files of the Python standard library (Forge's `stdlib` corpus)",
                 "bytes (256 tokens, token = byte value)", None),
}
LOSS_BASIS["iha-tiny-swa"] = LOSS_BASIS["iha-tiny"]  # forgeformer-iha-tiny-swa: the same protocol, plus windowed genomes


def _name(x: Any) -> str:
    """A path shown by its last component; anything else as text."""
    s = str(x)
    return Path(s).name if ("/" in s or "\\" in s) else s


def loss_basis(info: dict[str, Any]) -> tuple[str, str, str, str | None]:
    """(protocol, corpus, tokenizer, HF dataset id) the run's loss refers to."""
    ev = info.get("evaluator") or {}
    run_cfg = _run_config(info.get("run"))
    if ev.get("kind") == "train":
        prot, corp = run_cfg.get("protocol") or {}, run_cfg.get("corpus") or {}
        name = corp.get("name") or corp.get("path") or "?"
        return (f"the `{md_code(prot.get('name', '?'))}` protocol ({md_text(prot.get('tokens', '?'))} tokens), trained "
                "by the search", md_text(_name(name)), md_text(corp.get("tokenizer", "byte")),
                corp.get("name") if corp.get("kind") == "hf" else None)
    pred = (info.get("loss_predictor") or {}).get("name") or ev.get("predictor")  # `auto` resolved (summary.json)
    space = _sidecar_space(pred) or (run_cfg.get("space") or {}).get("name") or info.get("space")
    return LOSS_BASIS.get(str(space), ("the labels the surrogate was fitted to", "unknown", "unknown", None))


def _sidecar_space(pred: Any) -> str | None:
    """The space a surrogate checkpoint was trained for (its sidecar JSON), for a shipped name or a path."""
    if not isinstance(pred, str):
        return None
    for p in (data_dir() / "surrogate" / f"{pred}.json", Path(f"{pred}.json")):
        if p.is_file():
            try:
                return loads(p.read_text()).get("space", {}).get("name")
            except (OSError, ValueError):
                return None
    return None


def _run_config(run: Any) -> dict[str, Any]:
    p = Path(str(run)) / run_folder.CONFIG if run else None
    from forge.disk.files import read_yaml_file

    return (read_yaml_file(p, "run config") or {}) if p is not None and p.is_file() else {}


def _predictor(info: dict[str, Any]) -> str:
    from search.summary import predictor_label

    label = predictor_label(info.get("loss_predictor"))
    return f" `{md_code(label)}`" if label else ""


def _blind(info: dict[str, Any]) -> str:
    from surrogate.checkpoints import BLIND_WHY

    genes = (info.get("loss_interval") or {}).get("blind_to")
    return (f"\n  **Blind to gene(s) {md_text(', '.join(map(str, genes)))}**: {md_text(BLIND_WHY)} (the search ran with "
            "`evaluator.allow_blind`)." if genes else "")


def tokenizer_note(genome: Genome, shipped: str | bool) -> str:
    if shipped and shipped != "byte" and shipped is not True:
        return (f"The folder ships its tokenizer (`tokenizer.json`), copied from `{shipped}` (found locally; its "
                f"{genome.vocab_size} tokens match the model's vocabulary).")
    if shipped:
        return ("The folder ships its tokenizer (`tokenizer.json`): bytes, token id = byte value, as Forge trains "
                "byte-vocabulary models.")
    if genome.vocab_size == 50257:
        return ("No tokenizer file is shipped (none was found offline: not in the Hugging Face cache, and no "
                "`forge-export tokenizer=<folder>` given): the vocabulary is GPT-2's BPE, e.g. "
                "`AutoTokenizer.from_pretrained(\"gpt2\")` or tiktoken's `gpt2` encoding.")
    return f"No tokenizer is shipped: vocabulary {genome.vocab_size} matches no tokenizer Forge trains with."


def front_matter(info: dict[str, Any], dataset: str | None) -> str:
    meta = {"license": "mit", "library_name": "transformers", "pipeline_tag": "text-generation",
            "tags": ["forge", "neural-architecture-search", "iha"]}
    if dataset:
        meta["datasets"] = [dataset]
    return "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n"


def hf_card(info: dict[str, Any], genome: Genome, why: str | None, tokenizer: str | bool, native: bool = False) -> str:
    """The whole README.md of an hf folder (or of its `llama/` native form)."""
    protocol, corpus, tok, dataset = loss_basis(info)
    backend = info.get("backend") or {}
    bname = backend.get("name") or backend.get("_target_", "?") if isinstance(backend, dict) else backend
    m = info.get("metrics", {})
    costs = "\n".join(f"| {md_text(k)} | {v:.6g} |" if isinstance(v, float) else f"| {md_text(k)} | {md_text(v)} |"
                      for k, v in sorted(m.items()) if k not in ("val_loss", "mu", "sigma", "loss_lo", "loss_hi"))
    weights = str(info.get("weights", "?"))
    weights = "trained (`forge-verify`)" if weights.startswith("trained") else weights
    native_line = ("" if native else "Native form: `llama/` (LlamaForCausalLM, no remote code needed)." if why is None
                   else f"No native transformers family fits this genome ({why}); it loads with its remote code.")
    lo, hi = m.get("loss_lo"), m.get("loss_hi")
    interval = f", interval [{lo:.4f}, {hi:.4f}]" if isinstance(lo, float) and isinstance(hi, float) else ""
    real = info.get("measured_loss")
    pred = f"{_fmt(m.get('val_loss'))}{interval}"
    loss = (f"{real:.4f}: measured on these weights by `forge-verify` (its verify.json; predicted before training by "
            f"the search's loss predictor{_predictor(info)}: {pred})" if isinstance(real, float) else
            f"{pred}: predicted by the search's loss predictor{_predictor(info)}, not measured on these weights")
    return f"""{front_matter(info, dataset)}
# Forge export {info['id']}

An IHA decoder (d_model {genome.d_model}, {info.get('n_layers')} active layers ({_attn(genome)} with attention: config.json's
`num_hidden_layers` counts those, its KV-cache slots; `num_blocks` counts all), {info.get('params', 0):,} parameters,
vocabulary {genome.vocab_size}, context {genome.block_size}) found by Forge's architecture search
(space `{md_code(info.get('space'))}`, generation {md_text(info.get('generation'))}). Weights: {md_text(weights)}.

## What the numbers are
- **Loss** {loss}. It refers
  to {protocol}, on {corpus}, tokenized as {tok}.{odds_line(info)}{_blind(info)}
- **Costs** (latency, energy, area): estimates of the `{md_code(_name(bname))}` hardware backend for the workload
  `{md_code(json.dumps(info.get('workload')))}`, not measurements.

| metric | value |
| --- | --- |
{costs}

## Use
```python
{use_snippet(tokenizer, native)}
```
{tokenizer_note(genome, tokenizer)}
{native_line}
"""


def use_snippet(tokenizer: str | bool, native: bool) -> str:
    """The card's first snippet, which runs as printed offline from inside the folder (its first line says so);
    with no tokenizer shipped it feeds token ids and says what a tokenizer would need."""
    remote = "" if native else ", trust_remote_code=True"  # the folder's modeling_forge.py (a native llama/ needs none)
    head = ("# offline, run inside this folder (else set `folder` to its path or Hub repo id)"
            + ("" if native else "; it runs the folder's own code, modeling_forge.py"))
    load = f'folder = "."\nmodel = AutoModelForCausalLM.from_pretrained(folder{remote})'
    if tokenizer:
        return (f"{head}\nfrom transformers import AutoModelForCausalLM, AutoTokenizer, pipeline\n{load}\n"
                f"tokenizer = AutoTokenizer.from_pretrained(folder{remote})\n"
                'generate = pipeline("text-generation", model=model, tokenizer=tokenizer)\n'
                'print(generate("Hello", max_new_tokens=8)[0]["generated_text"])')
    return (f"{head}; no tokenizer is shipped (see below), so this feeds token ids\nimport torch\n"
            f"from transformers import AutoModelForCausalLM\n{load}\n"
            "print(model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=8)[0].tolist())")


def _fmt(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def _attn(genome: Genome) -> int:
    return sum(1 for lay in genome.active_layers if lay.attn)
