"""forge-report: plots and one self-contained HTML report over search runs.

`runs` lists run directories or multirun folders (every `summary.json` below them is a run). It draws
- `hv.png` / `hv_loss_params.png`: hypervolume against generation, mean ± std over seeds per recipe
  (algorithm × space × backend), the Figure 7 comparison;
- `pareto_<run>.png`: loss against each other objective of the run (by default energy, TTFT and TPOT)
  of every evaluated genome, coloured by generation, with the Pareto archive outlined (Figure 10);
- `fingerprint.png`: per substrate, the per-layer fields of the top-50 non-dominated genomes (lowest
  loss first) interpolated on a relative-depth grid, mean ± std, identity-attention layers masked from
  the attention fields (Figure 8);
and `report.html` (titled Forge) with every image inlined as base64 and tables of the runs, the final
hypervolumes and the fingerprints, rendered through an autoescaping Jinja2 template (`search/templates/`,
assembled by search/report_html.py): every value from a summary.json is shown as text, never as markup.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from forge.disk.io import as_float as _f
from forge.genomes.genes import LAYER_GENES, attention_genes
from forge.disk.inert import inert
from forge.disk.io import atomic_write_json, check_writable
from search.report_html import num, write_html
from search.report_page import plot_columns
from search.run_files import read_summary
from search.state import read_jsonl, require_complete
from search.errors import ReportError
from forge.disk import run_folder

FIELDS = tuple(g.name for g in LAYER_GENES.values() if g.grid and g.builtin)  # the five shape genes
ATTN_FIELDS = attention_genes()


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise ReportError(f"runs: {p} does not exist; allowed: run directories or multirun folders")
        found = [p] if (p / run_folder.SUMMARY).is_file() else sorted(x.parent for x in p.rglob(run_folder.SUMMARY))
        if not found:
            raise ReportError(f"runs: no summary.json under {p}; allowed: forge-search run/multirun folders")
        out += found
    return list(dict.fromkeys(out))


def load_run(d: Path) -> dict[str, Any]:
    s = read_summary(d)  # not UTF-8, not JSON, not an object: one line naming the file
    return {"dir": d, "summary": s, "archive": read_jsonl(d / run_folder.ARCHIVE), "pareto": read_jsonl(d / run_folder.PARETO),
            "label": inert(f"{s.get('algorithm', '?')}+{s.get('space', '?')}@{s.get('backend', '?')}")}  # received


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_hv(runs: list[dict[str, Any]], key: str, path: Path) -> dict[str, Any]:
    """Mean ± std of HV per generation per recipe; returns the final mean/std per recipe."""
    plt = _plt()
    groups: dict[str, list[list[float]]] = defaultdict(list)
    for r in runs:
        groups[r["label"]].append(r["summary"].get(key) or [])
    fig, ax = plt.subplots(figsize=(6, 4))
    final = {}
    for label, curves in sorted(groups.items()):
        n = min(len(c) for c in curves)
        if n == 0:
            continue
        A = np.array([c[:n] for c in curves], float)
        mu, sd = A.mean(0), A.std(0)
        ax.plot(np.arange(n), mu, label=f"{label} (n={len(curves)})")
        ax.fill_between(np.arange(n), mu - sd, mu + sd, alpha=0.2)
        final[label] = {"mean": float(mu[-1]), "std": float(sd[-1]), "seeds": len(curves)}
    ax.set_xlabel("generation")
    ax.set_ylabel("hypervolume (" + ("val_loss, params" if "loss_params" in key else "all objectives") + ")")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return final


def plot_pareto(run: dict[str, Any], path: Path) -> None:
    plt = _plt()
    rows = [r for r in run["archive"] if r.get("feasible")]
    cols = plot_columns(run["summary"])
    fig, axes = plt.subplots(1, len(cols), figsize=(13 * len(cols) / 3, 3.8), layout="constrained", squeeze=False)
    axes = axes[0]
    par = {r["id"] for r in run["pareto"]}
    loss = np.array([_f(r["metrics"].get("val_loss")) for r in rows])
    gen = np.array([r["generation"] for r in rows])
    for ax, c in zip(axes, cols):
        x = np.array([_f(r["metrics"].get(c)) for r in rows])
        sc = ax.scatter(x, loss, c=gen, s=10, cmap="viridis")
        on = np.array([r["id"] in par for r in rows], bool)
        if on.any():
            ax.scatter(x[on], loss[on], s=28, facecolors="none", edgecolors="red", linewidths=0.8, label="Pareto archive")
            _interval_bars(ax, x[on], loss[on], [r for r, o in zip(rows, on) if o], run["summary"])
        ax.set_xlabel(c)
        ax.set_ylabel("val_loss")
        fin = x[np.isfinite(x) & (x > 0)]
        if len(fin) and fin.max() / fin.min() > 30:
            ax.set_xscale("log")
    axes[0].legend(fontsize=7)
    fig.colorbar(sc, ax=axes, label="generation")
    fig.suptitle(f"{run['label']} seed {run['summary'].get('seed')}", fontsize=9)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _interval_bars(ax: Any, x: np.ndarray, loss: np.ndarray, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """The Pareto members' calibrated loss intervals [loss_lo, loss_hi] as vertical bars (none if uncalibrated)."""
    lo = np.array([_f(r["metrics"].get("loss_lo")) for r in rows])
    hi = np.array([_f(r["metrics"].get("loss_hi")) for r in rows])
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(x)
    if ok.any():
        level = (summary.get("loss_interval") or {}).get("level", 0.9)
        err = np.vstack([np.maximum(loss[ok] - lo[ok], 0), np.maximum(hi[ok] - loss[ok], 0)])
        ax.errorbar(x[ok], loss[ok], yerr=err, fmt="none", ecolor="red", alpha=0.3, lw=0.7,
                    label=f"{level:.0%} loss interval")


