"""`forge-verify run=<dir>`: the thin Hydra main around `search.verify.run` (conf/forge-verify.yaml).

    forge-verify run=outputs/search/<stamp>                    # 8 front picks + 8 random controls
    forge-verify run=<dir> k=4 control=4 refit=true            # then: forge-search evaluator.predictor=<dir>/verify/surrogate-verified

It shows one progress step per trained genome and ends with a short human summary; `--json` (or json=true)
prints the machine-readable brief instead.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from omegaconf import DictConfig

from forge.shell.app import forge_main


def _num(x: Any, fmt: str = "{:.3f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def human(b: dict[str, Any], wall_s: float) -> list[str]:
    """The few lines a researcher reads after a verification (every number is in verify.json)."""
    from forge.runtime.steps import clock
    from search.suggest import rel

    lines = [f"verified {b.get('n_picks')} front picks against {b.get('n_control')} random controls of "
             f"{rel(b.get('run', '?'))} in {clock(wall_s)} ({b.get('n_finite')} picks trained to a finite loss)"]
    if "spearman" in b:
        lines.append(f"  predicted vs real loss: Spearman {_num(b.get('spearman'), '{:.2f}')}, MAE "
                     f"{_num(b.get('mae'))}, interval coverage {_num(b.get('coverage'), '{:.0%}')} at "
                     f"{_num(b.get('interval_level'), '{:.0%}')}")
    hv = b.get("real_hv") or {}
    lines.append(f"  {winner_line(b.get('winner'), b.get('best_control'))}")
    lines.append(f"  real hypervolume: picks {_num(hv.get('picks'), '{:.4f}')}, control "
                 f"{_num(hv.get('control'), '{:.4f}')}")
    lines.append(f"  {b.get('cost', '')}")
    if (b.get("refit") or {}).get("refit"):
        r = b["refit"]
        lines.append(f"  refit: MAE on the picks {_num(r.get('mae_before'))} -> {_num(r.get('mae_after'))} "
                     f"(in-sample); use: {r.get('use', '')}")
    lines.append(f"figure: {rel(b.get('figure', '?'))}; every number: {rel(b.get('verify_json', '?'))}")
    return lines


def winner_line(win: dict[str, Any] | None, control: dict[str, Any] | None) -> str:
    """`best real loss: 2.900, pick ce6e910a (min:tpot_ms); control 3.068 (fdc7c5e4)`: the winner by its id."""
    pick = (f"{_num(win['real_loss'])}, pick {win['id'][:8]} ({win['role'].removeprefix('pick ')})" if win
            else "none (no pick trained to a finite loss)")
    ctrl = f"{_num(control['real_loss'])} ({control['id'][:8]})" if control else "n/a"
    beaten = " (the control trained better)" if win and control and control["real_loss"] < win["real_loss"] else ""
    return f"best real loss: {pick}; control {ctrl}{beaten}"


def export_comment(b: dict[str, Any]) -> str:
    """The comment above the `next:` export: which genome, and whether it gets the weights this verify trained."""
    win = b["winner"]
    what = f"# export the winner, {win['role'].removeprefix('pick ')} {win['id'][:8]} (real loss {_num(win['real_loss'])})"
    return what + (", with its trained weights:" if b.get("winner_weights") else
                   ": its label came from the store, so no trained weights were kept here (random init):")


def main_task(cfg: DictConfig) -> None:
    import time

    from search.suggest import print_commands
    from search.verify import brief, run

    as_json = bool(cfg.get("json"))
    t0 = time.perf_counter()
    b = brief(run(cfg))
    if as_json:
        print(json.dumps(b, indent=2))
        return
    from rich.console import Console

    console = Console()
    for line in human(b, time.perf_counter() - t0):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    if b.get("export_trained"):
        print_commands(console, "next", [export_comment(b), b["export_trained"]])


main_hydra = forge_main("forge-verify")(main_task)


def main() -> None:
    """`forge-verify`: `--json` becomes json=true (the machine-readable brief)."""
    from search.cli import json_argv

    sys.argv = [sys.argv[0], *json_argv(sys.argv[1:])]
    main_hydra()


if __name__ == "__main__":
    main()
