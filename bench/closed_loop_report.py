"""Tables and curves of bench_closed_loop_priors.py: every arm against TOTAL real labels, priors included.

The forge / forge-gqa / random / nsga-real runs of bench_closed_loop.py (closed_loop.json) are re-used: their x
moves by the 340 priors where the arm used them (forge, forge-gqa), and their "paid" score is the front of their
stored front united with the priors' front (the front of a union is the front of the union of fronts).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

N_PRIOR = 340
HOST = "host-cpu-measured"
USES_PRIORS = ("forge", "forge-gqa", "warm")
HV_TIE = 0.005  # HV differences below 0.25 % of an HV near 2 are called ties


def _ms(xs: list, f: str = ".4f") -> str:
    xs = [x for x in xs if x is not None]
    return f"{np.mean(xs):{f}} ± {np.std(xs):{f}}" if xs else "–"


def paid(point: dict[str, Any], prior_best: float) -> dict[str, Any]:
    """An old run's point with the priors added: its best loss is exact; its HV is not computable, since the
    priors' TPOT was measured in another session (timings do not carry across sessions)."""
    return {"hv": None, "best_loss": min(point["best_loss"], prior_best)}


def old_rows(old: dict[str, Any], prior_best: float) -> list[dict[str, Any]]:
    """One row per (arm, seed, labels) of the old runs (a budget point wins over an equal curve entry)."""
    rows: dict[tuple, dict[str, Any]] = {}
    for key, run in old["runs"].items():
        arm, seed = key.split("/")
        entries = [(None, pt) for pt in run["curve"]] + [(int(b), pt) for b, pt in run["points"].items()]
        for budget, pt in entries:
            own = {"hv": pt["hv"], "best_loss": pt["best_loss"]}
            with_p = arm in USES_PRIORS
            rows[(arm, seed, pt["labels"])] = {
                "arm": arm, "seed": int(seed), "n": pt["labels"], "budget": budget, "session": "A",
                "total": pt["labels"] + N_PRIOR * with_p, "own": own, "paid": paid(pt, prior_best) if with_p else own}
    return list(rows.values())


def warm_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, r in res["runs"].items():
        if key.startswith("warm/"):
            seed, n = map(int, key.split("/")[1].split("@"))
            out.append({"arm": "warm", "seed": seed, "n": n, "budget": n, "session": "B", "total": r["total"],
                        "own": r["own"], "paid": r["paid"]})
    return out


def single_table(rows: list[dict[str, Any]], prior: dict[str, Any]) -> str:
    """Per arm and budget: mean ± std over seeds. HV compares only within a timing session (A: closed_loop.json's
    runs; B: this run), so the HV of an old run with the priors added is n/a."""
    lines = ["| arm | new labels N | total real labels (priors counted) | seeds | best real loss (all paid) | "
             "real HV (all paid) | best real loss (N new only) | real HV (N new only) | timings |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| 340 priors alone | 0 | 340 | – | {prior['best_loss']:.4f} | {prior['hv']:.4f} | – | – | B |"]
    for arm in ("random", "nsga-real", "forge", "forge-gqa", "warm"):
        pts = [r for r in rows if r["arm"] == arm and r["budget"] is not None]
        for b in sorted({r["budget"] for r in pts}):
            sel = [r for r in pts if r["budget"] == b]
            lines.append(f"| {arm} | {np.mean([r['n'] for r in sel]):.0f} | {np.mean([r['total'] for r in sel]):.0f} | "
                         f"{len(sel)} | {_ms([r['paid']['best_loss'] for r in sel])} | "
                         f"{_ms([r['paid']['hv'] for r in sel]).replace('–', 'n/a')} | "
                         f"{_ms([r['own']['best_loss'] for r in sel])} | {_ms([r['own']['hv'] for r in sel])} | "
                         f"{sel[0]['session']} |")
    return "\n".join(lines)


def spread_table(sp: dict[str, Any]) -> str:
    lines = ["| genome | seed 0 (shipped) | seed 1 | seed 2 | std (ddof 1) |", "|---|---|---|---|---|"]
    for gid, v in sp["labels"].items():
        tag = " (best 4)" if gid in sp["best4"] else ""
        lines.append(f"| `{gid}`{tag} | " + " | ".join(f"{x:.4f}" for x in v) + f" | {sp['std'][gid]:.4f} |")
    best = np.sqrt(np.mean(np.square([sp["std"][g] for g in sp["best4"]])))
    lines.append(f"| RMS σ, all 8 / the 4 best / median | | | | **{sp['pooled_std']:.4f}** / **{best:.4f}** / "
                 f"{np.median(list(sp['std'].values())):.4f} |")
    return "\n".join(lines)


def multi_table(res: dict[str, Any]) -> str:
    targets = list(res["targets"])
    head = "| arm | seeds | new labels (distinct, all targets) | total real labels | " + " | ".join(
        f"{t}: best loss / HV" for t in targets) + " |"
    lines = [head, "|" + "---|" * (4 + len(targets))]
    pf = res["prior_front"]
    lines.append("| 340 priors alone | – | 0 | 340 | " + " | ".join(
        f"{pf[t]['best_loss']:.4f} / {pf[t]['hv']:.4f}" for t in targets) + " |")
    for arm in ("forge", "warm"):
        rs = [r for k, r in res["runs"].items() if k.startswith(f"multi-{arm}/")]
        if rs:
            lines.append(f"| {arm} | {len(rs)} | {_ms([r['new'] for r in rs], '.1f')} | {_ms([r['total'] for r in rs], '.1f')} | "
                         + " | ".join(f"{_ms([r['scores'][t]['best_loss'] for r in rs])} / "
                                      f"{_ms([r['scores'][t]['hv'] for r in rs])}" for t in targets) + " |")
    return "\n".join(lines)


