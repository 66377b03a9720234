"""The main job's last screen: a rich table of the Pareto front, then the run folder and the next commands.

Members are sorted by predicted loss, each with μ and its calibrated interval [lo, hi] (surrogate/conformal.py;
printed as the bounds, never ± a half-width: the two tails differ: it is failure risk), parameters, TTFT, TPOT
and energy. The knee (what `forge-export select=knee` picks) is marked. The `p #1` column is what a user acts on:
the calibrated probability that the best-predicted member trains better than this one (search.odds). `quiet=true`,
`json=true` or `--json` print the machine-readable summary instead (for scripts).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from forge.disk.io import as_float as _f
from search.constraints import constraint_line
from search.export import ExportError, select
from search.state import read_jsonl
from search.summary import predictor_label
from search.suggest import print_commands, rel
from surrogate.checkpoints import BLIND_WHY
from search.odds import RISK, RULE_OUT, decide_lines, group_sizes, loss_groups, p_best, run_odds
from forge.disk import run_folder

# (metric, header, scale, format): the cost and size columns after the loss
COLUMNS = (("params", "params (M)", 1e-6, "{:.1f}"), ("ttft_ms", "TTFT ms", 1.0, "sig"),
           ("tpot_ms", "TPOT ms", 1.0, "sig"), ("energy_per_token_uj", "energy µJ/tok", 1.0, "sig"))
MAX_ROWS = 30  # longer fronts print their best members and the knee; pareto.jsonl holds them all
DROP = ("energy_per_token_uj", "params", "tpot_ms", "#")  # left out first on a narrow terminal (all in front.csv)


def _fmt(x: Any, fmt: str = "{:.3f}", scale: float = 1.0) -> str:
    """`fmt` = "sig": 3 significant digits, thousands written out (no e-notation in a table)."""
    v = _f(x) * scale
    if not math.isfinite(v):
        return "–"
    if fmt == "sig":
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return fmt.format(v)


def _bound(v: float) -> str:
    """An interval bound: 3 decimals, or ±∞ where the calibration has no finite bound at this level."""
    return _fmt(v) if math.isfinite(v) else ("∞" if v > 0 else "−∞")


def front_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's Pareto rows, lowest predicted loss first."""
    p = Path(run_dir) / run_folder.PARETO
    rows = read_jsonl(p) if p.is_file() else []
    return sorted(rows, key=lambda r: (_f(r["metrics"].get("val_loss")), r["id"]))


def _knee(rows: Sequence[dict[str, Any]], objectives: Sequence[str], maximize: Sequence[str] = ()) -> str | None:
    try:
        return select(list(rows), "knee", list(objectives), maximize)[0]["id"] if rows and objectives else None
    except (ExportError, KeyError):
        return None


def front_table(rows: Sequence[dict[str, Any]], summary: dict[str, Any], limit: int = MAX_ROWS,
                width: int | None = None) -> Table:
    """The table itself (a rich Table); rows past `limit` are left out except the knee. With a `width` (the
    terminal's), cost columns are left out, least needed first (`DROP`), until nothing is cut: the id handle, the
    interval, TTFT and the marks always show whole (every column is in front.csv)."""
    cols = [*COLUMNS, *extra_columns(summary)]
    t = _table(rows, summary, limit, cols, numbered=True)
    for drop in DROP:
        if width is None or _width(t) <= width:
            break
        cols = [c for c in cols if c[0] != drop] if drop != "#" else cols
        t = _table(rows, summary, limit, cols, numbered=drop != "#", dropped=True)
    return t


def _width(t: Table) -> int:
    from rich.measure import Measurement

    con = Console(width=10_000)
    return Measurement.get(con, con.options, t).maximum


def handles(rows: Sequence[dict[str, Any]], n: int = 8) -> list[str]:
    """Each row's id prefix for `forge-export select=id:<prefix>`: `n` characters, more where two rows share them."""
    ids = [str(r["id"]) for r in rows]
    out = []
    for i in ids:
        k = n
        while k < len(i) and sum(j.startswith(i[:k]) for j in ids) > 1:
            k += 1
        out.append(i[:k])
    return out


