"""Fit the roofline's efficiencies and overheads to measured (genome, TTFT, TPOT) samples.

`calibrate(samples)` minimises the relative (log) error of predicted TTFT and TPOT by bounded least
squares (scipy.optimize.least_squares) over any of eta_compute, eta_memory, launch_us and layer_us,
and returns — optionally writes as YAML — a complete `backend=` config with the fitted values, so
`forge-hw backend=<that file's name>` reproduces the measurements.

A sample is a (genome, ttft_ms, tpot_ms) tuple or a dict with those keys; a dict may also name the
`hardware` preset and the `workload` it was measured on (published numbers come from different GPUs and
prompt/decode lengths), and may leave `ttft_ms` None where only TPOT was published.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from scipy.optimize import least_squares

from backends.interface import BackendError, Workload
from backends.gpu.roofline import RooflineBackend
from forge.spaces.arrays import PopArrays
from forge.genomes.genome import Genome

FITTABLE = {"eta_compute": (0.01, 1.0), "eta_memory": (0.01, 1.0), "launch_us": (0.0, 1e5), "layer_us": (0.0, 1e6)}


def _sample(i: int, s: Any, workload: Workload) -> dict[str, Any]:
    """One sample as a dict with genome, ttft_ms (or None), tpot_ms, hardware (or None) and workload."""
    d = dict(s) if isinstance(s, dict) else dict(zip(("genome", "ttft_ms", "tpot_ms"), s))
    g, a, b = d.get("genome"), d.get("ttft_ms"), d.get("tpot_ms")
    if not isinstance(g, Genome):
        raise BackendError(f"sample {i}: genome is {type(g).__name__}; allowed: a forge Genome")
    ok = lambda v: v is not None and np.isfinite(v) and v > 0  # noqa: E731
    if not ok(b) or not (a is None or ok(a)):
        raise BackendError(f"sample {i}: ttft_ms={a!r}, tpot_ms={b!r}; allowed: finite positive milliseconds "
                           "(ttft_ms may be None in a dict sample)")
    wl = d.get("workload") or workload
    wl = wl if isinstance(wl, Workload) else Workload(**wl)
    return {"genome": g, "ttft_ms": None if a is None else float(a), "tpot_ms": float(b),
            "hardware": d.get("hardware"), "workload": wl}


def _groups(samples: Iterable[Any], workload: Workload) -> list[dict[str, Any]]:
    """Samples grouped by (hardware, workload): one population evaluation per group and step."""
    groups: dict[tuple, dict[str, Any]] = {}
    for i, s in enumerate(samples):
        d = _sample(i, s, workload)
        grp = groups.setdefault((str(d["hardware"]), d["workload"]),
                                {"hardware": d["hardware"], "workload": d["workload"], "genomes": [], "ttft": [], "tpot": []})
        grp["genomes"].append(d["genome"]), grp["ttft"].append(d["ttft_ms"]), grp["tpot"].append(d["tpot_ms"])
    if not groups:
        raise BackendError("calibrate() got no samples; allowed: (genome, ttft_ms, tpot_ms) tuples or dicts")
    for grp in groups.values():
        grp["pop"] = PopArrays.from_genomes(grp["genomes"])
        grp["has_ttft"] = np.array([t is not None for t in grp["ttft"]])
        grp["meas"] = np.log(np.concatenate([np.array([t for t in grp["ttft"] if t is not None]), grp["tpot"]]))
    return list(groups.values())


def calibrate(samples: Sequence[Any], base: dict[str, Any] | None = None, workload: Workload = Workload(),
              fit: Sequence[str] = tuple(FITTABLE), out: str | Path | None = None) -> dict[str, Any]:
    """Least-squares fit of `fit` parameters of a roofline config `base`; returns the fitted config.

    The result carries `calibration`: the parameters, the RMS relative error before and after, and the
    relative residual of every measured value after the fit (TTFT values first, then TPOT, per group).
    """
    bad = sorted(set(fit) - set(FITTABLE))
    if bad:
        raise BackendError(f"calibrate: cannot fit {bad[0]!r}; allowed: {', '.join(FITTABLE)}")
    base = {k: v for k, v in (base or {}).items() if k != "_target_"}
    base.pop("ideal", None)
    groups = _groups(samples, workload)
    start = RooflineBackend(**base)
    # start strictly inside the bounds: an overhead of exactly 0 sits on its bound and TRF may not leave it
    x0 = np.array([np.clip(getattr(start, k), FITTABLE[k][0] + (0.02 if k.startswith("eta") else 1.0), FITTABLE[k][1])
                   for k in fit], dtype=float)
    scale = np.array([1.0 if k.startswith("eta") else max(10.0, x) for k, x in zip(fit, x0)])

    def residual(x: np.ndarray) -> np.ndarray:
        out = []
        for grp in groups:
            hw = {"hardware": grp["hardware"]} if grp["hardware"] is not None else {}
            r = RooflineBackend(**{**base, **hw, **dict(zip(fit, x))}).evaluate(grp["pop"], grp["workload"])
            out.append(np.log(np.concatenate([r.ttft_ms[grp["has_ttft"]], r.tpot_ms])) - grp["meas"])
        return np.concatenate(out)

    before = float(np.sqrt(np.mean(np.expm1(residual(x0)) ** 2)))
    lo, hi = zip(*(FITTABLE[k] for k in fit))
    sol = least_squares(residual, x0, bounds=(lo, hi), x_scale=scale, method="trf")
    rel = np.expm1(residual(sol.x))
    cfg = RooflineBackend(**{**base, **dict(zip(fit, sol.x))}).config()
    cfg["calibration"] = {"fitted": {k: float(v) for k, v in zip(fit, sol.x)},
                          "n_samples": sum(len(g["genomes"]) for g in groups),
                          "rms_rel_error_before": before, "rms_rel_error_after": float(np.sqrt(np.mean(rel ** 2))),
                          "rel_residuals": [float(v) for v in rel],
                          "workload": {"prefill": workload.prefill, "decode": workload.decode, "batch": workload.batch}}
    if out is not None:
        write_config(cfg, out)
    return cfg


def write_config(cfg: dict[str, Any], path: str | Path) -> None:
    """Write a backend config YAML loadable by `build_backend` (the `calibration` block is dropped on load)."""
    import yaml

    from forge.disk.io import atomic_write_text

    body = {k: v for k, v in cfg.items() if k != "calibration"}
    note = "# calibration: " + yaml.safe_dump(cfg.get("calibration", {}), default_flow_style=True, width=10**6).strip()
    atomic_write_text(path, note + "\n" + yaml.safe_dump(body, sort_keys=False))
