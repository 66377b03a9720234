"""Reading genomes from files: ours (`load_genome`) and the two public LLMForge formats, the label CSV
and the per-model YAML. It sits above `forge.genomes.genome`, which knows nothing of files in other formats.

CSV (`llmforge_iha_200M.csv`, see ../shared/data/README.md): one row per architecture with
`global_layer_mask` (a Python-literal list of 40 booleans) and `layer{i}_*` fields for i = 0..39.
`attention_variant` is `infinite` (IHA attention) or `identity` (bypassed). The release's globals are
d_model 768, block 1024, GPT-2 vocabulary 50,257, tied embeddings, no position table, GELU MLP and
bias-free norms and linears: the `iha-paper` space.

YAML: `name`, `n_embd`, `block_size`, optional `mlp_variant`, then `layers:` or
`n_layers` × `layer_template`. The format carries no vocabulary, bias or norm fields; they come from
the published configuration of a known model (`KNOWN_GLOBALS`) or from `defaults` the caller passes.
"""
from __future__ import annotations

import ast
import csv
import io
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

import yaml

from forge.disk.files import require_file
from forge.genomes.genome import Genome, GenomeError, LayerGene, genome_from_dict
from forge.disk.io import load_yaml, read_text

CSV_REQUIRED = ("global_n_embd", "global_block_size", "global_layer_mask", "val_loss")
CSV_GLOBALS = dict(vocab_size=50257, mlp="gelu", norm="layernorm", bias="none", tied=True, pos="rope")

# Published configs (../shared/reference/architectures.md), keyed by a normalized model name.
KNOWN_GLOBALS: dict[str, dict[str, Any]] = {
    "smollm2135m": dict(vocab_size=49152, mlp="swiglu", norm="rmsnorm", bias="none", tied=True, pos="rope"),
    "smollm2360m": dict(vocab_size=49152, mlp="swiglu", norm="rmsnorm", bias="none", tied=True, pos="rope"),
    "qwen2505b": dict(vocab_size=151936, mlp="swiglu", norm="rmsnorm", bias="qkv", tied=True, pos="rope"),
    "pythia160m": dict(vocab_size=50304, mlp="gelu", norm="layernorm", bias="all", tied=False, pos="rope",
                       parallel=True),
    "gpt2small": dict(vocab_size=50257, mlp="gelu", norm="layernorm", bias="all", tied=True, pos="learned"),
    "gpt2": dict(vocab_size=50257, mlp="gelu", norm="layernorm", bias="all", tied=True, pos="learned"),
    # google/gemma-3-270m config.json: gated GeLU-tanh MLP (3 matrices, our swiglu kind), RMSNorm, tied 262k vocab
    "gemma3270m": dict(vocab_size=262144, mlp="swiglu", norm="rmsnorm", bias="none", tied=True, pos="rope"),
}