def _table(rows: Sequence[dict[str, Any]], summary: dict[str, Any], limit: int, cols: list, numbered: bool,
           dropped: bool = False) -> Table:
    iv = summary.get("loss_interval") or {}
    level = iv.get("level")
    odds = run_odds(summary)
    p1 = p_best(rows, odds)
    knee = _knee(rows, summary.get("objectives") or [], summary.get("maximize") or [])
    t = Table(title=f"Pareto front: {len(rows)} member{'s' * (len(rows) != 1)} ({summary.get('status', '?')}, "
                    f"{summary.get('space', '?')} on {summary.get('backend', '?')})", title_justify="left",
              box=box.SIMPLE_HEAD)
    pct = f"{level:.0%}" if isinstance(level, float) and level < 1 else "interval"
    for head in (*(("#",) if numbered else ()), "", "p #1", "id", f"loss μ [{pct}]", *(c[1] for c in cols)):
        t.add_column(head, justify="left" if head in ("", "id") else "right", no_wrap=True)
    shown = [j for j, r in enumerate(rows) if j < limit or r["id"] == knee]
    ids = handles(rows)
    for j in shown:
        m = rows[j]["metrics"]
        lo, hi, mu = _f(m.get("loss_lo")), _f(m.get("loss_hi")), _f(m.get("mu", m.get("val_loss")))
        bounds = f" [{_bound(lo)}, {_bound(hi)}]" if not (math.isnan(lo) or math.isnan(hi)) else " [?]"
        t.add_row(*((str(j + 1),) if numbered else ()), "knee" if rows[j]["id"] == knee else "",
                  _p_cell(p1, j), ids[j], _fmt(mu) + bounds,
                  *(_fmt(m.get(k), fmt, s) for k, _, s, fmt in cols),
                  style="bold" if rows[j]["id"] == knee else None)
    t.caption = _caption(len(rows), len(shown), loss_groups(rows, odds), iv, dropped) + _predictor(summary)
    t.caption_justify = "left"
    return t


def extra_columns(summary: dict[str, Any]) -> list[tuple[str, str, float, str]]:
    """A column for every objective or constrained metric the fixed columns do not show (by its name,
    ↑ when maximized), so a new objective shows up in the table with no other change."""
    shown = {"val_loss", *(c[0] for c in COLUMNS)}
    cons = [str(c).split()[0] for c in summary.get("constraints") or []]
    names = [n for n in dict.fromkeys([*(summary.get("objectives") or []), *cons]) if n not in shown]
    return [(n, n + (" ↑" if n in (summary.get("maximize") or []) else ""), 1.0, "sig") for n in names]


def violation_table(summary: dict[str, Any]) -> Table:
    """An empty front is a result: no genome met the constraints; show the least-violating ones and by how much."""
    cons = ", ".join(summary.get("constraints") or []) or "the backend's feasibility"
    t = Table(title=f"No genome met the constraints ({cons}) in {summary.get('evaluations')} evaluations; "
                    "the least-violating ones:", title_justify="left", box=box.SIMPLE_HEAD)
    for head in ("#", "id", "violated by", "loss μ", *(c[1] for c in COLUMNS)):
        t.add_column(head, justify="left" if head in ("id", "violated by") else "right", no_wrap=True)
    for j, r in enumerate(summary["least_violating"]):
        m = r.get("metrics") or {}
        miss = "; ".join(f"{k} (by {_fmt(v, 'sig')})" for k, v in (r.get("violated") or {}).items()) or "–"
        t.add_row(str(j + 1), r["id"][:8], miss, _fmt(m.get("mu", m.get("val_loss"))),
                  *(_fmt(m.get(k), fmt, s) for k, _, s, fmt in COLUMNS))
    t.caption = "Relax a constraint (constraints=[...]) or pick another backend; the run itself is complete."
    t.caption_justify = "left"
    return t


def _p_cell(p1: Any, j: int) -> str:
    if p1 is None:
        return "–"
    return "best" if math.isnan(p1[j]) else f"{p1[j]:.2f}"


