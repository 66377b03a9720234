"""What `forge-verify` reports: per-genome rows, the summary over the picks, and the figure.

Summary (issue 21 §2): Spearman of predicted μ vs real loss, coverage of the loss interval, MAE, and the
real hypervolume of the picks against the control's. The HV is 2-D, in (real loss, latency), latency being
measured where a measured backend ran (else predicted, and the summary says so). Both sets are normalized
by one shared anchor, the worst finite value of each column over picks ∪ control, with the reference point
at 1.1 × anchor, so the two HVs are comparable to each other (not to a search's own `hypervolume`).

A run whose loss was itself trained (`evaluator.kind=train`) holds its picks' real labels already: a
predicted-vs-real table would compare a label with itself. Its summary (`summarize_real`) and figure
(`real_figure`) state only what the verify adds: the picks' real loss and latency against the control's.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from forge.disk.io import as_float, loads
from search.archive import Hypervolume
from forge.disk import run_folder

HV_REF = 1.1  # reference point in anchor units: just past the worst finite member of picks ∪ control


def _f(x: Any, missing: float = math.inf) -> float:
    """Missing values count as inf here (a pick with no real loss ranks last)."""
    return as_float(x, missing)


def row_of(role: str, rec: dict[str, Any], real: float, lo: float, hi: float, latency: str,
           measured: dict[str, float] | None) -> dict[str, Any]:
    """One genome's line in verify.json: predicted vs real loss, inside the interval, predicted vs measured latency."""
    m = rec["metrics"]
    fin = math.isfinite(real)
    row = {"id": rec["id"], "role": role, "mu": _f(m.get("mu", m.get("val_loss"))), "sigma": _f(m.get("sigma", 0.0)),
           "loss_lo": lo, "loss_hi": hi, "real_loss": real if fin else "inf",
           "inside": bool(fin and lo <= real <= hi) if fin else None,
           f"predicted_{latency}": _f(m.get(latency))}
    if measured is not None:
        row[f"measured_{latency}"] = measured.get(latency, math.inf)
        row["measured"] = {k: v for k, v in measured.items() if isinstance(v, (int, float, str))}
    return row


def interval_of(rec: dict[str, Any], predictor: Any, level: float) -> tuple[float, float, str]:
    """The row's calibrated interval (the run's loss_lo/loss_hi, issue 21 §1), else predictor.interval, else μ ± 0 (noted)."""
    m = rec["metrics"]
    mu, sigma = float(m.get("mu", m.get("val_loss"))), float(m.get("sigma", 0.0))
    lo, hi = (_f(rec.get(k, m.get(k)), math.nan) for k in ("loss_lo", "loss_hi"))
    if math.isfinite(lo) and math.isfinite(hi):  # NaN ("nan") where the run's predictor had no calibration
        return lo, hi, "run"
    if hasattr(predictor, "interval"):
        lo, hi = predictor.interval(np.array([mu]), np.array([sigma]), level)
        return float(np.asarray(lo)[0]), float(np.asarray(hi)[0]), "predictor"
    return mu, mu, "none"


def _spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(spearmanr(a, b).statistic)


def _finite(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["real_loss"] != "inf"]


def _hv_points(rows: Sequence[dict[str, Any]], latency: str, measured: bool) -> np.ndarray:
    col = f"measured_{latency}" if measured else f"predicted_{latency}"
    return np.array([[_f(r["real_loss"]), _f(r.get(col))] for r in rows], float).reshape(-1, 2)


