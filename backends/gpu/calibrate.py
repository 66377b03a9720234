"""Fit the roofline's efficiencies and overheads to measured (genome, TTFT, TPOT) samples.

`calibrate(samples)` minimises the relative (log) error of predicted TTFT and TPOT by bounded least
squares (scipy.optimize.least_squares) over any of eta_compute, eta_memory, launch_us and layer_us,
and returns — optionally writes as YAML — a complete `backend=` config with the fitted values, so
`forge-hw backend=<that file's name>` reproduces the measurements.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from scipy.optimize import least_squares

from backends.interface import BackendError, Workload
from backends.gpu.roofline import RooflineBackend
from forge.arrays import PopArrays
from forge.genome import Genome

FITTABLE = {"eta_compute": (0.01, 1.0), "eta_memory": (0.01, 1.0), "launch_us": (0.0, 1e5), "layer_us": (0.0, 1e6)}


def _unpack(samples: Iterable[Any]) -> tuple[list[Genome], np.ndarray, np.ndarray]:
    genomes, ttft, tpot = [], [], []
    for i, s in enumerate(samples):
        g, a, b = (s["genome"], s["ttft_ms"], s["tpot_ms"]) if isinstance(s, dict) else s
        if not isinstance(g, Genome):
            raise BackendError(f"sample {i}: genome is {type(g).__name__}; allowed: a forge Genome")
        if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
            raise BackendError(f"sample {i}: ttft_ms={a!r}, tpot_ms={b!r}; allowed: finite positive milliseconds")
        genomes.append(g), ttft.append(float(a)), tpot.append(float(b))
    if not genomes:
        raise BackendError("calibrate() got no samples; allowed: (genome, ttft_ms, tpot_ms) tuples or dicts")
    return genomes, np.array(ttft), np.array(tpot)


def calibrate(samples: Sequence[Any], base: dict[str, Any] | None = None, workload: Workload = Workload(),
              fit: Sequence[str] = tuple(FITTABLE), out: str | Path | None = None) -> dict[str, Any]:
    """Least-squares fit of `fit` parameters of a roofline config `base`; returns the fitted config.

    The result carries `calibration`: the parameters, and the RMS relative error before and after.
    """
    bad = sorted(set(fit) - set(FITTABLE))
    if bad:
        raise BackendError(f"calibrate: cannot fit {bad[0]!r}; allowed: {', '.join(FITTABLE)}")
    base = {k: v for k, v in (base or {}).items() if k != "_target_"}
    base.pop("ideal", None)
    genomes, ttft, tpot = _unpack(samples)
    pop = PopArrays.from_genomes(genomes)
    meas = np.log(np.concatenate([ttft, tpot]))
    start = RooflineBackend(**base)
    # start strictly inside the bounds: an overhead of exactly 0 sits on its bound and TRF may not leave it
    x0 = np.array([np.clip(getattr(start, k), FITTABLE[k][0] + (0.02 if k.startswith("eta") else 1.0), FITTABLE[k][1])
                   for k in fit], dtype=float)
    scale = np.array([1.0 if k.startswith("eta") else max(10.0, x) for k, x in zip(fit, x0)])

    def residual(x: np.ndarray) -> np.ndarray:
        r = RooflineBackend(**{**base, **dict(zip(fit, x))}).evaluate(pop, workload)
        return np.log(np.concatenate([r.ttft_ms, r.tpot_ms])) - meas

    before = float(np.sqrt(np.mean(np.expm1(residual(x0)) ** 2)))
    lo, hi = zip(*(FITTABLE[k] for k in fit))
    sol = least_squares(residual, x0, bounds=(lo, hi), x_scale=scale, method="trf")
    after = float(np.sqrt(np.mean(np.expm1(residual(sol.x)) ** 2)))
    cfg = RooflineBackend(**{**base, **dict(zip(fit, sol.x))}).config()
    cfg["calibration"] = {"fitted": {k: float(v) for k, v in zip(fit, sol.x)}, "n_samples": len(genomes),
                          "rms_rel_error_before": before, "rms_rel_error_after": after,
                          "workload": {"prefill": workload.prefill, "decode": workload.decode, "batch": workload.batch}}
    if out is not None:
        write_config(cfg, out)
    return cfg


def write_config(cfg: dict[str, Any], path: str | Path) -> None:
    """Write a backend config YAML loadable by `build_backend` (the `calibration` block is dropped on load)."""
    import yaml

    from forge.io import atomic_write_text

    body = {k: v for k, v in cfg.items() if k != "calibration"}
    note = "# calibration: " + yaml.safe_dump(cfg.get("calibration", {}), default_flow_style=True, width=10**6).strip()
    atomic_write_text(path, note + "\n" + yaml.safe_dump(body, sort_keys=False))