def shown_fields(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """The five shape genes plus any registered gene some row's layer sets (stored only off its default)."""
    extra = [g.name for g in LAYER_GENES.values() if g.grid and not g.builtin
             and any(g.name in lay for r in rows for lay in r["genome"]["layers"])]
    return FIELDS + tuple(extra)


def fingerprint(pareto: list[dict[str, Any]], top: int = 50, grid: int = 21) -> dict[str, np.ndarray]:
    """(mean, std) per field on a relative-depth grid over the `top` lowest-loss archive genomes."""
    rows = sorted(pareto, key=lambda r: _f(r["metrics"].get("val_loss")))[:top]
    u = np.linspace(0.0, 1.0, grid)
    curves: dict[str, list[np.ndarray]] = defaultdict(list)
    for r in rows:
        layers = [lay for lay in r["genome"]["layers"] if lay["active"]]
        n = len(layers)
        pos = (np.arange(n) + 0.5) / n
        for k in shown_fields(pareto):
            keep = [i for i, lay in enumerate(layers) if lay["attn"] or k not in ATTN_FIELDS]
            vals = np.array([layers[i].get(k, LAYER_GENES[k].default) for i in keep], float)
            curves[k].append(np.interp(u, pos[keep], vals) if keep else np.full(grid, np.nan))
        curves["depth"].append(np.full(grid, n))
    out = {"u": u}
    for k, cs in curves.items():
        A = np.array(cs)
        with np.errstate(all="ignore"):
            out[k] = np.stack([np.nanmean(A, 0), np.nanstd(A, 0)])
    return out


def plot_fingerprints(runs: list[dict[str, Any]], path: Path, top: int = 50) -> dict[str, Any]:
    """One line per substrate (pooling all its runs' archives) and per field."""
    plt = _plt()
    by_backend: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by_backend[r["summary"].get("backend", "?")] += r["pareto"]
    fields_ = shown_fields([p for r in runs for p in r["pareto"]])
    fig, axes = plt.subplots(1, len(fields_), figsize=(3.2 * len(fields_), 3.6))
    stats = {}
    for backend, pareto in sorted(by_backend.items()):
        fp = fingerprint(pareto, top)
        if "n_h" not in fp:
            continue
        stats[backend] = {"depth_mean": float(fp["depth"][0][0]), "n_genomes": min(top, len(pareto))}
        for ax, k in zip(axes, fields_):
            mu, sd = fp[k]
            ax.plot(fp["u"], mu, label=backend)
            ax.fill_between(fp["u"], mu - sd, mu + sd, alpha=0.15)
            ax.set_title(k + (" (attn layers)" if k in ATTN_FIELDS else ""), fontsize=9)
            ax.set_xlabel("relative depth")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return stats


def make_report(paths: Sequence[str | Path], out: Path, top: int = 50, max_pareto_plots: int = 12,
                progress: bool = False) -> dict[str, Any]:
    from forge.runtime.steps import Steps

    found = find_runs(paths)
    n_plots = min(len(found), max_pareto_plots)  # at most: runs of one recipe share a Pareto plot
    with Steps("forge-report", "reading and drawing", len(found) + 4 + n_plots, enabled=progress,
               lazy=True) as st:
        runs = []
        for d in found:
            runs.append(load_run(d))
            st.step(f"read {d.name}")
        plots = Path(out) / run_folder.PLOTS_DIR
        plots.mkdir(parents=True, exist_ok=True)
        stats = {"hv": plot_hv(runs, "hv_per_generation", plots / run_folder.HV_PNG),
                 "hv_loss_params": plot_hv(runs, "hv_loss_params_per_generation", plots / run_folder.HV_LOSS_PARAMS_PNG)}
        st.step("hypervolume curves", 2)
        stats["fingerprint"] = plot_fingerprints(runs, plots / run_folder.FINGERPRINT_PNG, top)
        st.step("fingerprints")
        images = [plots / run_folder.HV_PNG, plots / run_folder.HV_LOSS_PARAMS_PNG, plots / run_folder.FINGERPRINT_PNG]
        firsts = {r["label"]: r for r in sorted(runs, key=lambda r: r["summary"].get("seed", 0))}
        for i, r in enumerate(list(firsts.values())[:max_pareto_plots]):
            p = plots / f"pareto_{i:02d}.png"
            plot_pareto(r, p)
            images.append(p)
            st.step(f"Pareto plot of {r['label']}")
        write_html(runs, images, stats, Path(out) / run_folder.REPORT_HTML)
        st.step(run_folder.REPORT_HTML, st.total - st.done)
    from search.tables import compare_runs  # runs.csv: the runs side by side, from their front.csv

    compare_runs([r["dir"] for r in runs], [r["summary"] for r in runs], Path(out) / run_folder.RUNS_CSV)
    summary = {"runs": len(runs), "out": str(out), "report": str(Path(out) / run_folder.REPORT_HTML),
               "runs_csv": str(Path(out) / run_folder.RUNS_CSV), "plots": [str(p) for p in images], **stats}
    atomic_write_json(Path(out) / run_folder.REPORT_JSON, summary)
    return summary


def run(cfg: Any) -> dict[str, Any]:
    from forge import plugins
    from forge.shell import plugin_use
    from forge.runtime.config import output_dir, to_container

    plugins.trust(cfg)  # the user's plug-in modules (a gene of theirs) before any genome is read
    c = to_container(cfg)
    runs = c.get("runs")
    if not runs:
        raise ReportError("runs is empty; allowed: runs=DIR or runs='[DIR1,DIR2]' (run or multirun folders)")
    runs = [runs] if isinstance(runs, str) else list(runs)
    for d in find_runs(runs):  # a partial HV curve would cut every curve of its recipe to its length
        require_complete(d, bool(c.get("allow_partial", False)), "runs")
        plugin_use.require(d)
    out = Path(c["out"]) if c.get("out") else output_dir({"out_dir": c.get("out_dir")}, fallback="outputs/report")
    return make_report(runs, check_writable(out, "out"), int(c.get("top", 50)), progress=bool(c.get("progress")))


def human(summary: dict[str, Any]) -> list[str]:
    """forge-report's last lines: what the page holds and where it is (report.json and `--json`: everything)."""
    from search.suggest import rel

    hv = summary.get("hv") or {}
    lines = [f"report of {summary['runs']} run(s), {len(hv)} recipe(s):"]
    lines += [f"  {inert(k)}: hypervolume {num(v.get('mean'))} ± {num(v.get('std'))} over {v.get('seeds')} seed(s)"
              for k, v in sorted(hv.items())]  # a recipe is named by a received summary.json's fields: inert
    lines.append(f"page (front tables, settings, interactive plots; works offline): {inert(rel(summary['report']))}")
    lines.append(f"runs side by side: {inert(rel(summary['runs_csv']))}")
    return lines
