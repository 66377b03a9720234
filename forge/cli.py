"""CLI apps of the core: `forge-arch` (inspect one architecture) and `forge-space` (inspect a space).

Each is a thin @hydra.main around a plain `run(cfg) -> dict` that tests call directly.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from forge import plugins
from forge.shell.app import forge_main
from forge.runtime.config import conf_dir, data_dir, output_dir, to_container
from forge.genomes.genes import GLOBAL_GENES, LAYER_GENES
from forge.genomes.genome import Genome, GenomeError
from forge.lm.hooks import check_agreement
from forge.genomes.importers import load_genome
from forge.disk.io import atomic_write_json
from forge.spaces.space import load_space
from forge.lm.workload import analyze
from forge.disk import run_folder


def resolve_arch(arch: str) -> Genome:
    """A baseline name from data/archs, or a path to a genome YAML/JSON (ours or LLMForge's)."""
    p = Path(arch)
    if p.suffix in (".yaml", ".yml", ".json") or p.exists():
        return load_genome(p)
    known = data_dir() / "archs" / f"{arch}.yaml"
    if known.is_file():
        return load_genome(known)
    names = sorted(x.stem for x in (data_dir() / "archs").glob("*.yaml"))
    raise GenomeError(f"arch = {arch!r} is neither a genome file nor a known baseline; allowed: {', '.join(names)} or a path")


def arch_summary(genome: Genome) -> dict[str, Any]:
    a = analyze(genome)
    layers = genome.active_layers
    return {"name": genome.name, "id": genome.id, **a, **genome.global_values(),
            "layers": [g.canonical() for g in layers]}


def run_arch(cfg: Any) -> dict[str, Any]:
    plugins.trust(cfg)  # the user's plug-in modules first: a gene of theirs in the genome file
    genome = resolve_arch(str(cfg["arch"]))
    check_agreement([genome])  # plug-in hooks: the counts below are the model's, else one line
    s = arch_summary(genome)
    out = output_dir(cfg)
    atomic_write_json(out / run_folder.SUMMARY, s)
    if not cfg.get("quiet", False):
        _print_arch(s)
        Console().print(f"summary: {out / run_folder.SUMMARY}")
    return s


def _print_arch(s: dict[str, Any]) -> None:
    c = Console()
    c.print(f"[bold]{s['name'] or s['id']}[/]  id {s['id']}  " + "  ".join(f"{k} {g.show(s[k])}" for k, g in GLOBAL_GENES.items()))
    c.print(f"params {s['params']:,}  non-embedding {s['non_embedding_params']:,}  active layers "
            f"{s['n_active_layers']} ({s['n_attn_layers']} with attention)  KV {s['kv_bytes_per_token']:,} B/token (bf16)  "
            f"{s['flops_per_token'] / 1e6:,.1f} MFLOP/token")
    cols = [g.name for g in LAYER_GENES.values() if g.grid and (g.builtin or any(g.name in lay for lay in s["layers"]))]
    t = Table("#", *cols, "attn")
    for i, g in enumerate(s["layers"]):
        t.add_row(str(i), *(LAYER_GENES[k].show(g.get(k, LAYER_GENES[k].default)) for k in cols),
                  "yes" if g["attn"] else "identity")
    c.print(t)


def run_space(cfg: Any) -> dict[str, Any]:
    plugins.trust(cfg)  # the user's own config: a space class or plug-in module named in it is theirs to run
    space_cfg = to_container(cfg["space"])
    from forge.spaces.space import space_from_config

    space = space_from_config(space_cfg) if isinstance(space_cfg, dict) else load_space(str(space_cfg))
    s = space.summary()
    out = output_dir(cfg)
    atomic_write_json(out / run_folder.SUMMARY, s)
    if not cfg.get("quiet", False):
        c = Console()
        c.print(f"[bold]{s['name']}[/] ({s['attention']}): d_model {s['d_model']}, T {s['block_size']}, L_max {s['L_max']}")
        t = Table("field", "range")
        for k, v in s["ranges"].items():
            t.add_row(k, v)
        for k in space.searched_globals:  # a global gene the space searches (forge.genomes.genes.GLOBAL_GENES)
            t.add_row(k, ", ".join(map(str, s[k])))
        c.print(t)
        cp = s["configs_per_layer"]
        c.print(f"attention configurations per layer: GQA {cp['gqa']:,}  IHA {cp['iha']:,}")
    return s


@forge_main("forge-arch")
def arch_main(cfg: DictConfig) -> None:
    run_arch(cfg)


@forge_main("forge-space")
def space_main(cfg: DictConfig) -> None:
    run_space(cfg)


__all__ = ["run_arch", "run_space", "resolve_arch", "conf_dir"]