def _norm_name(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


@dataclass(frozen=True)
class CsvRow:
    """One imported label row: the genome plus the release's own columns."""

    idx: int
    genome: Genome
    val_loss: float
    params: float  # millions, as in the release
    extras: dict[str, float]


def _variant(where: str, v: str) -> bool:
    if v not in ("infinite", "identity"):
        raise GenomeError(f"{where} = {v!r} is invalid; allowed: infinite | identity")
    return v == "infinite"


def _csv_genome(row: dict[str, str], line: int) -> Genome:
    try:
        mask = ast.literal_eval(row["global_layer_mask"])
    except (ValueError, SyntaxError):
        raise GenomeError(f"line {line}: global_layer_mask = {row['global_layer_mask']!r} is invalid; allowed: a list of booleans") from None
    if not isinstance(mask, list) or not all(isinstance(m, bool) for m in mask):
        raise GenomeError(f"line {line}: global_layer_mask = {mask!r} is invalid; allowed: a list of booleans")
    layers = []
    for i, active in enumerate(mask):
        p = f"layer{i}_"
        try:
            layers.append(LayerGene(
                n_h=int(row[p + "n_head"]), n_kv=int(row[p + "n_kv_group"]), d_qk=int(row[p + "n_qk_head_dim"]),
                d_v=int(row[p + "n_v_head_dim"]), d_mlp=int(row[p + "mlp_size"]), active=active,
                attn=_variant(f"line {line}: {p}attention_variant", row[p + "attention_variant"])))
        except (KeyError, ValueError, TypeError, GenomeError) as e:
            raise GenomeError(f"line {line}: layer {i}: {e}") from None
    return Genome(d_model=int(row["global_n_embd"]), block_size=int(row["global_block_size"]),
                  layers=tuple(layers), name=f"llmforge-{row.get('#idx', line)}", **CSV_GLOBALS)


def iter_llmforge_csv(path: str | Path, drop_nonfinite: bool = True) -> Iterator[CsvRow]:
    """Yield one CsvRow per line; a malformed line raises GenomeError naming its line number."""
    path = require_file(path, "LLMForge CSV")  # a folder or a FIFO is named as such, not "not found"
    with io.StringIO(read_text(path, "CSV file"), newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in CSV_REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise GenomeError(f"{path}: missing column(s) {', '.join(missing)}; allowed: the LLMForge label CSV "
                              f"(columns {', '.join(CSV_REQUIRED)}, layer<i>_*)")
        for line, row in enumerate(reader, start=2):
            try:
                loss = float(row["val_loss"])
            except (KeyError, TypeError, ValueError):
                raise GenomeError(f"{path}:{line}: val_loss = {row.get('val_loss')!r} is invalid; allowed: a number") from None
            if drop_nonfinite and not math.isfinite(loss):
                continue
            try:
                g = _csv_genome(row, line)
            except GenomeError as e:  # name the file, not only the line
                raise GenomeError(f"{path}: {e}") from None
            extras = {k: float(row[k]) for k in ("mem_bytes", "flops", "kv_cache_size") if row.get(k) not in (None, "")}
            yield CsvRow(int(row.get("#idx") or line), g, loss, float(row.get("params") or "nan"), extras)


def load_llmforge_csv(path: str | Path, drop_nonfinite: bool = True) -> tuple[list[CsvRow], int]:
    """All rows plus the number of non-finite labels dropped."""
    rows = list(iter_llmforge_csv(path, drop_nonfinite=False))
    keep = [r for r in rows if math.isfinite(r.val_loss)] if drop_nonfinite else rows
    return keep, len(rows) - len(keep)


def genome_from_llmforge_yaml(d: dict[str, Any], defaults: dict[str, Any] | None = None) -> Genome:
    """LLMForge per-model YAML → Genome; globals from KNOWN_GLOBALS by name, else `defaults`, else SwiGLU."""
    name = str(d.get("name", ""))
    glob: dict[str, Any] = dict(vocab_size=50257, mlp="swiglu", norm="rmsnorm", bias="none", tied=True, pos="rope")
    glob.update(KNOWN_GLOBALS.get(_norm_name(name), {}))
    glob.update(defaults or {})
    if "mlp_variant" in d:
        mv = d["mlp_variant"]
        if mv not in ("mlp", "swiglu"):
            raise GenomeError(f"mlp_variant = {mv!r} is invalid; allowed: mlp | swiglu")
        glob["mlp"] = "gelu" if mv == "mlp" else "swiglu"

    def gene(i: int, x: dict[str, Any]) -> LayerGene:
        try:
            return LayerGene(n_h=x["n_head"], n_kv=x["n_kv_group"], d_qk=x["n_qk_head_dim"], d_v=x["n_v_head_dim"],
                             d_mlp=x["mlp_size"], active=x.get("active", True),
                             attn=_variant(f"layers[{i}].attention_variant", x.get("attention_variant", "infinite")))
        except KeyError as e:
            raise GenomeError(f"layers[{i}] is missing field {e}; required: n_head, n_kv_group, n_qk_head_dim, n_v_head_dim, mlp_size") from None
        except GenomeError as e:
            raise GenomeError(f"layers[{i}]: {e}") from None

    if "layers" in d:
        layers = [gene(i, x) for i, x in enumerate(d["layers"])]
    elif "layer_template" in d and "n_layers" in d:
        layers = [gene(i, d["layer_template"]) for i in range(int(d["n_layers"]))]
    else:
        raise GenomeError("LLMForge YAML is missing 'layers' (or 'n_layers' + 'layer_template')")
    for k in ("n_embd", "block_size"):
        if k not in d:
            raise GenomeError(f"LLMForge YAML is missing field {k!r}")
    return Genome(d_model=int(d["n_embd"]), block_size=int(d["block_size"]), layers=tuple(layers),
                  name=name, **glob)


def load_genome(path: str | Path) -> Genome:
    """Read a genome YAML/JSON file (ours or the LLMForge per-model YAML)."""
    path = require_file(path, "genome file")
    try:
        data = load_yaml(read_text(path, "genome file"), path)
    except yaml.YAMLError as e:
        raise GenomeError(f"{path}: malformed YAML/JSON: {e}") from None
    if isinstance(data, dict) and "n_embd" in data:
        return genome_from_llmforge_yaml(data)
    try:
        g = genome_from_dict(data)
    except GenomeError as e:
        raise GenomeError(f"{path}: {e}") from None
    return g if g.name else replace(g, name=path.stem)
