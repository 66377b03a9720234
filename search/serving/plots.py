"""Figures of forge-serve: AFD throughput/idle vs r (paper 001 Fig. 4-5) and the pool Pareto fronts (003 Fig. 7)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from forge.disk.io import atomic_write_bytes  # noqa: E402


def _save(fig: Any, path: Path) -> None:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def plot_afd(s: dict[str, Any], path: Path) -> None:
    """Left: throughput per instance, theory line vs simulator points, r* marked. Right: idle shares."""
    sim = [x for x in s["sweep"] if "sim" in x]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    cv = s["curve"]
    a.plot(cv["r"], cv["theory"], "-", label="closed form (Eq. 6)")
    a.plot([x["r"] for x in sim], [x["sim"] for x in sim], "s", label="simulator")
    a.axvline(s["r_star"], ls="--", c="k", lw=1, label=f"r* = {s['r_star']:.2f}")
    a.set_xlabel("A/F ratio r"), a.set_ylabel(f"tokens / {s['unit']} / instance"), a.legend()
    a.set_title(f"AFD throughput ({s.get('arch') or 'Table 2'}, B={s['workload']['B']})")
    for key, lab in (("eta_A", "attention"), ("eta_F", "FFN")):
        b.plot(cv["r"], cv[key], "-", label=f"{lab} idle, theory")
        b.plot([x["r"] for x in sim], [x[f"sim_{key}"] for x in sim], "o", label=f"{lab} idle, simulator")
    b.set_xlabel("A/F ratio r"), b.set_ylabel("idle fraction"), b.legend(fontsize=8), b.set_title("idle shares (Eq. 23)")
    _save(fig, path)


def plot_pools(s: dict[str, Any], path: Path) -> None:
    """Normalized cost vs serving time: every evaluated design, the NSGA-II fronts per initialization,
    the brute-force front (reduced space) and the 8-GPU baseline at (1, 1)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, run in s["runs"].items():
        pts = run["front"]
        ax.plot([p["cost_norm"] for p in pts], [p["time_norm"] for p in pts], "o", ms=5, alpha=0.8, label=f"NSGA-II, {name} init")
    if s.get("brute_force"):
        bf = sorted(s["brute_force"]["front"], key=lambda p: p["cost_norm"])
        ax.plot([p["cost_norm"] for p in bf], [p["time_norm"] for p in bf], "k-", lw=1, label="brute-force front")
    ax.plot([1], [1], "r*", ms=14, label="baseline (8 GPUs)")
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel("cost / baseline cost"), ax.set_ylabel("serving time / baseline time"), ax.legend(fontsize=8)
    ax.set_title(f"prefill/decode pools for {s['arch']} ({s['trace']['requests']} requests)")
    _save(fig, path)
