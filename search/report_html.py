"""report.html's assembly: the runs table, the hypervolume and fingerprint tables, the inlined PNGs with their
captions and each run's section (search/report_page.py), rendered through the autoescaping Jinja2 template in
search/templates/. Kept apart from search/report.py, which finds the runs and draws the PNGs: this side only
turns their numbers and files into the page, every value from disk shown as text, never as markup.
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from forge.disk.io import atomic_write_text
from search.report_page import front_table, pareto_figure, plot_columns, plotly_js, run_config, settings, odds_note
from forge.disk import run_folder


CAPTIONS = {run_folder.HV_PNG: "Hypervolume (all objectives) against generation, mean ± std over seeds per recipe",
            run_folder.HV_LOSS_PARAMS_PNG: "Hypervolume (val_loss, params) against generation, mean ± std over seeds",
            run_folder.FINGERPRINT_PNG: "Per-substrate fingerprints: per-layer fields of the lowest-loss Pareto genomes "
                               "against relative depth"}


def num(x: Any, digits: int = 4) -> str:
    """A number at fixed precision; anything else (a hand-edited summary) as its text, escaped by the template."""
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else ("–" if x is None else str(x))


def _figure(path: Path) -> dict[str, str]:
    caption = CAPTIONS.get(path.name, f"Pareto projections ({path.stem}): loss against energy, TTFT and TPOT, "
                                      "coloured by generation, the Pareto archive circled")
    return {"data": base64.b64encode(path.read_bytes()).decode(), "caption": caption}


def _not_ruled_out(s: dict[str, Any], front: Any) -> str:
    """The 'not ruled out' cell: how many front members the best-predicted one does not beat with p >= 0.9
    (search.odds), of how many, and any gene the loss is blind to."""
    iv = s.get("loss_interval") or {}
    blind = f" (loss blind to {', '.join(iv['blind_to'])})" if iv.get("blind_to") else ""
    n = (s.get("loss_pairwise") or {}).get("n_not_ruled_out")
    return (f"{n} of {front} members" if isinstance(n, int) else "– (no pairwise odds)") + blind


def render_html(runs: list[dict[str, Any]], images: list[Path], stats: dict[str, Any], max_fronts: int = 12) -> str:
    """The page, through an autoescaping Jinja2 template shipped in search/templates/ (values are text); the
    first `max_fronts` runs get their front table, settings and interactive projections (search/report_page)."""
    from jinja2 import Environment, PackageLoader

    env = Environment(loader=PackageLoader("search", "templates"), autoescape=True)
    head = ["run", "recipe", "seed", "generations", "evaluations", "front", "not ruled out (best wins p < 0.9)", "HV",
            "HV(loss,params)", "wall s"]
    rows = []
    for r in runs:
        s = r["summary"]
        rows.append([r["dir"].name, r["label"], s.get("seed"), s.get("generations_done"), s.get("evaluations"),
                     s.get("archive_size"), _not_ruled_out(s, s.get("archive_size", "?")),
                     num(s.get("hypervolume", 0)), num(s.get("hypervolume_loss_params", 0)),
                     num(s.get("wall_s", 0), 1)])
    hvp = stats.get("hv_loss_params", {})
    hv_rows = [{"recipe": k, "hv_mean": num(v.get("mean")), "hv_std": num(v.get("std")),
                "hvp_mean": num(hvp.get(k, {}).get("mean")), "hvp_std": num(hvp.get(k, {}).get("std")),
                "seeds": v.get("seeds")} for k, v in sorted(stats.get("hv", {}).items())]
    fps = [{"backend": k, "depth": num(v.get("depth_mean"), 1), "n": v.get("n_genomes")}
           for k, v in sorted(stats.get("fingerprint", {}).items())]
    anchor = runs[0]["summary"].get("hv_anchor") if runs else None
    ref = anchor.get("ref", 2.0) if isinstance(anchor, dict) else 2.0
    fronts = [run_section(r, i) for i, r in enumerate(runs[:max_fronts])]
    return env.get_template("report.html").render(
        runs=runs, ref=ref, run_head=head, run_rows=rows, hv_rows=hv_rows, fingerprint_rows=fps,
        run_links=[f"front-{i}" if i < max_fronts else "" for i in range(len(runs))],  # a run's row -> its section
        figures=[_figure(p) for p in images], fronts=fronts, more_runs=max(len(runs) - max_fronts, 0),
        plotly_js=plotly_js() if fronts else "")


def run_section(r: dict[str, Any], i: int) -> dict[str, Any]:
    """One run's part of the page: its settings, its front table (knee marked) and its interactive projections."""
    from search.console import _knee, front_rows
    from search.suggest import rel

    s, rows, cfg = r["summary"], front_rows(r["dir"]), run_config(r["dir"])
    knee = _knee(rows, s.get("objectives") or [], s.get("maximize") or [])
    return {"n": i, "label": r["label"], "dir": rel(r["dir"]), "knee": knee, "odds": odds_note(r["dir"], rows, cfg, r["summary"]),
            "settings": settings(r["dir"], s, cfg), "table": front_table(r["dir"], rows, s, knee),
            "figure": pareto_figure(r, plot_columns(s), knee) if rows else None}


def write_html(runs: list[dict[str, Any]], images: list[Path], stats: dict[str, Any], path: Path) -> None:
    atomic_write_text(path, render_html(runs, images, stats))
