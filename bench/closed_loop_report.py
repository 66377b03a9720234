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


def _ms(xs: list, f: str = ".4f") -> str:
    xs = [x for x in xs if x is not None]
    return f"{np.mean(xs):{f}} ± {np.std(xs):{f}}" if xs else "–"


def paid(point: dict[str, Any], prior_best: float) -> dict[str, Any]:
    """An old run's point with the priors added: its best loss is exact; its HV is not computable, since the
    priors' TPOT was measured in another session (timings do not carry across sessions)."""
    return {"hv": None, "best_loss": min(point["best_loss"], prior_best)}


def old_rows(old: dict[str, Any], prior_best: float) -> list[dict[str, Any]]:
    """One row per (arm, seed, n) of the old runs: labels spent, total labels, own and paid scores."""
    rows = []
    for key, run in old["runs"].items():
        arm, seed = key.split("/")
        for pt in run["curve"] + list(run["points"].values()):
            own = {"hv": pt["hv"], "best_loss": pt["best_loss"]}
            with_p = arm in USES_PRIORS
            rows.append({"arm": arm, "seed": int(seed), "n": pt["labels"], "total": pt["labels"] + N_PRIOR * with_p,
                         "own": own, "paid": paid(pt, prior_best) if with_p else own,
                         "point": pt in run["points"].values()})
    return rows


def warm_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, r in res["runs"].items():
        if key.startswith("warm/"):
            seed, n = map(int, key.split("/")[1].split("@"))
            out.append({"arm": "warm", "seed": seed, "n": n, "total": r["total"], "own": r["own"], "paid": r["paid"],
                        "point": True})
    return out


def single_table(rows: list[dict[str, Any]], prior: dict[str, Any]) -> str:
    lines = ["| arm | new labels N | total real labels (priors counted) | seeds | best real loss (all paid) | "
             "real HV (all paid) | best real loss (N new only) | real HV (N new only) |", "|---|---|---|---|---|---|---|---|",
             f"| 340 priors alone | 0 | 340 | – | {prior['best_loss']:.4f} | {prior['hv']:.4f} | – | – |"]
    for arm in ("random", "nsga-real", "forge", "forge-gqa", "warm"):
        pts = [r for r in rows if r["arm"] == arm and r["point"]]
        for n in sorted({r["n"] for r in pts} if arm != "nsga-real" else {48, 96}):
            sel = [r for r in pts if (r["n"] == n if arm != "nsga-real" else abs(r["n"] - n) <= 4)]
            if not sel:
                continue
            lines.append(f"| {arm} | {n} | {np.mean([r['total'] for r in sel]):.0f} | {len(sel)} | "
                         f"{_ms([r['paid']['best_loss'] for r in sel])} | {_ms([r['paid']['hv'] for r in sel]).replace('–', 'n/a')} | "
                         f"{_ms([r['own']['best_loss'] for r in sel])} | {_ms([r['own']['hv'] for r in sel])} |")
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


PANELS = (("best_loss", "paid", ("random", "nsga-real", "forge", "forge-gqa", "warm"), "best real loss (all paid)"),
          ("hv", "own", ("random", "nsga-real", "forge", "forge-gqa"), "real HV, session A (own N labels)"),
          ("hv", "paid", ("warm",), "real HV, session B (all paid)"))


def curves(rows: list[dict[str, Any]], prior: dict[str, Any], path: Path) -> None:
    """Best real loss, and real HV per timing session, against total real labels (log x): mean ± std over seeds
    per arm at each x that at least 3 seeds reach. Session A timed closed_loop.json's fronts, session B this run's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (key, score, arms, label) in zip(axes, PANELS):
        for arm in arms:
            sel = [r for r in rows if r["arm"] == arm and r[score][key] is not None]
            xs = sorted({r["total"] for r in sel if sum(q["total"] == r["total"] for q in sel) >= 3})
            ys = [[r[score][key] for r in sel if r["total"] == x] for x in xs]
            m, sd = np.array([np.mean(y) for y in ys]), np.array([np.std(y) for y in ys])
            ax.plot(xs, m, marker="o", ms=3, label=f"{arm} ({len({r['seed'] for r in sel})} seeds)")
            ax.fill_between(xs, m - sd, m + sd, alpha=0.2)
        if score == "paid":
            ax.scatter([N_PRIOR], [prior[key]], marker="*", s=80, c="k", zorder=5, label="340 priors alone")
        ax.set_xscale("log")
        ax.set_xlabel("total real labels (priors counted)")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(res: dict[str, Any], old: dict[str, Any], png: Path | None = None) -> str:
    prior = res["prior_front"][HOST]
    rows = old_rows(old, prior["best_loss"]) + warm_rows(res)
    if png is not None:
        curves(rows, prior, png)
    parts = ["### single target: host-cpu measured TPOT", single_table(rows, prior)]
    if "spread" in res["runs"]:
        parts += ["### per-label seed spread", spread_table(res["runs"]["spread"])]
    if any(k.startswith("multi-") for k in res["runs"]):
        parts += ["### K = 4 targets, one shared store", multi_table(res)]
    return "\n\n".join(parts)
