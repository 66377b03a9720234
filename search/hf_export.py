"""forge-export format=hf: a found genome as a Hugging Face `transformers` folder.

The folder holds `config.json`, the stand-alone modeling file `modeling_forge.py` (IHA's per-layer
heterogeneity, loaded with `trust_remote_code=True`: forge_hf's transformers plumbing assembled with
forge/lm/model.py's own definitions, `modeling_source`), `model.safetensors` and a model card
(`README.md`). When the genome is homogeneous and fits Llama exactly (same n_h, n_kv, d_qk = d_v and
d_mlp in every active layer; SwiGLU, RMSNorm, RoPE, sequential residual, no identity attention,
bias none or all) a second folder `llama/` holds the native `LlamaForCausalLM` form: no remote code.
"""
from __future__ import annotations

import ast
import importlib.util
import inspect
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from forge.genomes.genes import BUILTIN, attention_genes, extra_globals
from forge.genomes.genome import Genome
from search.errors import HFExportError
from forge.disk import run_folder

EXTRA = "pip install -e '.[export]' in the Forge clone"
MODELING_FILE = "modeling_forge.py"
AUTO_MAP = {"AutoConfig": "modeling_forge.ForgeConfig", "AutoModelForCausalLM": "modeling_forge.ForgeForCausalLM"}


def require_transformers() -> None:
    """Fail in one line, before any work, when the optional `transformers` package is absent."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise HFExportError(f"format=hf needs the optional package transformers, which is not installed; "
                            f"allowed: {EXTRA}, or format=yaml|json|pt|safetensors") from None


def _window(gene: Any) -> int:
    """A layer's attention window (0 = full); genes that predate the window gene have none."""
    return int(getattr(gene, "window", 0) or 0)


def forge_config(genome: Genome, rope_base: float, norm_eps: float) -> dict[str, Any]:
    """ForgeConfig fields: the genome's globals plus one spec per active block (pruned slots dropped).

    Every registered gene (forge.genomes.genes) set off its default is written too; an identity-attention block drops
    its attention-only extras (a `window` means nothing there), so full-attention configs are unchanged."""
    new_attn = set(attention_genes()) - set(BUILTIN)
    layers = [{"attn": g.attn, **{k: v for k, v in g.to_dict().items()
                                  if k not in ("active", "attn") and (g.attn or k not in new_attn)}}
              for g in genome.active_layers]
    return {"vocab_size": genome.vocab_size, "hidden_size": genome.d_model,
            "max_position_embeddings": genome.block_size, "layers": layers, "mlp": genome.mlp,
            "norm": genome.norm, "bias": genome.bias, "pos": genome.pos, "parallel": genome.parallel,
            "rope_theta": rope_base, "norm_eps": norm_eps, "tie_word_embeddings": genome.tied,
            **({"genes": g} if (g := {x.name: getattr(genome, x.name) for x in extra_globals()}) else {})}


MODEL_MARK = "# FORGE-MODEL"  # the shell's `from forge.lm.model import ...` line, replaced at export
SHELL_ONLY = ("IHAModel", "build_model", "rope_tables")  # forge.lm.model's own plumbing


def model_definitions() -> list[str]:
    """forge/lm/model.py's imports (bar forge's own and __future__) and top-level definitions, verbatim, except its
    plumbing (`SHELL_ONLY`): a helper or a gene's meaning added there is exported with no edit here."""
    import forge.lm.model

    src = inspect.getsource(forge.lm.model)
    lines = src.splitlines(keepends=True)
    out = []
    for node in ast.parse(src).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("forge", "__future__"):
            continue
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in SHELL_ONLY:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.Assign, ast.AnnAssign)):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            out.append("".join(lines[first - 1:node.end_lineno]))
    return out


def hook_definitions() -> list[str]:
    """The plug-in genes' model meanings (forge.lm.model.Block.hooks, in run order), their source verbatim with the
    helpers they use from their modules (forge.lm.hook_export), so the export computes what the search's model does."""
    import forge.lm.model
    from forge.lm.hook_export import export_source

    return [export_source(forge.lm.model.Block.hooks)] if forge.lm.model.Block.hooks else []