def _caption(n: int, n_shown: int, groups: Any, iv: dict[str, Any], dropped: bool = False) -> str:
    more = f"{n - n_shown} more in pareto.jsonl. " if n > n_shown else ""
    more += "Narrow terminal: some columns left out (all are in front.csv). " if dropped else ""
    blind = (f" LOSS BLIND TO {', '.join(iv['blind_to'])}: {BLIND_WHY} (evaluator.allow_blind)."
             if iv.get("blind_to") else "")
    if iv.get("level") is None or iv.get("method") in (None, "none"):
        interval = "No loss interval: the surrogate has no conformal calibration (forge-surrogate mode=calibrate)."
    else:
        interval = (f"Interval: {iv.get('method', '?')}, level {iv.get('level')}, failure risk, not a tie: {RISK}.")
    if groups is None:
        odds = "p #1: none, the loss predictor carries no pairwise calibration. "
    else:
        sizes = group_sizes(groups)
        odds = (f"p #1: probability that the best-predicted member (first row) trains better than this one, counted "
                f"on pairs its predictor never saw. A group starts where the previous group's first member wins "
                f"with p >= {RULE_OUT}: {len(sizes)} group{'s' * (len(sizes) != 1)} of {', '.join(map(str, sizes))}. ")
    return f"{more}{odds}{interval} Export a row: forge-export select=id:<id>.{blind}"


def _predictor(summary: dict[str, Any]) -> str:
    label = predictor_label(summary.get("loss_predictor"))
    return f" Loss predictor: {label}." if label else ""


def next_commands(run_dir: str | Path) -> list[str]:
    """Only commands that work here, as printed (search.suggest): `forge-verify` on this run when its training
    protocol and corpus can run on this machine, else a tiny recipe in the run's space family whose
    verification trains on this CPU (a `# ...` entry is a comment printed on its own line)."""
    from forge.runtime.needs import training_needs
    from search.carried import carry
    from search.suggest import export_command, quote, rel, tiny_recipe, verify_command

    cmds = [" ".join([f"forge-report runs={quote(rel(run_dir))}", *carry(run_dir)]), export_command(run_dir)]
    cfg = _run_config(run_dir)
    needs = training_needs(cfg.get("protocol") or {}, cfg.get("corpus") or {})  # e.g. protocol=paper without a GPU
    recipe = tiny_recipe(cfg, run_dir) if needs else []
    if recipe:
        return [*cmds, "# real training of front picks, on this CPU:", *recipe]
    if needs:  # a user's space: no shipped space stands for it, so its own verify, where its protocol trains
        return [*cmds, f"# real training of front picks needs {needs[0].split(' (')[0]}; where it trains:",
                verify_command(run_dir, cfg)]
    return [*cmds, verify_command(run_dir, cfg)]


def show_end(summary: dict[str, Any], brief: dict[str, Any] | None = None, as_json: bool = False,
             console: Console | None = None) -> None:
    """Print the last screen: the JSON `brief` (scripts) or the front table with the next steps."""
    if as_json:
        print(json.dumps(brief, indent=2))
        return
    console = console or Console()
    if not console.is_terminal:  # piped or logged: no terminal width to respect, keep rows on one line
        console.width = max(console.width, 110)
    run_dir = summary.get("run_dir", "?")
    rows = front_rows(run_dir)
    if not rows and summary.get("least_violating"):
        console.print(violation_table(summary))
    else:
        console.print(front_table(rows, summary, width=console.width))
    console.print(f"hypervolume {_fmt(summary.get('hypervolume'), '{:.4f}')} after generation "
                  f"{summary.get('generations_done')} of {summary.get('generations')}, "
                  f"{summary.get('evaluations')} evaluations, {_fmt(summary.get('wall_s'), '{:.1f}')} s")
    if line := constraint_line(summary.get("constraint_use") or []):
        console.print(line, highlight=False, markup=False)
    console.print(f"run directory: {rel(run_dir)}", highlight=False, soft_wrap=True)
    nxt = next_commands(run_dir) if rows else next_commands(run_dir)[:1]  # no front: nothing to export or verify
    decide = decide_lines(run_dir, rows, run_odds(summary), _run_config(run_dir).get("protocol")) if rows else []
    if decide:
        print_commands(console, "decide", decide)
    print_commands(console, "next", nxt)


def _run_config(run_dir: str | Path) -> dict[str, Any]:
    from forge.disk.files import read_yaml_file

    p = Path(run_dir) / run_folder.CONFIG
    return (read_yaml_file(p, "run config") or {}) if p.is_file() else {}  # the one safe loader
