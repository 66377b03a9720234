"""What report.html shows about each run beyond the static figures: the front table a researcher picks from (id,
objectives, loss interval [lo, hi], parameters, the knee marked, the command that exports each member), the run's
settings, and interactive Pareto projections (plotly, its library embedded in the page so it works offline).

Every value here is data from a run folder: the template autoescapes it, the figures travel as JSON through
Jinja's `tojson` (safe inside <script>), and hover text is built from numbers and hex ids only.
"""
from __future__ import annotations

import html
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from forge.disk.io import as_float as _f
from search.suggest import export_command
from search.summary import predictor_label
from forge.disk import run_folder

KEY_COLUMNS = ("params",)  # shown for every run, objective or not


def _fmt(x: Any) -> str:
    v = _f(x)
    if v != v or v in (float("inf"), float("-inf")):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _name(node: Any) -> str:
    if isinstance(node, Mapping):
        return str(node.get("name") or str(node.get("_target_", "?")).rsplit(".", 1)[-1])
    return "–" if node is None else str(node)


def settings(run_dir: Path, summary: Mapping[str, Any], config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(setting, value) rows: what the run searched, on what, for which objectives, scored by what."""
    ev = config.get("evaluator") or {}
    backend = config.get("backend") or {}
    hardware = backend.get("hardware") if isinstance(backend, Mapping) else None
    predictor = ("real training (evaluator.kind=train)" if ev.get("kind") == "train"
                 else predictor_label(summary.get("loss_predictor")) or _name(ev.get("predictor")))
    iv = summary.get("loss_interval") or {}
    return [("space", str(summary.get("space", "?"))), ("backend", str(summary.get("backend", "?"))),
            ("machine (modelled)", _name(hardware or config.get("hardware"))),
            ("objectives", ", ".join(summary.get("objectives") or [])),
            ("constraints", ", ".join(summary.get("constraints") or []) or "none"),
            ("loss predictor", predictor),
            ("loss interval", f"{iv.get('method', 'none')}, level {iv.get('level')}"),
            ("algorithm", str(summary.get("algorithm", "?"))), ("seed", str(summary.get("seed", "?"))),
            ("generations", f"{summary.get('generations_done')} of {summary.get('generations')}"),
            ("evaluations", str(summary.get("evaluations", "?"))), ("status", str(summary.get("status", "?"))),
            ("folder", str(run_dir))]


def genome_line(genome: Mapping[str, Any]) -> str:
    """`14 layers (9 attention), heads 2-8, FFN 256-768`: the shape in one line (numbers only)."""
    layers = [lay for lay in genome.get("layers") or [] if lay.get("active", True)]
    attn = [lay for lay in layers if lay.get("attn")]

    def span(key: str, rows: Sequence[Mapping[str, Any]]) -> str:
        vals = sorted({int(lay[key]) for lay in rows if isinstance(lay.get(key), (int, float))})
        return "–" if not vals else str(vals[0]) if len(vals) == 1 else f"{vals[0]}-{vals[-1]}"

    return (f"{len(layers)} layers ({len(attn)} attention), heads {span('n_h', attn)}, kv heads "
            f"{span('n_kv', attn)}, FFN {span('d_ff', layers)}")


def page_export(run_dir: Path, gid: str) -> str:
    """The page's export command of one genome: `select=id:<12>` into `exported-<8>`, a folder of its own, never
    the `exported/` the console's `next:` export writes (both were refused after the other had run)."""
    return export_command(run_dir, select=f"id:{gid[:12]}", base=f"exported-{gid[:8]}")


def front_table(run_dir: Path, rows: list[dict[str, Any]], summary: Mapping[str, Any], knee: str | None,
                limit: int | None = None) -> dict[str, Any]:
    """Header and rows of one run's front, lowest predicted loss first (every member: the page scrolls the table,
    so its budget filter counts the whole front); each row carries its `p #1` (search.odds: P that the
    best-predicted member trains better), its group, its raw values (the page sorts and filters on them) and its
    export command. The odds curve goes with it: under a budget the page states p #1 against the best member it
    still shows (search.odds.p_best on the shown rows), not against one the budget hid."""
    from search.odds import loss_groups, p_best, run_odds

    objs = [o for o in summary.get("objectives") or [] if o != "val_loss"]
    cols = [*objs, *(c for c in KEY_COLUMNS if c not in objs)]
    head = ["#", "p #1", "", "id", "loss μ", "loss interval [lo, hi]", *cols, "export"]
    odds = run_odds(summary)
    p1, groups = p_best(rows, odds), loss_groups(rows, odds)
    out = []
    for j, r in enumerate(rows):
        if limit is not None and j >= limit and r["id"] != knee:
            continue
        m = r.get("metrics") or {}
        lo, hi = _f(m.get("loss_lo")), _f(m.get("loss_hi"))
        out.append({"n": j + 1, "knee": r["id"] == knee, "id": r["id"], "short": r["id"][:8],
                    "p1": ("best" if p1[j] != p1[j] else f"{p1[j]:.2f}") if p1 is not None else "–",
                    "p1_v": ("0" if p1[j] != p1[j] else repr(float(p1[j]))) if p1 is not None else "",
                    "group": int(groups[j]) if groups is not None else "–",
                    "mu": _fmt(m.get("mu", m.get("val_loss"))), "mu_v": _raw(m.get("mu", m.get("val_loss"))),
                    "interval": f"[{lo:.3f}, {hi:.3f}]" if lo == lo and hi == hi else "–",
                    "cells": [(_fmt(m.get(c)), _raw(m.get(c))) for c in cols], "select": f"id:{r['id'][:12]}",
                    "export": page_export(run_dir, r["id"])})
    curve = {"x": list(odds.x), "p": list(odds.p)} if odds is not None else None  # the page re-reads p #1 under a budget
    return {"head": head, "cols": cols, "rows": out, "more": max(len(rows) - len(out), 0), "odds": curve}


def _raw(x: Any) -> str:
    """A cell's value for sorting and the budget filter (a number as text; '' when there is none)."""
    v = _f(x)
    return repr(v) if v == v and abs(v) != float("inf") else ""


def odds_note(run_dir: Path, rows: list[dict[str, Any]], config: Mapping[str, Any],
              summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """Group sizes (search.odds), the plain statement and the `forge-verify ... k=` command that trains the
    members most likely to hold the true best; None when the run's predictor carries no pairwise odds."""
    from search.odds import decide_lines, group_sizes, loss_groups, run_odds

    odds = run_odds(summary)
    groups = loss_groups(rows, odds)
    if groups is None:
        return None
    lines = decide_lines(run_dir, rows, odds, config.get("protocol"))
    say = " ".join(x.lstrip("# ") for x in lines[:-1]).rstrip(":") if lines else ""
    return {"sizes": group_sizes(groups), "say": say, "command": lines[-1] if lines else ""}


def hover(r: Mapping[str, Any], cols: Sequence[str]) -> str:
    m = r.get("metrics") or {}
    lo, hi = _f(m.get("loss_lo")), _f(m.get("loss_hi"))
    lines = [f"<b>{html.escape(str(r['id'])[:12])}</b>", html.escape(genome_line(r.get("genome") or {})),
             f"loss μ {_fmt(m.get('mu', m.get('val_loss')))}"
             + (f" in [{lo:.3f}, {hi:.3f}]" if lo == lo and hi == hi else ""),
             *(f"{html.escape(c)} {_fmt(m.get(c))}" for c in cols)]
    return "<br>".join(lines)


def pareto_figure(run: Mapping[str, Any], cols: Sequence[str], knee: str | None) -> dict[str, Any]:
    """Loss against each cost column: the feasible archive coloured by generation, the front on top; each point
    carries its export command (`customdata`: `id:` takes any evaluated genome), shown by the page when the point
    is clicked: the point plotly hovers is the one clicked, so the tooltip and the command name one genome."""
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

    front = run["pareto"]
    on_front = {r["id"] for r in front}  # a front member is drawn once, on top: its click is never the archive's
    archive = [r for r in run["archive"] if r.get("feasible") and r["id"] not in on_front]
    fig = make_subplots(rows=1, cols=len(cols), shared_yaxes=True, horizontal_spacing=0.04)
    archive_cmds = [page_export(run["dir"], r["id"]) for r in archive]
    front_cmds = [page_export(run["dir"], r["id"]) for r in front]
    for k, c in enumerate(cols, start=1):
        fig.add_trace(go.Scatter(
            x=[_f(r["metrics"].get(c)) for r in archive], y=[_f(r["metrics"].get("val_loss")) for r in archive],
            mode="markers", name="archive", legendgroup="archive", showlegend=k == 1,
            marker={"size": 5, "color": [r.get("generation", 0) for r in archive], "colorscale": "Viridis",
                    "opacity": 0.55, "showscale": k == len(cols), "colorbar": {"title": "generation"}},
            hovertext=[hover(r, cols) for r in archive], hoverinfo="text", customdata=archive_cmds), row=1, col=k)
        fig.update_xaxes(title_text=c, row=1, col=k)
    for k, c in enumerate(cols, start=1):  # after every archive trace: the front is the top layer everywhere
        fig.add_trace(go.Scatter(
            x=[_f(r["metrics"].get(c)) for r in front], y=[_f(r["metrics"].get("val_loss")) for r in front],
            mode="markers", name="Pareto front (click: export command)", legendgroup="front", showlegend=k == 1,
            marker={"size": [13 if r["id"] == knee else 9 for r in front], "color": "rgba(220,20,60,0.12)",
                    "line": {"color": "crimson", "width": 1.5},
                    "symbol": ["star" if r["id"] == knee else "circle" for r in front]},
            hovertext=[hover(r, cols) + ("<br><b>knee</b>" if r["id"] == knee else "") for r in front],
            hoverinfo="text", customdata=front_cmds),
            row=1, col=k)
    fig.update_yaxes(title_text="val_loss (predicted)", row=1, col=1)
    fig.update_layout(height=420, margin={"l": 60, "r": 20, "t": 30, "b": 50}, hovermode="closest",
                      legend={"orientation": "h", "y": 1.12}, template="plotly_white")
    return json.loads(fig.to_json())


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js itself, from the installed package: embedded in the page, so it needs no network."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def run_config(run_dir: Path) -> dict[str, Any]:
    import yaml

    p = Path(run_dir) / run_folder.CONFIG
    try:
        return dict(yaml.safe_load(p.read_text()) or {}) if p.is_file() else {}
    except yaml.YAMLError:
        return {}


COST = ("energy_per_token_uj", "ttft_ms", "tpot_ms")  # the default Pareto plot's x axes


def plot_columns(summary: dict[str, Any]) -> list[str]:
    """The x axes of the Pareto plot: the run's objectives other than the loss (COST order first, so the
    default run draws what it always drew), or COST when the run has no other objective."""
    objs = [o for o in summary.get("objectives") or [] if o != "val_loss"]
    return [c for c in COST if c in objs] + [o for o in objs if o not in COST] or list(COST)