def modeling_source() -> str:
    """The exported `modeling_forge.py`: forge_hf's shell with its forge.lm.model import replaced by forge/lm/model.py's
    definitions, so the exported model and the one the search trains share one source."""
    shell = resources.files("forge_hf").joinpath(MODELING_FILE).read_text()
    lines = shell.splitlines(keepends=True)
    mark = next(ln for ln in lines if MODEL_MARK in ln)
    parts = model_definitions()
    imports = "".join(p for p in parts if p.startswith(("import ", "from ")) and p not in lines)
    defs = "\n\n".join([*(p for p in parts if not p.startswith(("import ", "from "))), *hook_definitions()])
    return shell.replace(mark, f"{imports}\n# --- from forge/lm/model.py, verbatim (a gene's meaning is written there) ---\n"
                               f"{defs}\n# --- end of forge/lm/model.py ---\n", 1)


def load_modeling(path: Path) -> Any:
    """The exported modeling file as a module: the weights are written by the code that ships with them."""
    spec = importlib.util.spec_from_file_location(f"forge_export_modeling_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def llama_misfit(genome: Genome) -> str | None:
    """Why the genome is not exactly a Llama (None when it is)."""
    L = genome.active_layers
    shapes = {(g.n_h, g.n_kv, g.d_qk, g.d_v, g.d_mlp) for g in L}
    checks = [(genome.mlp == "swiglu", "mlp is not swiglu"), (genome.norm == "rmsnorm", "norm is not rmsnorm"),
              (genome.pos == "rope", "pos is not rope"), (not genome.parallel, "parallel residual"),
              (genome.bias in ("none", "all"), "bias=qkv (Llama biases q, k, v and o together)"),
              (all(g.attn for g in L), "identity-attention layers"),
              (not any(_window(g) for g in L), "sliding-window attention layers"),
              (len(shapes) == 1, "layers differ in (n_h, n_kv, d_qk, d_v, d_mlp)"),
              (all(g.d_qk == g.d_v for g in L), "d_qk != d_v"),
              (not any(g.extra for g in L), "layers set genes Llama lacks (" +
               ", ".join(sorted({k for g in L for k, _ in g.extra})) + ")")]
    return next((why for ok, why in checks if not ok), None)


def llama_config(genome: Genome, rope_base: float, norm_eps: float) -> dict[str, Any]:
    g = genome.active_layers[0]
    return {"vocab_size": genome.vocab_size, "hidden_size": genome.d_model, "intermediate_size": g.d_mlp,
            "num_hidden_layers": len(genome.active_layers), "num_attention_heads": g.n_h,
            "num_key_value_heads": g.n_kv, "head_dim": g.d_qk, "max_position_embeddings": genome.block_size,
            "rms_norm_eps": norm_eps, "rope_parameters": {"rope_type": "default", "rope_theta": rope_base},
            "attention_bias": genome.bias == "all", "mlp_bias": genome.bias == "all",
            "tie_word_embeddings": genome.tied, "hidden_act": "silu"}


def forge_state(sd: dict[str, Any]) -> dict[str, Any]:
    """forge.lm.model names → ForgeForCausalLM names (the base model sits under `model.`)."""
    return {k if k.startswith("lm_head.") else f"model.{k}": v for k, v in sd.items()}


def load_hf_weights(model: Any, path: Path) -> None:
    """Load a format=hf `model.safetensors` (ForgeForCausalLM names) back into forge.lm.model (strict)."""
    from safetensors.torch import load_file

    sd = {k.removeprefix("model."): v for k, v in load_file(str(path)).items()}
    if model.genome.tied:
        sd.setdefault("lm_head.weight", sd["wte.weight"])
    model.load_state_dict(sd)


LLAMA_NAMES = {"ln_attn": "input_layernorm", "ln_mlp": "post_attention_layernorm", "attn": "self_attn",
               "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


def llama_state(sd: dict[str, Any]) -> dict[str, Any]:
    """forge.lm.model names → LlamaForCausalLM names."""
    out = {}
    for k, v in sd.items():
        parts = k.split(".")
        if parts[0] == "blocks":
            parts = ["model", "layers", parts[1]] + [LLAMA_NAMES.get(p, p) for p in parts[2:]]
        elif parts[0] in ("wte", "ln_f"):
            parts = ["model", "embed_tokens" if parts[0] == "wte" else "norm"] + parts[1:]
        out[".".join(parts)] = v
    return out


def _save(hf_model: Any, state: dict[str, Any], dest: Path) -> None:
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:  # a tied head is the embedding
        raise HFExportError(f"weight names do not match the transformers model: missing {missing}, "
                            f"unexpected {unexpected}")
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a per-shard bar says nothing to a forge-export user
    try:
        hf_model.save_pretrained(str(dest))
    finally:
        if bar:
            hf_logging.enable_progress_bar()


def byte_tokenizer(block_size: int) -> Any:
    """Forge's byte vocabulary as a transformers fast tokenizer: a byte-level BPE whose 256 symbols are the bytes
    (GPT-2's byte-to-unicode map) with no merges, so token id i is byte i, exactly as Forge trains."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    b2u = bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={b2u[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=block_size)


def write_tokenizer(genome: Genome, dest: Path, source: str | None = None) -> str:
    """The tokenizer matching the genome's vocabulary, written into `dest` when one is at hand offline: bytes (built
    here), else `source` (a tokenizer folder the user names) or, for GPT-2's 50,257 BPE, the Hugging Face cache's
    `gpt2`. Returns what was written ("byte", the source's name) or "" (the card then says what to use)."""
    if genome.vocab_size == 256 and source is None:
        byte_tokenizer(genome.block_size).save_pretrained(str(dest))
        return "byte"
    from search.hf_tokenizer import local_tokenizer

    found = local_tokenizer(genome.vocab_size, source)
    if found is None:
        return ""
    name, tok = found
    tok.save_pretrained(str(dest))
    return name


def write_hf(model: Any, genome: Genome, dest: Path, info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the remote-code folder at `dest` (and `dest/llama/` where Llama fits); returns what was written.
    `info`: forge-export's record of the genome (metrics, run, backend) for the model card."""
    require_transformers()
    import transformers

    from search.hf_card import hf_card

    info = {"id": genome.id, "params": model.num_params(), "n_layers": genome.n_active, **(info or {})}
    cfg = model.cfg
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MODELING_FILE).write_text(modeling_source())
    hf = load_modeling(dest / MODELING_FILE)
    config = hf.ForgeConfig(**forge_config(genome, cfg.rope_base, cfg.norm_eps), auto_map=AUTO_MAP)
    _save(hf.ForgeForCausalLM(config).eval(), forge_state(sd), dest)
    why = llama_misfit(genome)
    tok = write_tokenizer(genome, dest, (info or {}).get("tokenizer_source"))
    if why is None:
        llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config(genome, cfg.rope_base,
                                                                                      cfg.norm_eps)))
        _save(llama.eval(), llama_state(sd), dest / "llama")
        if tok:
            shutil.copytree(dest, dest / "llama", dirs_exist_ok=True,
                            ignore=lambda d, names: [n for n in names if not n.startswith(("tokenizer", "special_",
                                                                                           "vocab", "merges"))])
    (dest / run_folder.HF_CARD).write_text(hf_card(info, genome, why, tok))
    if why is None:
        (dest / "llama" / run_folder.HF_CARD).write_text(hf_card(info, genome, None, tok, native=True))
    return {"folder": dest.name, "remote_code": MODELING_FILE, "native": "llama" if why is None else None,
            "not_native_because": why, "tokenizer": tok or None, "transformers": transformers.__version__}