def verdict(res: dict[str, Any], sigma: float | None) -> str:
    """Per target, forge minus warm (mean over seeds): HV (tie inside 2 x the seeds' combined std or HV_TIE) and best loss
    (tie when inside sqrt(2) x the per-label seed std of the best genomes, the std of a difference of two labels)."""
    f = [r for k, r in res["runs"].items() if k.startswith("multi-forge/")]
    w = [r for k, r in res["runs"].items() if k.startswith("multi-warm/")]
    if not f or not w:
        return ""
    lines = ["| target | ΔHV forge − warm | HV verdict | Δ best loss forge − warm | loss verdict |", "|---|---|---|---|---|"]
    for t in res["targets"]:
        hf, hw = [r["scores"][t]["hv"] for r in f], [r["scores"][t]["hv"] for r in w]
        lf, lw = [r["scores"][t]["best_loss"] for r in f], [r["scores"][t]["best_loss"] for r in w]
        dh, dl, sd = np.mean(hf) - np.mean(hw), np.mean(lf) - np.mean(lw), np.hypot(np.std(hf), np.std(hw))
        hv_v = "tie" if abs(dh) <= max(2 * sd, HV_TIE) else ("forge leads" if dh > 0 else "warm leads")
        tol = np.sqrt(2) * sigma if sigma else 0.0
        loss_v = "tie" if abs(dl) <= tol else ("forge leads" if dl < 0 else "warm leads")
        lines.append(f"| {t} | {dh:+.4f} (seed std {sd:.4f}) | {hv_v} | {dl:+.4f} (tol {tol:.4f}) | {loss_v} |")
    return "\n".join(lines)


ALL = ("random", "nsga-real", "forge", "forge-gqa", "warm")
PANELS = (("best_loss", "paid", ALL, "best real loss (all paid)", "log"),
          ("best_loss", "paid", USES_PRIORS, "best real loss (all paid), zoom", "linear"),
          ("hv", "own", ALL[:4], "real HV, session A (own N labels)", "log"),
          ("hv", "paid", ("warm",), "real HV, session B (all paid)", "linear"))


def curves(rows: list[dict[str, Any]], prior: dict[str, Any], path: Path, sigma: float | None = None) -> None:
    """Best real loss, and real HV per timing session, against total real labels: mean ± std over seeds per arm at
    each x that at least 3 seeds reach. Session A timed closed_loop.json's fronts, session B this run's. The zoom
    shades the priors' best loss ± sqrt(2) x the per-label seed std (a gap inside it is noise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4))
    colors = dict(zip(ALL, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, (key, score, arms, label, xscale) in zip(axes, PANELS):
        for arm in arms:
            sel = [r for r in rows if r["arm"] == arm and r[score][key] is not None]
            group = lambda r: r["budget"] or r["total"]  # noqa: E731  (nsga-real's budget points spend 92-96)
            gs = sorted({group(r) for r in sel if sum(group(q) == group(r) for q in sel) >= 3})
            gs = sorted(gs, key=lambda g: np.mean([r["total"] for r in sel if group(r) == g]))
            xs = [np.mean([r["total"] for r in sel if group(r) == g]) for g in gs]
            ys = [[r[score][key] for r in sel if group(r) == g] for g in gs]
            m, sd = np.array([np.mean(y) for y in ys]), np.array([np.std(y) for y in ys])
            ax.plot(xs, m, marker="o", ms=3, c=colors[arm], label=f"{arm} ({len({r['seed'] for r in sel})} seeds)")
            ax.fill_between(xs, m - sd, m + sd, color=colors[arm], alpha=0.2)
        if score == "paid":
            ax.scatter([N_PRIOR], [prior[key]], marker="*", s=80, c="k", zorder=5, label="340 priors alone")
        if xscale == "linear" and key == "best_loss" and sigma:
            ax.axhspan(prior[key] - np.sqrt(2) * sigma, prior[key] + np.sqrt(2) * sigma, color="0.85", zorder=0,
                       label="priors' best ± √2 σ (seed noise)")
        ax.set_xscale(xscale)
        ax.set_xlabel("total real labels (priors counted)")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(res: dict[str, Any], old: dict[str, Any], png: Path | None = None) -> str:
    prior = res["prior_front"][HOST]
    rows = old_rows(old, prior["best_loss"]) + warm_rows(res)
    sp = res["runs"].get("spread")
    sigma = float(np.sqrt(np.mean(np.square([sp["std"][g] for g in sp["best4"]])))) if sp else None
    if png is not None:
        curves(rows, prior, png, sigma)
    parts = ["### single target: host-cpu measured TPOT", single_table(rows, prior)]
    if "spread" in res["runs"]:
        parts += ["### per-label seed spread", spread_table(res["runs"]["spread"])]
    if any(k.startswith("multi-") for k in res["runs"]):
        parts += ["### K = 4 targets, one shared store", multi_table(res), verdict(res, sigma)]
    return "\n\n".join(parts)
