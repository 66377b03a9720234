"""`forge-serve`: serving a genome. Two commands, each a plain run function behind one @hydra.main:

    forge-serve afd   ...   (= command=afd)    optimal attention/FFN ratio, paper 001
    forge-serve pools ...   (= command=pools)  prefill/decode pool co-search, paper 003 (LLMShare)

The first bare word names the command and becomes the override `command=<it>`; everything else is Hydra.
"""
from __future__ import annotations

import sys
from typing import Any

from omegaconf import DictConfig
from rich.console import Console

from forge.errors import UserError
from forge import plugins
from forge.shell.app import forge_main
from forge.runtime.config import output_dir
from forge.disk.io import atomic_write_json
from forge.numeric import round_floats
from forge.disk import run_folder

COMMANDS = ("afd", "pools")


def run(cfg: Any) -> dict[str, Any]:
    """Dispatch on cfg.command; writes summary.json (and a plot) into the run directory."""
    plugins.trust(cfg)  # the user's own config: a backend class named in it is theirs to run
    cmd = str(cfg.get("command", "afd"))
    if cmd not in COMMANDS:
        raise UserError(f"command = {cmd!r} is unknown; allowed: {', '.join(COMMANDS)}")
    out = output_dir(cfg)
    if cmd == "afd":
        from search.serving.afd_run import run_afd

        s = run_afd(cfg, out)
    else:
        from search.serving.pools_run import run_pools

        s = run_pools(cfg, out)
    atomic_write_json(out / run_folder.SUMMARY, round_floats(s))  # fixed digits: the same file on every machine
    if not cfg.get("quiet", False):
        _print(s, out)
    return s


def _print(s: dict[str, Any], out: Any) -> None:
    c = Console()
    if s["command"] == "afd":
        c.print(f"[bold]AFD[/] {s.get('arch') or 'given α/β'} ({s['source']}, unit {s['unit']}): "
                f"r_A {s['r_A']:.3f}  r_C {s['r_C']:.3f}  r_peak {s['r_peak']:.3f}  [bold]r* {s['r_star']:.3f}[/]  "
                f"throughput* {s['throughput_star']:.4g} tokens/{s['unit']}/instance")
        if s.get("sim_max_rel_gap") is not None:
            c.print(f"simulator vs closed form: max |gap| {s['sim_max_rel_gap']:.1%} over r = {[r['r'] for r in s['sweep']]}")
    else:
        for name, r in s["runs"].items():
            c.print(f"[bold]{name}[/] init: HV {r['hv']:.4f}  ADRS {r.get('adrs', float('nan')):.4f}  "
                    f"front {len(r['front'])} designs  best cost×time vs baseline {r['best_product']:.3f}")
    c.print(f"summary: {out / run_folder.SUMMARY}  plot: {s.get('plot')}")


@forge_main("forge-serve")
def _hydra_main(cfg: DictConfig) -> None:
    run(cfg)


def main() -> None:
    """`forge-serve <command> overrides...`: the bare command word becomes `command=<command>`."""
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        sys.argv = [sys.argv[0], f"command={sys.argv[1]}", *sys.argv[2:]]
    _hydra_main()


if __name__ == "__main__":
    main()