def winner(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The row of lowest real loss (ties: the smaller id): its id, role and real loss; None when none trained to a
    finite loss. The verify's summary names it and its `next:` line exports it."""
    fin = _finite(rows)
    if not fin:
        return None
    best = min(fin, key=lambda r: (r["real_loss"], r["id"]))
    return {"id": best["id"], "role": best["role"], "real_loss": best["real_loss"]}


def summarize(picks: list[dict[str, Any]], control: list[dict[str, Any]], latency: str, measured: bool,
              level: float, interval_method: str) -> dict[str, Any]:
    """Spearman, coverage, MAE over the finite picks; real HV of picks vs control on one shared scale."""
    fin = _finite(picks)
    mu, y = [r["mu"] for r in fin], [r["real_loss"] for r in fin]
    hv = _real_hv(picks, control, latency, measured)
    cfin = _finite(control)
    return {"n_picks": len(picks), "n_control": len(control), "n_finite": len(fin),
            "spearman": _spearman(mu, y), "mae": float(np.mean(np.abs(np.subtract(mu, y)))) if fin else None,
            "coverage": float(np.mean([r["inside"] for r in fin])) if fin else None, "interval_level": level,
            "interval_method": interval_method,
            "spearman_all": _spearman(mu + [r["mu"] for r in cfin], y + [r["real_loss"] for r in cfin]),
            "best_real_loss": {"picks": min(y, default=None), "control": min((r["real_loss"] for r in cfin), default=None)},
            "winner": winner(picks), "best_control": winner(control), "real_hv": hv, "hv_objectives": ["real_loss", f"{'measured' if measured else 'predicted'}_{latency}"],
            "hv_ref": HV_REF}


def real_row(role: str, rec: dict[str, Any], real: float, latency: str,
             measured: dict[str, float] | None) -> dict[str, Any]:
    """A train-mode run's line: the real loss and the latency only (no prediction exists to compare)."""
    row = {k: v for k, v in row_of(role, rec, real, math.nan, math.nan, latency, measured).items()
           if k not in ("mu", "sigma", "loss_lo", "loss_hi", "inside")}
    return row


def summarize_real(picks: list[dict[str, Any]], control: list[dict[str, Any]], latency: str,
                   measured: bool) -> dict[str, Any]:
    """Real vs control only: best and median real loss, real HV of each set on one shared scale."""
    hv = _real_hv(picks, control, latency, measured)
    fin, cfin = _finite(picks), _finite(control)

    def med(rows: list[dict[str, Any]]) -> float | None:
        return float(np.median([r["real_loss"] for r in rows])) if rows else None

    return {"n_picks": len(picks), "n_control": len(control), "n_finite": len(fin),
            "predicted_vs_real": "none: the run's loss was trained, so its picks' labels are real already",
            "best_real_loss": {"picks": min((r["real_loss"] for r in fin), default=None),
                               "control": min((r["real_loss"] for r in cfin), default=None)},
            "median_real_loss": {"picks": med(fin), "control": med(cfin)},
            "winner": winner(picks), "best_control": winner(control), "real_hv": hv, "hv_objectives": ["real_loss", f"{'measured' if measured else 'predicted'}_{latency}"],
            "hv_ref": HV_REF}


def _real_hv(picks: list[dict[str, Any]], control: list[dict[str, Any]], latency: str,
             measured: bool) -> dict[str, Any]:
    """Real HV of picks and control, normalized by one anchor: the worst finite value of each column over both."""
    P, C = _hv_points(picks, latency, measured), _hv_points(control, latency, measured)
    both = np.vstack([P, C])
    both = both[np.all(np.isfinite(both), axis=1)]
    if not len(both):
        return {"picks": 0.0, "control": 0.0, "anchor": None}
    hv_fn = Hypervolume(both.max(0), ref=HV_REF)
    return {"picks": hv_fn(P), "control": hv_fn(C), "anchor": both.max(0).tolist()}


def real_figure(path: Path, picks: list[dict[str, Any]], control: list[dict[str, Any]], latency: str,
                measured: bool, title: str) -> Path:
    """Real loss against latency, picks and control (a train-mode run has no prediction to draw)."""
    plt, fig, ax = _axes()
    col = f"{'measured' if measured else 'predicted'}_{latency}"
    for rows, name, color in ((picks, "front picks", "tab:blue"), (control, "random control", "tab:gray")):
        fin = [r for r in _finite(rows) if math.isfinite(_f(r.get(col)))]
        if fin:
            ax.plot([r[col] for r in fin], [r["real_loss"] for r in fin], "o", color=color, ms=5, label=name)
    ax.set_xlabel(col.replace("_", " "))
    ax.set_ylabel("real loss (trained)")
    return _save(plt, fig, ax, path, title)


def _axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    return plt, fig, ax


def _save(plt: Any, fig: Any, ax: Any, path: Path, title: str) -> Path:
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    import io

    from forge.disk.io import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())  # a full disk: the old figure (or none) stays, never half of one
    return path


def figure(path: Path, picks: list[dict[str, Any]], control: list[dict[str, Any]], title: str) -> Path:
    """Predicted μ (with its interval as an error bar) against the real loss; y = x drawn."""
    plt, fig, ax = _axes()
    for rows, name, color in ((picks, "front picks", "tab:blue"), (control, "random control", "tab:gray")):
        fin = _finite(rows)
        if not fin:
            continue
        y = np.array([r["real_loss"] for r in fin])
        mu = np.array([r["mu"] for r in fin])
        err = np.array([[m - r["loss_lo"], r["loss_hi"] - m] for m, r in zip(mu, fin)]).T.clip(min=0)
        ax.errorbar(y, mu, yerr=err, fmt="o", color=color, ms=5, capsize=3, label=name)
    vals = [v for r in _finite(picks) + _finite(control) for v in (r["real_loss"], r["loss_lo"], r["loss_hi"])]
    if vals:
        lo, hi = min(vals), max(vals)
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = real")
    ax.set_xlabel("real loss (trained)")
    ax.set_ylabel("predicted loss μ (interval)")
    return _save(plt, fig, ax, path, title)


def brief(out: dict[str, Any]) -> dict[str, Any]:
    """What the CLI prints: the summary, the cost note, the refit and where the files are."""
    keep = {k: out[k] for k in ("run", "front_size", "loss", "cost", "store", "figure") if k in out}
    from search.suggest import export_command, quote, rel

    weights = Path(out["figure"]).with_name("weights")
    win = out["summary"].get("winner")
    trained = ({"trained_weights": str(weights), "export_trained": export_command(
        out.get("run") or ".", f"weights={quote(rel(weights))}", "format=hf", select=f"id:{win['id']}",
        base="exported-trained"), "winner_weights": _weights_of(weights, win["id"])}
        if win and weights.is_dir() else {})
    return {**keep, **out["summary"], **({"refit": out["refit"]} if "refit" in out else {}),
            "verify_json": str(Path(out["figure"]).with_name(run_folder.VERIFY_JSON)), **trained}



def _weights_of(weights: Path, gid: str) -> str | None:
    """The trained weights file this verify kept for `gid` (None: its label came from the store, not retrained)."""
    return next((str(p) for p in (weights / f"{gid}{ext}" for ext in (".safetensors", ".pt")) if p.is_file()), None)


def measured_loss(verify_dir: Path, gid: str) -> float | None:
    """The real loss `forge-verify` trained genome `gid` to, from the verify.json beside its weights folder (the
    export of verified weights states it); None when that file holds no finite loss for it. Read as data only."""
    try:
        d = loads((Path(verify_dir) / run_folder.VERIFY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    rows = [*(d.get("picks") or []), *(d.get("control") or [])] if isinstance(d, dict) else []
    real = [r.get("real_loss") for r in rows if isinstance(r, dict) and r.get("id") == gid]
    ok = [float(x) for x in real if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)]
    return ok[0] if ok else None
